import HookbotTestSupport
import IMCore
import XCTest

final class LifecycleTests: XCTestCase {
    private func recall(_ client: TestClient, cid: String, mid: String?) async throws -> Command {
        var patch = Command(cmd: .patch, op: .modify)
        var item = PatchItem(cid: cid, mid: mid ?? "", timestamp: 0)
        item.recall = true
        patch.patches = [item]
        return try await client.request(patch)
    }

    func testRecallWithinTheWindowPatchesHistoryAndNotifiesMembers() async throws {
        let server = try await startServer { $0.recallWindow = 3 }
        let (tom, jerry) = try await server.login("Tom", "Jerry")
        let cid = try await tom.startConversation(members: ["Jerry"])
        let sent = try await tom.sendText("oops", to: cid)
        let late = try await tom.sendText("kept", to: cid)

        let observed1 = try await recall(jerry, cid: cid, mid: sent.uid).code
        XCTAssertEqual(observed1, 4403, "only the sender may recall")
        let observed2 = try await recall(tom, cid: cid, mid: "nope").code
        XCTAssertEqual(observed2, 4404)
        let reply = try await recall(tom, cid: cid, mid: sent.uid)
        XCTAssertEqual(reply.op, .modified)
        XCTAssertNil(reply.code)
        let event = try await jerry.next { $0.cmd == .patch }
        let patched = try required(event.patches?.first)
        XCTAssertEqual(patched.mid, sent.uid)
        XCTAssertEqual(patched.recall, true)
        XCTAssertEqual(TypedMessage.decode(patched.data ?? "")?.type, -127)

        let logs = try required(try await jerry.history(cid).logs)
        XCTAssertEqual(logs.first?.recalled, true)
        XCTAssertEqual(TypedMessage.decode(logs.first?.data ?? "")?.builtinType, .recalled)
        XCTAssertNil(logs.last?.recalled)

        // Wait for the 3 s window to close: the message's own timestamp says when.
        let closes = Double(try required(late.t) + 3000) / 1000
        while Date().timeIntervalSince1970 <= closes { try await Task.sleep(for: .milliseconds(50)) }
        let expired = try await recall(tom, cid: cid, mid: late.uid)
        XCTAssertEqual(expired.code, 4407)
        XCTAssertEqual(expired.reason, "MESSAGE_RECALL_DISABLED")
        let stillThere = try required(try await tom.history(cid).logs?.last)
        XCTAssertEqual(TypedMessage.decode(stillThere.data)?.text, "kept")
    }

    func testUnreadCountsAcrossLogoutAndLoginAndReadReceipts() async throws {
        let server = try await startServer()
        let tom = try await server.login("Tom")
        let cid = try await tom.startConversation(members: ["Jerry"])
        let other = try await tom.startConversation(members: ["Jerry", "Bob"])
        try await tom.sendText("one", to: cid)
        let second = try await tom.sendText("two", to: cid, receipt: true)
        let third = try await tom.sendText("three", to: cid)
        try await tom.sendText("elsewhere", to: other)

        let jerry = try await server.login("Jerry")
        let unread = try await jerry.next { $0.cmd == .unread }
        let counts = Dictionary(uniqueKeysWithValues: (unread.convs ?? []).map { ($0.cid, $0) })
        XCTAssertEqual(counts[cid]?.unread, 3)
        XCTAssertEqual(counts[cid]?.mid, third.uid)
        XCTAssertEqual(counts[cid]?.from, "Tom")
        XCTAssertEqual(counts[other]?.unread, 1)

        var read = Command(cmd: .read)
        read.cid = cid
        read.mid = second.uid
        let readReply = try await jerry.request(read)
        XCTAssertEqual(readReply.t, second.t)
        let receipt = try await tom.next { $0.cmd == .rcp && $0.read == true }
        XCTAssertEqual(receipt.from, "Jerry")
        XCTAssertEqual(receipt.id, second.uid)
        XCTAssertEqual(receipt.cid, cid)
        await jerry.close()

        let jerryAgain = try await server.login("Jerry")
        let after = try await jerryAgain.next { $0.cmd == .unread }
        let again = Dictionary(uniqueKeysWithValues: (after.convs ?? []).map { ($0.cid, $0.unread) })
        XCTAssertEqual(again[cid], 1)
        XCTAssertEqual(again[other], 1)
        read.mid = nil
        _ = try await jerryAgain.request(read)
        read.cid = other
        _ = try await jerryAgain.request(read)
        await jerryAgain.close()

        let jerryThird = try await server.login("Jerry")
        let none = await jerryThird.settle { $0.cmd == .unread }
        XCTAssertTrue(none.isEmpty, "nothing unread, no unread notice")
    }

