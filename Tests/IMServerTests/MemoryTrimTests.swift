import Foundation
import HookbotTestSupport
import IMCore
import XCTest

@testable import IMServer

/// The server gives malloc's free memory back once many sessions came and went (`MemoryTrim`), not while few did.
final class MemoryTrimTests: XCTestCase {
    func testATrimIsDueOnceTheChurnPassedTheThresholdAndCalmed() {
        // Below the threshold: never.
        XCTAssertFalse(MemoryTrim.due(pending: 999, recent: 0, waited: 0, threshold: 1000))
        // Past it, in the middle of the storm: not yet; once the last interval saw less than a tenth: now.
        XCTAssertFalse(MemoryTrim.due(pending: 1500, recent: 400, waited: 1, threshold: 1000))
        XCTAssertTrue(MemoryTrim.due(pending: 1500, recent: 99, waited: 2, threshold: 1000))
        // A churn that does not calm is trimmed after the patience runs out.
        XCTAssertFalse(MemoryTrim.due(pending: 50_000, recent: 500, waited: 29, threshold: 1000))
        XCTAssertTrue(MemoryTrim.due(pending: 50_000, recent: 500, waited: 30, threshold: 1000))
        // 0 turns it off.
        XCTAssertFalse(MemoryTrim.due(pending: 50_000, recent: 0, waited: 100, threshold: 0))
    }

    func testTheServerTrimsAfterManySessionsCameAndWentAndNotAfterAFew() async throws {
        let harness = try await startServer { $0.memoryTrimAfterSessions = 40 }
        let trim = harness.server.service.memoryTrim
        // Five logins and logouts (10 of 40): two of the trimmer's one-second looks go by without a trim.
        for k in 0..<5 { await (try await harness.login("few-\(k)")).close() }
        try await Task.sleep(for: .milliseconds(2_500))
        XCTAssertEqual(trim.count, 0)

        // Thirty more (70 in all, past the threshold), then quiet: one trim.
        for k in 0..<30 { await (try await harness.login("many-\(k)")).close() }
        let deadline = ContinuousClock.now + .seconds(15)
        while trim.count == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(100)) }
        XCTAssertEqual(trim.count, 1)
        // The count starts again: the server keeps working, and a quiet second later there is no second trim.
        let tom = try await harness.login("Tom")
        let cid = try await tom.startConversation(members: ["Jerry"])
        let jerry = try await harness.login("Jerry")
        try await tom.sendText("after the trim 你好 🎉", to: cid)
        let received = try await jerry.nextMessage()
        XCTAssertEqual(received.text, "after the trim 你好 🎉")
        try await Task.sleep(for: .milliseconds(1_500))
        XCTAssertEqual(trim.count, 1)
    }
}
