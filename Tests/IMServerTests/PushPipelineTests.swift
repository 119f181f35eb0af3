import Foundation
import HookbotTestSupport
import IMCore
import NIOCore
import NIOHTTP1
import NIOPosix
import PushProviders
import Synchronization
import XCTest

@testable import IMServer

/// Offline push on a real server (docs/PUSH.md "Who gets a push", "What it says", "The queue"): the webhook
/// provider posts to a gateway on loopback that checks the HMAC signature like an operator's gateway would.
final class PushPipelineTests: XCTestCase {
    static let secret = "the-gateway-shares-this-secret"

    func configure(_ configuration: inout ServerConfiguration, gateway: PushGateway) {
        configuration.push.providers = [PushProviderConfiguration(.webhook(WebhookSettings(url: gateway.url, secret: Self.secret)))]
        configuration.push.queue.retryDelay = .milliseconds(50)
        configuration.push.queue.maxRetryDelay = .milliseconds(200)
        configuration.push.queue.pollInterval = .milliseconds(100)
        configuration.push.http.requestTimeout = .milliseconds(500)
    }

    func send(_ client: TestClient, _ cid: String, msg: String, pushData: String? = nil, transient: Bool = false) async throws {
        var direct = Command(cmd: .direct)
        direct.cid = cid
        direct.msg = msg
        direct.pushData = pushData
        direct.transient = transient ? true : nil
        let ack = try await client.request(direct)
        XCTAssertNil(ack.code, "\(ack)")
    }