    /// `read` with a timestamp in the future marks up to the newest stored message, not up to that time:
    /// other members' `max-read` stays at a real message, and later messages are unread, with receipts.
    func testReadWithAFutureTimestampIsClampedToTheNewestMessage() async throws {
        let server = try await startServer()
        let (tom, jerry, bob) = try await server.login("Tom", "Jerry", "Bob")
        let cid = try await tom.startConversation(members: ["Jerry", "Bob"])
        try await tom.sendText("one", to: cid)
        let two = try await tom.sendText("two", to: cid, receipt: true)
        let twoT = try required(two.t)

        var read = Command(cmd: .read)
        read.cid = cid
        read.t = 9_999_999_999_999
        let readReply = try await jerry.request(read)
        XCTAssertEqual(readReply.t, twoT, "the mark is the newest stored message")
        let receipt = try await tom.next { $0.cmd == .rcp && $0.read == true }
        XCTAssertEqual(receipt.id, two.uid)
        let maxRead = Command.conv(.maxRead, cid)
        let seen = try await bob.request(maxRead)
        XCTAssertEqual(seen.maxReadTimestamp, twoT)
        XCTAssertLessThanOrEqual(try required(seen.maxAckTimestamp), twoT)

        // A message after it is unread for Jerry, and reading it sends Tom its receipt.
        let three = try await tom.sendText("three", to: cid, receipt: true)
        await jerry.close()
        let jerryAgain = try await server.login("Jerry")
        let unread = try await jerryAgain.next { $0.cmd == .unread }
        XCTAssertEqual(unread.convs?.first { $0.cid == cid }?.unread, 1)
        read.t = nil
        let second = try await jerryAgain.request(read)
        XCTAssertEqual(second.t, three.t)
        let laterReceipt = try await tom.next { $0.cmd == .rcp && $0.read == true }
        XCTAssertEqual(laterReceipt.id, three.uid)
        let seenAgain = try await bob.request(maxRead)
        XCTAssertEqual(seenAgain.maxReadTimestamp, three.t)
    }

    func testCmdMessagesReachOnlineMembersOnlyAndAreNeverStored() async throws {
        let server = try await startServer()
        let (tom, jerry) = try await server.login("Tom", "Jerry")
        let cid = try await tom.startConversation(members: ["Jerry", "Bob"])
        var cmd = Command(cmd: .direct)
        cmd.cid = cid
        cmd.action = "typing"
        cmd.ext = ["state": "start", "count": 2, "urgent": false]
        let ack = try await tom.request(cmd)
        XCTAssertNil(ack.code)
        let received = try await jerry.next { $0.action != nil }
        XCTAssertEqual(received.action, "typing")
        XCTAssertEqual(received.ext?["count"], 2)
        XCTAssertEqual(received.fromPeerId, "Tom")
        XCTAssertNil(received.msg)
        let observed3 = try await tom.history(cid).logs?.count
        XCTAssertEqual(observed3, 0)

        let bob = try await server.login("Bob")
        let offline = await bob.settle { $0.cmd == .direct }
        XCTAssertTrue(offline.isEmpty)

        cmd.action = "_lcsystem"
        let observed4 = try await tom.request(cmd).code
        XCTAssertEqual(observed4, 4903)
        cmd.action = "hookbot.reload"
        let observed5 = try await tom.request(cmd).code
        XCTAssertEqual(observed5, 4903)
        cmd.action = "poke"
        cmd.ext = ["nested": ["a": 1]]
        let observed6 = try await tom.request(cmd).code
        XCTAssertEqual(observed6, 4903)
    }

    func testPriorityIsStoredAndDelivered() async throws {
        let server = try await startServer()
        let (tom, jerry) = try await server.login("Tom", "Jerry")
        let cid = try await tom.startConversation(members: ["Jerry"])
        var direct = Command(cmd: .direct)
        direct.cid = cid
        direct.msg = "urgent"
        direct.priority = "high"
        _ = try await tom.request(direct)
        let observed7 = try await jerry.nextMessage().priority
        XCTAssertEqual(observed7, "high")
        let observed8 = try await tom.history(cid).logs?.first?.priority
        XCTAssertEqual(observed8, "high")
    }
}
