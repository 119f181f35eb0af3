import HookbotTestSupport
import IMCore
import XCTest

final class HistoryAndErrorTests: XCTestCase {
    func testHistoryPagesNewestFirstInAscendingOrder() async throws {
        let server = try await startServer()
        let tom = try await server.login("Tom")
        let cid = try await tom.startConversation(members: ["Jerry"])
        for k in 0..<30 { try await tom.sendText("m\(k)", to: cid) }

        let newest = try required(try await tom.history(cid).logs)
        XCTAssertEqual(newest.count, 20)
        XCTAssertEqual(newest.compactMap { TypedMessage.decode($0.data)?.text }, (10..<30).map { "m\($0)" })
        XCTAssertTrue(newest.allSatisfy { $0.from == "Tom" })

        let older = try required(try await tom.history(cid, limit: 20, before: newest[0].timestamp).logs)
        XCTAssertEqual(older.compactMap { TypedMessage.decode($0.data)?.text }, (0..<10).map { "m\($0)" })

        let five = try required(try await tom.history(cid, limit: 5).logs)
        XCTAssertEqual(five.compactMap { TypedMessage.decode($0.data)?.text }, (25..<30).map { "m\($0)" })
        let capped = try required(try await tom.history(cid, limit: 5000).logs)
        XCTAssertEqual(capped.count, 30)

        var forwards = Command(cmd: .logs)
        forwards.cid = cid
        forwards.limit = 5
        forwards.reversed = true
        forwards.t = older[2].timestamp
        let page = try required(try await tom.request(forwards).logs)
        XCTAssertEqual(page.compactMap { TypedMessage.decode($0.data)?.text }, (3..<8).map { "m\($0)" })

        let zero = try await tom.history(cid, limit: 0)
        XCTAssertEqual(zero.cmd, .error)
        XCTAssertEqual(zero.code, 4903)
    }

    func testLargeHistoryPagesStayWithinOneFrame() async throws {
        let server = try await startServer()
        let tom = try await server.login("Tom")
        let cid = try await tom.startConversation(members: ["Jerry"])
        let body = String(repeating: "y", count: 60_000)
        for k in 0..<20 { try await tom.sendText("\(k) \(body)", to: cid) }
        // 20 × 60 KB would be a 1.2 MB frame: the page stops at the newest that fit, and paging goes on.
        let newest = try required(try await tom.history(cid, limit: 100).logs)
        XCTAssertLessThan(newest.count, 20)
        XCTAssertGreaterThan(newest.count, 0)
        XCTAssertLessThanOrEqual(newest.reduce(0) { $0 + $1.data.utf8.count }, 512 * 1024)
        var seen = newest.compactMap { TypedMessage.decode($0.data)?.text?.split(separator: " ").first.map(String.init) }
        XCTAssertEqual(seen.last, "19")
        var before = newest[0].timestamp
        while seen.count < 20 {
            let page = try required(try await tom.history(cid, limit: 100, before: before).logs)
            XCTAssertFalse(page.isEmpty)
            seen = page.compactMap { TypedMessage.decode($0.data)?.text?.split(separator: " ").first.map(String.init) } + seen
            before = page[0].timestamp
        }
        XCTAssertEqual(seen, (0..<20).map(String.init))
    }

    func testHistoryIsForMembersOnly() async throws {
        let server = try await startServer()
        let (tom, mallory) = try await server.login("Tom", "Mallory")
        let cid = try await tom.startConversation(members: ["Jerry"])
        try await tom.sendText("secret", to: cid)
        let refused = try await mallory.history(cid)
        XCTAssertEqual(refused.cmd, .error)
        XCTAssertEqual(refused.code, 4312)
        let unknown = try await tom.history("nope")
        XCTAssertEqual(unknown.code, 4401)
    }

    func testBadInputGetsErrorsAndTheConnectionStaysUsable() async throws {
        let server = try await startServer { $0.maxMessageBytes = 1024 }
        let tom = try await server.login("Tom")
        let cid = try await tom.startConversation(members: ["Jerry"])

        tom.sendRaw("{not json")
        let malformed = try await tom.next { $0.cmd == .error }
        XCTAssertEqual(malformed.code, 4901)
        XCTAssertNil(malformed.i)

        tom.sendRaw(#"{"cmd":"teleport","i":77}"#)
        let unknownCmd = try await tom.next { $0.i == 77 }
        XCTAssertEqual(unknownCmd.code, 4902)
        XCTAssertEqual(unknownCmd.reason, "UNKNOWN_COMMAND")

        tom.sendRaw(#"{"cmd":"conv","op":"fly","i":78}"#)
        let unknownOpCode = try await tom.next { $0.i == 78 }.code
        XCTAssertEqual(unknownOpCode, 4902)

        tom.sendRaw(#"{"cmd":"direct","i":79,"cid":42}"#)
        let wrongType = try await tom.next { $0.i == 79 }
        XCTAssertEqual(wrongType.code, 4901)
        XCTAssertEqual(wrongType.detail, "invalid value for field 'cid'")

        var missing = Command(cmd: .direct)
        missing.cid = cid
        let missingMsg = try await tom.request(missing)
        XCTAssertEqual(missingMsg.code, 4903)

        var huge = Command(cmd: .direct)
        huge.cid = cid
        huge.msg = String(repeating: "x", count: 1025)
        let tooLong = try await tom.request(huge)
        XCTAssertEqual(tooLong.cmd, .ack)
        XCTAssertEqual(tooLong.code, 4109)
        XCTAssertEqual(tooLong.reason, "FRAME_TOO_LONG")

        var badPriority = Command(cmd: .direct)
        badPriority.cid = cid
        badPriority.msg = "x"
        badPriority.priority = "urgent"
        let badPriorityCode = try await tom.request(badPriority).code
        XCTAssertEqual(badPriorityCode, 4903)

        let ok = try await tom.sendText("still here", to: cid)
        XCTAssertNil(ok.code)
        let logs = try required(try await tom.history(cid).logs)
        XCTAssertEqual(logs.map(\.msgId), [ok.uid].compactMap { $0 }, "rejected messages were not stored")
    }
}
