import Foundation
import HookbotTestSupport
import IMCore
import XCTest

final class DurabilityTests: XCTestCase {
    func testConversationsHistoryAndBacklogSurviveRestart() async throws {
        let first = try await ServerHarness.start()
        let tom = try await first.login("Tom")
        let cid = try await tom.startConversation(members: ["Jerry"], name: "persisted")
        var uids: [String] = []
        for k in 0..<10 { uids.append(try required(try await tom.sendText("m\(k)", to: cid).uid)) }
        await tom.close()

        let second = try await first.restarted()
        addTeardownBlock(releasing: second) { await $0.stop() }
        let tomAgain = try await second.login("Tom")
        let restoredIDs = try await tomAgain.history(cid).logs?.map(\.msgId)
        XCTAssertEqual(restoredIDs, uids)
        let jerry = try await second.login("Jerry")
        var offline: [String] = []
        for _ in 0..<10 { offline.append(try required(try await jerry.nextMessage().id)) }
        XCTAssertEqual(offline, uids)
        let next = try await tomAgain.sendText("after restart", to: cid)
        let previousTimestamp = try await tomAgain.history(cid, limit: 2).logs?.first?.timestamp
        XCTAssertGreaterThan(try XCTUnwrap(next.t), try XCTUnwrap(previousTimestamp))
    }

    /// Runs the real `hookbot server` binary, kills it with SIGKILL mid-stream, and checks that every
    /// acknowledged message is in history after a restart on the same file.
    func testAcknowledgedMessagesSurviveSIGKILL() async throws {
        let binary = try XCTUnwrap(ServerProcess.binaryURL(), "build the hookbot executable first (swift build)")
        let directory = try makeTemporaryDirectory("hookbot-kill")
        let db = directory.appendingPathComponent("kill.sqlite").path

        let process = try await ServerProcess.launch(binary: binary, db: db)
        let tom = try await TestClient.login("Tom", port: process.port)
        let cid = try await tom.startConversation(members: ["Jerry"])
        var acked: [String] = []
        try await withThrowingTaskGroup(of: String?.self) { group in
            for k in 0..<200 {
                group.addTask { try? await tom.sendText("m\(k)", to: cid, timeout: .seconds(5)).uid }
            }
            var killed = false
            for try await uid in group {
                if let uid { acked.append(uid) }
                if acked.count == 100, !killed {
                    killed = true
                    process.kill()
                }
            }
        }
        XCTAssertGreaterThanOrEqual(acked.count, 100)

        let restarted = try await ServerProcess.launch(binary: binary, db: db)
        defer { restarted.kill() }
        let tomAgain = try await TestClient.login("Tom", port: restarted.port)
        let logs = try required(try await tomAgain.history(cid, limit: 1000).logs)
        let stored = Set(logs.map(\.msgId))
        XCTAssertTrue(Set(acked).isSubset(of: stored), "\(Set(acked).subtracting(stored).count) acknowledged messages lost")
    }
}

extension TestClient {
    func sendText(_ text: String, to cid: String, timeout: Duration) async throws -> Command {
        var direct = Command(cmd: .direct)
        direct.cid = cid
        direct.msg = TypedMessage.text(text).encoded()
        return try await request(direct, timeout: timeout)
    }
}
