import Foundation
import HookbotTestSupport
import IMCore
import NIOCore
import NIOHTTP1
import NIOPosix
import PushProviders
import XCTest

@testable import IMServer

/// Offline push at scale and under faults (docs/PUSH.md, "The queue"): a 10,000-member group, a provider that
/// hangs beside one that answers, a provider's `rate`. The push services are loopback HTTP servers the tests run.
final class PushScaleTests: XCTestCase {
    static let secret = "the-gateway-shares-this-secret"

    static func webhook(_ name: String, _ service: LoopbackPushService, rate: Double? = nil) -> PushProviderConfiguration {
        var entry = PushProviderConfiguration(name: name, kind: .webhook(WebhookSettings(url: service.url, secret: secret)))
        entry.rate = rate
        return entry
    }

    static func configure(_ configuration: inout ServerConfiguration, _ providers: [PushProviderConfiguration]) {
        configuration.push.providers = providers
        configuration.push.queue.retryDelay = .milliseconds(50)
        configuration.push.queue.maxRetryDelay = .milliseconds(200)
        configuration.push.queue.pollInterval = .milliseconds(100)
        // Thousands of device registrations below: no fsync per registration.
        configuration.synchronousFull = false
    }

    /// Registers a device for each of `clients` straight in the store (as `device add` would), 8 at a time.
    static func register(_ server: ServerHarness, _ clients: [String], provider: String, token: @escaping @Sendable (String) -> String)
        async throws
    {
        let store = try XCTUnwrap(server.server.service.store as? any PushDeviceStore)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for lane in 0..<8 {
                group.addTask {
                    for index in stride(from: lane, to: clients.count, by: 8) {
                        let now = PushDevices.stamp()
                        _ = try await store.registerPushDevice(
                            PushDeviceRecord(
                                clientID: clients[index], device: PushDevice(provider: provider, token: token(clients[index])),
                                deviceID: "",
                                createdAt: now, updatedAt: now),
                            cap: PushDevices.maxPerClient)
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    /// A conversation of Tom and `members` (created with the first 900, the rest added 500 at a time).
    static func conversation(_ tom: TestClient, _ members: [String]) async throws -> String {
        let cid = try await tom.startConversation(members: Array(members.prefix(900)))
        for start in stride(from: 900, to: members.count, by: 500) {
            let add = Command.conv(.add, cid, members: Array(members[start..<min(members.count, start + 500)]))
            let reply = try await tom.request(add, timeout: .seconds(30))
            XCTAssertNil(reply.code, "\(reply)")
        }
        return cid
    }

    /// One message to a group of 10,000 offline members queues 10,000 pushes (in batches: the device lookup and
    /// the inserts a few hundred rows a statement and transaction) without holding the message up: its ack comes
    /// while no push has been answered yet. Then every device gets exactly one.
    func testTenThousandOfflineMembersGetOnePushEachAndTheAckDoesNotWait() async throws {
        // SQLite only: on PostgreSQL the 10,000 registrations alone take most of a minute (PushClusterTests
        // covers the shared queue there).
        try XCTSkipIf(TestDatabase.backend == .postgres, "SQLite pass only")
        let service = try await LoopbackPushService(gated: true)
        addTeardownBlock(releasing: service) { await $0.shutdown() }
        let server = try await startServer { configuration in
            Self.configure(&configuration, [Self.webhook("webhook", service)])
            configuration.push.queue.workers = 64
            configuration.push.http.requestTimeout = .seconds(60)
        }
        let members = (0..<10_000).map { "m\($0)" }
        try await Self.register(server, members, provider: "webhook") { "\($0)-phone" }
        let tom = try await server.login("Tom")
        let cid = try await Self.conversation(tom, members)

        let ack = try await tom.sendText("hello ten thousand", to: cid)
        XCTAssertNil(ack.code, "\(ack)")
        // The ack is back while the push service has answered nothing (its gate is shut): the message did not
        // wait for its pushes.
        XCTAssertEqual(service.answered, 0)
        XCTAssertLessThanOrEqual(service.requests.count, 64, "no more requests in flight than workers")
        // Another message, to another conversation, is stored and acknowledged at once too, with 10,000 pushes
        // waiting ahead of its own.
        let pair = try await tom.startConversation(members: ["m0"])
        let second = try await tom.sendText("still quick", to: pair)
        XCTAssertNil(second.code, "\(second)")
        XCTAssertEqual(service.answered, 0)

        service.open()
        let received = try await service.waitFor(count: 10_001, timeout: .seconds(120))
        let settled = await service.settle()
        XCTAssertEqual(settled.count, 10_001)
        var perDevice: [String: Int] = [:]
        for request in received { perDevice[(request.token ?? "") + "/" + (request.messageID ?? ""), default: 0] += 1 }
        XCTAssertEqual(perDevice.count, 10_001, "each device once per message")
        XCTAssertTrue(perDevice.values.allSatisfy { $0 == 1 })
        XCTAssertEqual(Set(received.compactMap(\.token)), Set(members.map { "\($0)-phone" }))
        let depth = try await (server.server.service.store as? any PushQueueStore)?.pushQueueDepth()
        XCTAssertEqual(depth, 0)
    }

    /// A provider whose service accepts the connection and never answers holds only its own pushes: another
    /// provider's push, queued after 12 of the hanging one's, is delivered while the hanging requests are still
    /// waiting for their timeout; then the timeouts fire and those pushes are tried again.
    func testAHangingProviderDoesNotHoldUpAnotherOne() async throws {
        let hanging = try await LoopbackPushService(answer: { _ in nil })
        addTeardownBlock(releasing: hanging) { await $0.shutdown() }
        let closedWhenDelivered = PushTestBox<Int?>(nil)
        let healthy = try await LoopbackPushService(answer: { _ in
            closedWhenDelivered.withLock { if $0 == nil { $0 = hanging.closedConnections } }
            return 204
        })
        addTeardownBlock(releasing: healthy) { await $0.shutdown() }
        let server = try await startServer { configuration in
            Self.configure(&configuration, [Self.webhook("slowhook", hanging), Self.webhook("webhook", healthy)])
            configuration.push.queue.workers = 8
            configuration.push.http.requestTimeout = .seconds(2)
        }
        let slow = (0..<12).map { "slow\($0)" }
        try await Self.register(server, slow, provider: "slowhook") { "\($0)-phone" }
        try await Self.register(server, ["Jerry"], provider: "webhook") { _ in "jerry-phone" }
        let tom = try await server.login("Tom")
        let slowGroup = try await Self.conversation(tom, slow)
        let withJerry = try await tom.startConversation(members: ["Jerry"])
        try await tom.sendText("to the hanging service", to: slowGroup)
        _ = try await hanging.waitFor(count: 1, timeout: .seconds(10))
        try await tom.sendText("to the healthy one", to: withJerry)

        let delivered = try await healthy.waitFor(count: 1, timeout: .seconds(10))
        XCTAssertEqual(delivered.first?.token, "jerry-phone")
        XCTAssertEqual(closedWhenDelivered.withLock { $0 }, 0, "delivered before any hanging request was given up")
        // The hanging pushes time out and are tried again (the same devices, a second time).
        let tries = try await hanging.waitFor(count: 13, timeout: .seconds(20))
        XCTAssertLessThan(Set(tries.compactMap(\.token)).count, tries.count, "a push was retried after its timeout")
        XCTAssertGreaterThan(hanging.closedConnections, 0)
    }

    /// `[push.<name>] rate`: 30 pushes at 20 per second take at least 29/20 s from the first to the last.
    func testAProviderRateSpacesItsPushes() async throws {
        let service = try await LoopbackPushService(answer: { _ in 204 })
        addTeardownBlock(releasing: service) { await $0.shutdown() }
        let server = try await startServer { configuration in
            Self.configure(&configuration, [Self.webhook("webhook", service, rate: 20)])
        }
        let members = (0..<30).map { "r\($0)" }
        try await Self.register(server, members, provider: "webhook") { "\($0)-phone" }
        let tom = try await server.login("Tom")
        let cid = try await Self.conversation(tom, members)
        try await tom.sendText("paced", to: cid)
        let received = try await service.waitFor(count: 30, timeout: .seconds(20))
        let span = try XCTUnwrap(received.last?.at) - XCTUnwrap(received.first?.at)
        XCTAssertGreaterThanOrEqual(span, .milliseconds(1400), "30 pushes at 20/s are spread over at least 1.45 s")
        XCTAssertEqual(Set(received.compactMap(\.token)).count, 30)
    }
}

extension PushScaleTests {
    /// Badges: `unreadTotals` (a few index lookups per receiver, one count shared per conversation and read
    /// mark) agrees with the unread counts a session gets (`UNREAD_MESSAGES_COUNT_UPDATE`, summed): other
    /// members' messages, not one's own, after one's read mark, across conversations, and on SQLite a message an
    /// interceptor restricted to one member.
    func testBadgesAgreeWithTheUnreadCounts() async throws {
        let server = try await startServer { Self.configure(&$0, []) }
        let store = server.server.service.store
        let queue = try XCTUnwrap(store as? any PushQueueStore)
        let (tom, jerry, spike) = try await server.login("Tom", "Jerry", "Spike")
        let group = try await tom.startConversation(members: ["Jerry", "Spike"])
        let pair = try await jerry.startConversation(members: ["Tom"])
        var acks: [Command] = []
        for k in 0..<3 { acks.append(try await tom.sendText("tom \(k)", to: group)) }
        for k in 0..<2 { try await jerry.sendText("jerry \(k)", to: group) }
        try await spike.sendText("spike", to: group)
        for k in 0..<2 { try await tom.sendText("pair \(k)", to: pair) }
        // Jerry has read up to Tom's second message in the group.
        _ = try await store.markRead(cid: group, clientID: "Jerry", messageID: acks[1].uid, t: nil)
        if let sqlite = store as? SQLiteStore {
            let newest = try await store.history(cid: group, limit: 1, beforeT: nil, afterT: nil, viewer: "Tom", oldestFirst: false)
            let last = try XCTUnwrap(newest.first?.t)
            try await sqlite.db.write { db in
                try MessageTable.insert(
                    db,
                    MessageRecord(
                        id: "restricted-1", cid: group, from: "Tom", data: "for Spike", t: last + 1000, receipt: false, priority: nil),
                    dedupeToken: nil, recipients: ["Spike"])
            }
        }
        let clients = ["Tom", "Jerry", "Spike"]
        let totals = try await queue.unreadTotals(of: clients)
        for client in clients {
            let expected = try await store.unreadCounts(clientID: client).reduce(0) { $0 + $1.unread }
            XCTAssertEqual(totals[client] ?? 0, expected, client)
        }
        XCTAssertEqual(
            totals["Jerry"], 2 + 2, "Tom's third and Spike's in the group after the read mark (not its own); Tom's two in the pair")
        XCTAssertEqual(totals["Tom"], 3, "Jerry's two and Spike's one in the group; the pair's are its own")
        XCTAssertEqual(totals["Spike"], store is SQLiteStore ? 5 + 1 : 5, "everyone else's in the group, the restricted one too")
    }
}

/// A push service on loopback (SwiftNIO HTTP/1.1) for the webhook provider: logs each request (the device token
/// and message id from the signed JSON), answers what `answer` says (nil: never answers), holds every answer
/// until `open()` when `gated`, and counts the connections the client closed (a request given up).
final class LoopbackPushService: Sendable {
    struct Request: Sendable {
        var token: String?
        var messageID: String?
        var at: ContinuousClock.Instant
    }

    let url: String
    private let channel: any Channel
    private let log = PushTestBox<[Request]>([])
    private let closed = PushTestBox<Int>(0)
    private let answeredCount = PushTestBox<Int>(0)
    private let gate: PushTestBox<(open: Bool, waiting: [@Sendable () -> Void])>
    let answer: @Sendable (Request) -> Int?
    /// Each answer waits this long (a service that takes its time).
    let delay: TimeAmount

    init(gated: Bool = false, delay: TimeAmount = .zero, answer: @escaping @Sendable (Request) -> Int? = { _ in 204 }) async throws {
        gate = PushTestBox((!gated, []))
        self.answer = answer
        self.delay = delay
        let box = PushTestBox<LoopbackPushService?>(nil)
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.backlog, value: 256)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMap {
                    channel.pipeline.addHandler(LoopbackPushHandler { box.withLock { $0 } })
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        url = "http://127.0.0.1:\(channel.localAddress?.port ?? 0)/push"
        box.withLock { $0 = self }
    }

    var requests: [Request] { log.withLock { $0 } }
    var closedConnections: Int { closed.withLock { $0 } }
    var answered: Int { answeredCount.withLock { $0 } }

    /// Lets the held answers go, and every later one at once.
    func open() {
        let waiting = gate.withLock { gate in
            gate.open = true
            defer { gate.waiting = [] }
            return gate.waiting
        }
        for respond in waiting { respond() }
    }

    /// The requests once at least `count` came.
    func waitFor(count: Int, timeout: Duration) async throws -> [Request] {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let all = requests
            if all.count >= count { return all }
            try await Task.sleep(for: .milliseconds(20))
        }
        XCTFail("the push service got \(requests.count) requests, expected \(count)")
        return requests
    }

    /// The requests after a pause in which any extra would have come.
    func settle() async -> [Request] {
        try? await Task.sleep(for: .milliseconds(500))
        return requests
    }

    func shutdown() async { try? await channel.close() }

    fileprivate func received(_ body: [UInt8], respond: @escaping @Sendable (Int) -> Void) {
        let json = JSONValue.parse(String(decoding: body, as: UTF8.self))
        let request = Request(
            token: json?["device"]?["token"]?.stringValue, messageID: json?["notification"]?["data"]?["id"]?.stringValue, at: .now)
        log.withLock { $0.append(request) }
        guard let status = answer(request) else { return }
        let go: @Sendable () -> Void = { [answeredCount] in
            answeredCount.withLock { $0 += 1 }
            respond(status)
        }
        let now = gate.withLock { gate -> Bool in
            if gate.open { return true }
            gate.waiting.append(go)
            return false
        }
        if now { go() }
    }

    fileprivate func connectionClosed() { closed.withLock { $0 += 1 } }
}

private final class LoopbackPushHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    let service: @Sendable () -> LoopbackPushService?
    var body: [UInt8] = []

    init(service: @escaping @Sendable () -> LoopbackPushService?) { self.service = service }

    func channelInactive(context: ChannelHandlerContext) {
        service()?.connectionClosed()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head: body = []
        case .body(var buffer): body += buffer.readBytes(length: buffer.readableBytes) ?? []
        case .end:
            let channel = context.channel
            let delay = service()?.delay ?? .zero
            service()?.received(body) { status in
                channel.eventLoop.scheduleTask(in: delay) {
                    let head = HTTPResponseHead(
                        version: .http1_1, status: .init(statusCode: status), headers: HTTPHeaders([("content-length", "0")]))
                    channel.write(HTTPServerResponsePart.head(head), promise: nil)
                    channel.writeAndFlush(HTTPServerResponsePart.end(nil), promise: nil)
                }
            }
        }
    }
}