    func testOfflineMembersGetOneNotificationWithTextAndBadgeButNotOnlineMutedTransientOrCmd() async throws {
        let gateway = try await PushGateway(secret: Self.secret) { _ in 204 }
        addTeardownBlock(releasing: gateway) { await $0.shutdown() }
        let server = try await startServer { configure(&$0, gateway: gateway) }
        try await server.registerOffline("Jerry", token: "jerry-phone")
        try await server.registerOffline("Spike", token: "spike-phone")
        let tyke = try await server.login("Tyke")
        var add = Command(cmd: .device, op: .add)
        add.device = .object(["provider": "webhook", "token": "tyke-phone"])
        _ = try await tyke.request(add)
        let tom = try await server.login("Tom")
        let cid = try await tom.startConversation(members: ["Jerry", "Spike", "Tyke"], name: "猫和老鼠")
        // Spike mutes the conversation (from another login, then gone again).
        let spike = try await server.login("Spike")
        let mute = Command.conv(.mute, cid)
        _ = try await spike.request(mute)
        await spike.close()
        try await server.waitUntilOffline("Spike")

        try await send(tom, cid, msg: TypedMessage.text("typing").encoded(), transient: true)
        var cmd = Command(cmd: .direct)
        cmd.cid = cid
        cmd.action = "wave"
        _ = try await tom.request(cmd)
        let long = String(repeating: "喵👍🏽", count: 150)
        // Each push is awaited before the next message: the badge is the unread count when it is sent.
        try await send(tom, cid, msg: TypedMessage.text("耗子，起床！🧀").encoded())
        _ = try await gateway.waitFor(count: 1)
        try await send(tom, cid, msg: #"{"_lctype":-2,"_lcfile":{"url":"https://example.com/a.png"}}"#)
        _ = try await gateway.waitFor(count: 2)
        try await send(tom, cid, msg: TypedMessage.text(long).encoded())
        _ = try await gateway.waitFor(count: 3)
        try await send(tom, cid, msg: "plain", pushData: #"{"alert":{"title":"Tom","body":"Custom alert"},"badge":7,"key":"v"}"#)
        let pushes = try await gateway.waitFor(count: 4)
        let settled = await gateway.settle()
        XCTAssertEqual(settled.count, 4, "only Jerry's device, once per stored message: \(settled.map(\.text))")
        XCTAssertEqual(Set(settled.map { $0.json?["device"]?["token"]?.stringValue }), ["jerry-phone"])
        XCTAssertTrue(settled.allSatisfy(\.signatureValid))
        let notifications = pushes.compactMap { $0.json?["notification"]?.objectValue }.sorted {
            ($0["badge"]?.intValue ?? 0) < ($1["badge"]?.intValue ?? 0)
        }
        XCTAssertEqual(notifications.count, 4)
        XCTAssertEqual(notifications[0]["body"], "Tom: 耗子，起床！🧀")
        XCTAssertEqual(notifications[0]["title"], "猫和老鼠")
        XCTAssertEqual(notifications[0]["badge"], 1)
        XCTAssertEqual(notifications[0]["data"]?["cid"]?.stringValue, cid)
        XCTAssertEqual(notifications[1]["body"], "Tom sent a photo")
        XCTAssertEqual(notifications[1]["badge"], 2)
        let cut = try XCTUnwrap(notifications[2]["body"]?.stringValue)
        XCTAssertEqual(cut.count, 200)
        XCTAssertTrue(cut.hasPrefix("Tom: 喵👍🏽喵"))
        XCTAssertTrue(cut.hasSuffix("…"))
        XCTAssertEqual(cut.dropLast().last, "👍🏽", "cut between characters, the emoji and its skin tone kept whole")
        XCTAssertEqual(notifications[2]["badge"], 3)
        // pushData wins, its badge too.
        XCTAssertEqual(notifications[3]["title"], "Tom")
        XCTAssertEqual(notifications[3]["body"], "Custom alert")
        XCTAssertEqual(notifications[3]["badge"], 7)
        XCTAssertEqual(notifications[3]["data"]?["key"], "v")
        let depth = try await (server.server.service.store as? any PushQueueStore)?.pushQueueDepth()
        XCTAssertEqual(depth, 0)
    }

    /// A group of 30 offline members, two of them with a second device: one message, one push per device (the
    /// devices of all receivers are read in one query).
    func testEveryOfflineMemberOfAGroupGetsOnePushPerDevice() async throws {
        let gateway = try await PushGateway(secret: Self.secret) { _ in 204 }
        addTeardownBlock(releasing: gateway) { await $0.shutdown() }
        let server = try await startServer { configure(&$0, gateway: gateway) }
        let members = (1...30).map { "member-\($0)" }
        for member in members { try await server.registerOffline(member, token: "\(member)-phone") }
        for member in members.prefix(2) { try await server.registerOffline(member, token: "\(member)-tablet") }
        let tom = try await server.login("Tom")
        let cid = try await tom.startConversation(members: members)
        try await send(tom, cid, msg: TypedMessage.text("大家好 👋").encoded())
        _ = try await gateway.waitFor(count: 32)
        let settled = await gateway.settle()
        let tokens = settled.compactMap { $0.json?["device"]?["token"]?.stringValue }
        XCTAssertEqual(tokens.count, 32, "\(tokens)")
        XCTAssertEqual(Set(tokens), Set(members.map { "\($0)-phone" } + members.prefix(2).map { "\($0)-tablet" }))
        XCTAssertTrue(settled.allSatisfy { $0.json?["notification"]?["body"]?.stringValue == "Tom: 大家好 👋" })
    }

    func testAGoneDeviceIsRemovedAndA503IsRetried() async throws {
        let tries = PushTestBox<[String: Int]>([:])
        let gateway = try await PushGateway(secret: Self.secret) { token in
            let attempt = tries.withLock { counts in
                counts[token, default: 0] += 1
                return counts[token]!
            }
            switch token {
            case "gone": return 410
            case "flaky": return attempt == 1 ? 503 : 204
            default: return 204
            }
        }
        addTeardownBlock(releasing: gateway) { await $0.shutdown() }
        let server = try await startServer { configure(&$0, gateway: gateway) }
        try await server.registerOffline("Jerry", token: "gone")
        try await server.registerOffline("Spike", token: "flaky")
        let tom = try await server.login("Tom")
        let cid = try await tom.startConversation(members: ["Jerry", "Spike"])
        try await send(tom, cid, msg: TypedMessage.text("hello").encoded())

        let received = try await gateway.waitFor(count: 3)
        let byToken = Dictionary(grouping: received) { $0.json?["device"]?["token"]?.stringValue ?? "" }
        XCTAssertEqual(byToken["gone"]?.count, 1)
        XCTAssertEqual(byToken["flaky"]?.count, 2, "the 503 was retried and then delivered")
        let devices = try await (server.server.service.store as? any PushDeviceStore)?.pushDevices(of: "Jerry")
        XCTAssertEqual(devices?.count, 0, "the device the gateway called gone is removed")
        let spikeDevices = try await (server.server.service.store as? any PushDeviceStore)?.pushDevices(of: "Spike")
        XCTAssertEqual(spikeDevices?.count, 1)
        try await send(tom, cid, msg: TypedMessage.text("again").encoded())
        let after = try await gateway.waitFor(count: 4)
        XCTAssertEqual(after.last?.json?["device"]?["token"], "flaky", "Jerry's removed device gets nothing more")
        let settled = await gateway.settle()
        XCTAssertEqual(settled.count, 4)
        let metrics = String(decoding: try await MediaRouteTests.call(server.port, "GET", "/metrics").body, as: UTF8.self)
        func sent(_ outcome: String) -> Int? {
            metrics.split(separator: "\n").first {
                $0.hasPrefix("hookbot_push_sent_total") && $0.contains(#"outcome="\#(outcome)""#) && $0.contains(#"provider="webhook""#)
            }.flatMap { Int($0.split(separator: " ").last ?? "") }
        }
        XCTAssertEqual(sent("delivered"), 2, metrics)
        XCTAssertEqual(sent("device_gone"), 1, metrics)
        XCTAssertEqual(sent("retry"), 1, metrics)
        XCTAssertTrue(metrics.contains("hookbot_push_queue_depth 0"), metrics)
    }

    func testPushesQueuedBeforeARestartAreSentAfterIt() async throws {
        // The first gateway never answers (each attempt times out and is retried); the server is stopped with
        // the push still queued, and the next server, on the same file, sends it to a gateway that answers.
        let silent = try await PushGateway(secret: Self.secret, hang: true) { _ in 204 }
        addTeardownBlock(releasing: silent) { await $0.shutdown() }
        let first = try await ServerHarness.start { configure(&$0, gateway: silent) }
        try await first.registerOffline("Jerry", token: "jerry-phone")
        let tom = try await first.login("Tom")
        let cid = try await tom.startConversation(members: ["Jerry"])
        try await send(tom, cid, msg: TypedMessage.text("before the restart").encoded())
        _ = try await silent.waitFor(count: 1)
        await tom.close()
        await first.stop()
        if TestDatabase.backend != .postgres { // a stopped server's PostgreSQL pool is closed
            let depth = try await (first.server.service.store as? any PushQueueStore)?.pushQueueDepth()
            XCTAssertEqual(depth, 1)
        }

        let gateway = try await PushGateway(secret: Self.secret) { _ in 204 }
        addTeardownBlock(releasing: gateway) { await $0.shutdown() }
        _ = try await startServer(directory: first.directory) { configure(&$0, gateway: gateway) }
        let pushes = try await gateway.waitFor(count: 1)
        XCTAssertEqual(pushes.first?.json?["notification"]?["body"], "Tom: before the restart")
        XCTAssertEqual(pushes.first?.json?["device"]?["token"], "jerry-phone")
        let settled = await gateway.settle()
        XCTAssertEqual(settled.count, 1)
    }

    func testContentFromTemplatesAndPushData() {
        let record = MessageRecord(
            id: "m1", cid: "c1", from: "Tom", data: TypedMessage.text("hi").encoded(), t: 1, receipt: false, priority: nil)
        let templates = PushTemplates()
        XCTAssertEqual(PushContent.make(for: record, pushData: nil, conversationName: nil, templates: templates).title, "c1")
        let text = PushContent.make(for: record, pushData: "你有一条新消息", conversationName: "x", templates: templates)
        XCTAssertEqual(text.body, "你有一条新消息")
        XCTAssertNil(text.badge)
        let silent = PushContent.make(
            for: record, pushData: #"{"content-available":1,"badge":"Increment"}"#, conversationName: "x", templates: templates)
        XCTAssertTrue(silent.notification(unread: 3).isBackground)
        XCTAssertEqual(silent.notification(unread: 3).badge, 3)
        XCTAssertEqual(PushContent(stored: text.stored), text)
        XCTAssertEqual(PushContent.truncated("🇨🇳🇨🇳🇨🇳", to: 2), "🇨🇳…")
    }
}

/// One request the gateway received.
struct GatewayRequest: Sendable {
    var body: [UInt8]
    var signatureValid: Bool
    var text: String { String(decoding: body, as: UTF8.self) }
    var json: JSONValue? { JSONValue.parse(text) }
}

/// An operator's push gateway on loopback (SwiftNIO HTTP/1.1): checks `X-Hookbot-Signature`, answers the
/// status `answer` gives for the device token (401 for a bad signature), or never answers with `hang`.
final class PushGateway: Sendable {
    let url: String
    private let channel: any Channel
    private let received = PushTestBox<[GatewayRequest]>([])

    init(secret: String, hang: Bool = false, answer: @escaping @Sendable (String) -> Int) async throws {
        let log = received
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMap {
                    channel.pipeline.addHandler(GatewayHandler(secret: secret, hang: hang, answer: answer, log: log))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        url = "http://127.0.0.1:\(channel.localAddress?.port ?? 0)/push"
    }

    func requests() -> [GatewayRequest] { received.withLock { $0 } }

    /// The requests once at least `count` came (10 s at most).
    func waitFor(count: Int) async throws -> [GatewayRequest] {
        try await waitUntil("\(count) requests at the gateway (\(requests().count) came)", every: .milliseconds(10)) {
            requests().count >= count
        }
        return requests()
    }

    /// The requests after a pause in which any extra would have come.
    func settle() async -> [GatewayRequest] {
        try? await Task.sleep(for: .milliseconds(400))
        return requests()
    }

    func shutdown() async { try? await channel.close() }
}

private final class GatewayHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    let secret: String
    let hang: Bool
    let answer: @Sendable (String) -> Int
    let log: PushTestBox<[GatewayRequest]>
    var body: [UInt8] = []
    var signature = ""

    init(secret: String, hang: Bool, answer: @escaping @Sendable (String) -> Int, log: PushTestBox<[GatewayRequest]>) {
        self.secret = secret
        self.hang = hang
        self.answer = answer
        self.log = log
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            body = []
            signature = head.headers.first(name: "x-hookbot-signature") ?? ""
        case .body(var buffer):
            body += buffer.readBytes(length: buffer.readableBytes) ?? []
        case .end:
            let valid = signature == WebhookProvider.signature(of: body, secret: secret)
            log.withLock { $0.append(GatewayRequest(body: body, signatureValid: valid)) }
            if hang { return }
            let token = JSONValue.parse(String(decoding: body, as: UTF8.self))?["device"]?["token"]?.stringValue ?? ""
            let status = valid ? answer(token) : 401
            var headers = HTTPHeaders([("content-length", "0")])
            if status == 503 { headers.add(name: "retry-after", value: "0") }
            context.write(
                wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .init(statusCode: status), headers: headers))),
                promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}

/// A value behind a lock that closures and handlers can share.
final class PushTestBox<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<R>(_ body: (inout Value) -> R) -> R { mutex.withLock { body(&$0) } }
}
