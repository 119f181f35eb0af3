import Foundation
import HookbotTestSupport
import IMCore
import PushProviders
import XCTest

@testable import IMServer

/// Two nodes on one PostgreSQL database share the push queue (docs/PUSH.md, "The queue"): both nodes' workers
/// claim (`FOR UPDATE SKIP LOCKED`), each push is sent once, and the pushes a node holds but does not send are
/// sent by the other once the hold runs out. Runs in the PostgreSQL pass (`HOOKBOT_TEST_BACKEND=postgres`
/// beside `scripts/with-postgres.sh`).
final class PushClusterTests: XCTestCase {
    func node(_ url: String, _ service: LoopbackPushService, configure: @escaping @Sendable (inout ServerConfiguration) -> Void = { _ in })
        async throws -> ServerHarness
    {
        try await ServerHarness.start { configuration in
            configuration.databaseURL = url
            PushScaleTests.configure(&configuration, [PushScaleTests.webhook("webhook", service)])
            configure(&configuration)
        }
    }

    func delivered(_ node: ServerHarness) async throws -> Int {
        let metrics = String(decoding: try await MediaRouteTests.call(node.port, "GET", "/metrics").body, as: UTF8.self)
        return metrics.split(separator: "\n").first {
            $0.hasPrefix("hookbot_push_sent_total") && $0.contains(#"outcome="delivered""#)
        }.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
    }

    /// A message stored on node A for 30 offline members: both nodes' workers take pushes from the queue, and
    /// every device gets exactly one per message.
    func testBothNodesSendAndEachPushGoesOnce() async throws {
        try XCTSkipUnless(TestDatabase.backend == .postgres, "the PostgreSQL pass runs it (HOOKBOT_TEST_BACKEND=postgres)")
        let url = try TestDatabase.postgresURL(schema: TestDatabase.schemaName())
        // The service takes 20 ms an answer, so neither node can drain the queue alone before the other looks.
        let service = try await LoopbackPushService(delay: .milliseconds(20))
        addTeardownBlock(releasing: service) { await $0.shutdown() }
        let few: @Sendable (inout ServerConfiguration) -> Void = { $0.push.queue.workers = 4 }
        let a = try await node(url, service, configure: few)
        addTeardownBlock(releasing: a) { await $0.stop() }
        let b = try await node(url, service, configure: few)
        addTeardownBlock(releasing: b) { await $0.stop() }
        let members = (0..<30).map { "c\($0)" }
        try await PushScaleTests.register(a, members, provider: "webhook") { "\($0)-phone" }
        let tom = try await a.login("Tom")
        let cid = try await tom.startConversation(members: members)
        var sent: [String] = []
        for k in 0..<5 {
            let ack = try await tom.sendText("cluster \(k)", to: cid)
            sent.append(try XCTUnwrap(ack.uid))
        }

        _ = try await service.waitFor(count: 150, timeout: .seconds(60))
        let received = await service.settle()
        var perPush: [String: Int] = [:]
        for request in received { perPush["\(request.token ?? "")/\(request.messageID ?? "")", default: 0] += 1 }
        XCTAssertEqual(Set(perPush.keys), Set(members.flatMap { member in sent.map { "\(member)-phone/\($0)" } }))
        XCTAssertEqual(perPush.values.filter { $0 > 1 }.count, 0, "each push once: \(perPush.filter { $0.value > 1 })")
        let (fromA, fromB) = (try await delivered(a), try await delivered(b))
        XCTAssertEqual(fromA + fromB, 150)
        XCTAssertGreaterThan(fromA, 0, "node A sent some")
        XCTAssertGreaterThan(fromB, 0, "node B sent some")
    }

    /// Node A claims a message's pushes and never finishes sending them (its push service hangs): they are
    /// held for A until its claim timeout, then node B takes and sends them, each once, none before the hold
    /// ran out.
    func testANodesHeldPushesAreSentByTheOtherAfterTheHold() async throws {
        try XCTSkipUnless(TestDatabase.backend == .postgres, "the PostgreSQL pass runs it (HOOKBOT_TEST_BACKEND=postgres)")
        let url = try TestDatabase.postgresURL(schema: TestDatabase.schemaName())
        let hanging = try await LoopbackPushService(answer: { _ in nil })
        addTeardownBlock(releasing: hanging) { await $0.shutdown() }
        let healthy = try await LoopbackPushService()
        addTeardownBlock(releasing: healthy) { await $0.shutdown() }
        let a = try await node(url, hanging) { configuration in
            configuration.push.queue.claimTimeout = .milliseconds(1500)
            configuration.push.queue.workers = 6 // all six held by hanging sends: A claims nothing more
            configuration.push.http.requestTimeout = .seconds(60)
        }
        addTeardownBlock(releasing: a) { await $0.stop() }
        let members = (0..<6).map { "h\($0)" }
        try await PushScaleTests.register(a, members, provider: "webhook") { "\($0)-phone" }
        let tom = try await a.login("Tom")
        let cid = try await tom.startConversation(members: members)
        let ack = try await tom.sendText("held by A", to: cid)
        let id = try XCTUnwrap(ack.uid)
        _ = try await hanging.waitFor(count: 6, timeout: .seconds(10))
        let claimed = ContinuousClock.now // A holds all six (its requests hang) from about now
        let b = try await node(url, healthy)
        addTeardownBlock(releasing: b) { await $0.stop() }

        let received = try await healthy.waitFor(count: 6, timeout: .seconds(20))
        let settled = await healthy.settle()
        XCTAssertEqual(settled.count, 6, "each once")
        XCTAssertEqual(Set(received.compactMap(\.token)), Set(members.map { "\($0)-phone" }))
        XCTAssertEqual(Set(received.compactMap(\.messageID)), [id])
        let first = try XCTUnwrap(received.map(\.at).min())
        XCTAssertGreaterThanOrEqual(first - claimed, .milliseconds(1000), "B waited for A's hold to run out")
        XCTAssertEqual(hanging.requests.count, 6, "A did not take them again")
    }
}
