import Foundation
import HookbotTestSupport
import IMCore
import XCTest

@testable import IMServer

/// The persisted push queue across a SIGKILL (docs/PUSH.md, "The queue"): the real `hookbot server` binary
/// queues pushes while the push service refuses them (503), is killed, and is started again on the same file
/// with the service answering: every push arrives, each exactly once.
final class PushKillTests: XCTestCase {
    static let secret = "the-gateway-shares-this-secret"

    func testPushesQueuedWhenTheServerIsKilledArriveOnceAfterTheRestart() async throws {
        try XCTSkipIf(TestDatabase.backend == .postgres, "one SQLite file across the kill (PushClusterTests covers PostgreSQL)")
        let binary = try XCTUnwrap(ServerProcess.binaryURL(), "build the hookbot executable first (swift build)")
        let refusing = PushTestBox(true)
        let service = try await LoopbackPushService(answer: { _ in refusing.withLock { $0 } ? 503 : 204 })
        addTeardownBlock(releasing: service) { await $0.shutdown() }
        let directory = try makeTemporaryDirectory("hookbot-push-kill")
        let settings = directory.appendingPathComponent("push.toml")
        try """
        [push]
        retry_delay = "0.2s"
        max_retry_delay = "0.5s"

        [push.webhook]
        url = "\(service.url)"
        secret = "\(Self.secret)"
        """.write(to: settings, atomically: true, encoding: .utf8)
        let store = ["--db", directory.appendingPathComponent("kill.sqlite").path, "--push-config", settings.path]

        let first = try await ServerProcess.launch(binary: binary, store: store)
        var killed = false
        defer { if !killed { first.kill() } }
        let members = (0..<5).map { "k\($0)" }
        for member in members {
            let client = try await TestClient.login(member, port: first.port)
            var add = Command(cmd: .device, op: .add)
            add.device = .object(["provider": "webhook", "token": .string("\(member)-phone")])
            let reply = try await client.request(add)
            XCTAssertEqual(reply.op, .added, "\(reply)")
            await client.close()
        }
        let tom = try await TestClient.login("Tom", port: first.port)
        try await tom.waitUntilOffline(members)
        let cid = try await tom.startConversation(members: members)
        var sent: [String] = []
        for k in 0..<10 {
            let ack = try await tom.sendText("before the kill \(k)", to: cid)
            sent.append(try XCTUnwrap(ack.uid))
        }
        // Every push has been tried at least once (and refused) before the kill.
        let refused = try await service.waitFor(count: 50, timeout: .seconds(30))
        XCTAssertEqual(Set(refused.compactMap { $0.messageID }), Set(sent))
        first.kill()
        killed = true
        await tom.close()

        refusing.withLock { $0 = false }
        let before = service.requests.count
        let second = try await ServerProcess.launch(binary: binary, store: store)
        defer { second.kill() }
        let after = try await service.waitFor(count: before + 50, timeout: .seconds(30))
        try await Task.sleep(for: .milliseconds(800)) // any duplicate would come meanwhile
        let delivered = Array(service.requests.dropFirst(before))
        XCTAssertGreaterThanOrEqual(after.count, before + 50)
        var perPush: [String: Int] = [:]
        for request in delivered { perPush["\(request.token ?? "")/\(request.messageID ?? "")", default: 0] += 1 }
        let expected = Set(members.flatMap { member in sent.map { "\(member)-phone/\($0)" } })
        XCTAssertEqual(Set(perPush.keys), expected, "every queued push arrives after the restart")
        XCTAssertEqual(perPush.values.filter { $0 > 1 }.count, 0, "and each exactly once: \(perPush.filter { $0.value > 1 })")
    }
}
