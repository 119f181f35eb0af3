import Foundation
import GRDB
import HookbotTestSupport
import IMCore
import XCTest

@testable import IMServer

/// The SQLite store's batch transaction (`SQLiteStore.batchWriter`: its own cached `BEGIN IMMEDIATE` and `COMMIT`
/// around the batch, and a lean read of the target conversation).
final class WriterBatchTests: XCTestCase {
    /// `sender`'s `text` is stored in `cid`, reaches `receiver` and not `excluded`.
    private func assertStored(
        _ text: String, from sender: TestClient, in cid: String, reaches receiver: TestClient, notReaching excluded: TestClient,
        file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        let ack = try await sender.sendText(text, to: cid)
        XCTAssertNil(ack.code, "\(ack)", file: file, line: line)
        let received = try await receiver.nextMessage()
        XCTAssertEqual(received.text, text, file: file, line: line)
        XCTAssertEqual(received.id, ack.uid, file: file, line: line)
        let toExcluded = await excluded.settle { $0.cmd == .direct }
        XCTAssertTrue(toExcluded.isEmpty, "no longer a member: \(toExcluded)", file: file, line: line)
    }

    /// A temporary conversation of `client` with `members`.
    private func startTemporary(by client: TestClient, with members: [String]) async throws -> String {
        var start = Command(cmd: .conv, op: .start)
        start.m = members
        start.tempConv = true
        return try required(try await client.request(start).cid)
    }

    /// A batch whose statement fails is rolled back whole: the sender gets 4200, nothing of it is stored, the
    /// conversation's `lm` does not move, and the next batch on the same connection commits and is delivered.
    func testAFailedBatchIsRolledBackAndTheNextOneCommits() async throws {
        try XCTSkipIf(TestDatabase.backend == .postgres, "the SQLite store's transaction")
        let server = try await startServer()
        let (tom, jerry) = try await server.login("Tom", "Jerry")
        let cid = try await tom.startConversation(members: ["Jerry"], name: "猫和老鼠")
        let before = try await tom.sendText("早上好 ☀️", to: cid)
        let beforeT = try XCTUnwrap(before.t)
        let first = try await jerry.nextMessage()
        XCTAssertEqual(first.text, "早上好 ☀️")

        // Another connection to the file (as an operator's sqlite3 would be) makes every insert of a text with
        // "boom" fail inside the server's transaction; the server's cached statements are prepared again.
        let pool = try DatabasePool(path: server.databasePath)
        try await pool.write { db in
            try db.execute(
                sql: """
                    CREATE TRIGGER refuse_boom BEFORE INSERT ON messages WHEN NEW.data LIKE '%boom%'
                    BEGIN SELECT RAISE(ABORT, 'boom refused'); END
                    """)
        }
        let failed = try await tom.sendText("boom 💥 @Jerry", to: cid)
        XCTAssertEqual(failed.code, IMErrorCode.internalError.rawValue, "\(failed)")
        XCTAssertNil(failed.uid)
        let lm = try await pool.read { db in try Int64.fetchOne(db, sql: "SELECT lm FROM conversations WHERE id = ?", arguments: [cid]) }
        XCTAssertEqual(lm, beforeT, "the failed batch's lm update was rolled back")

        let after = try await tom.sendText("再试一次 🐭", to: cid)
        let afterT = try XCTUnwrap(after.t)
        XCTAssertGreaterThan(afterT, beforeT)
        let delivered = try await jerry.nextMessage()
        XCTAssertEqual(delivered.text, "再试一次 🐭")
        XCTAssertEqual(delivered.id, after.uid)
        let stored = try await pool.read { db in
            try String.fetchAll(db, sql: "SELECT data FROM messages WHERE cid = ? ORDER BY t", arguments: [cid])
        }
        XCTAssertEqual(stored.count, 2)
        XCTAssertFalse(stored.contains { $0.contains("boom") })
        let lmAfter = try await pool.read { db in
            try Int64.fetchOne(db, sql: "SELECT lm FROM conversations WHERE id = ?", arguments: [cid])
        }
        XCTAssertEqual(lmAfter, afterT)
        try pool.close()
    }

    /// The batch reads only whether the target exists and is a chat room: a message to a conversation that
    /// does not exist, or to an expired temporary one, is refused with 4401, and one sent at the same time to a
    /// conversation that exists (often in the same batch) commits.
    func testMissingAndExpiredConversationsAreRefusedInABatchThatCommitsTheRest() async throws {
        try XCTSkipIf(TestDatabase.backend == .postgres, "the SQLite store's batch")
        let server = try await startServer()
        let (tom, jerry) = try await server.login("Tom", "Jerry")
        let cid = try await tom.startConversation(members: ["Jerry"])
        let temporary = try await startTemporary(by: tom, with: ["Jerry"])
        let pool = try DatabasePool(path: server.databasePath)
        try await pool.write { db in
            try db.execute(sql: "UPDATE conversations SET expires_at = 1 WHERE id = ?", arguments: [temporary])
        }
        try pool.close()
        async let missing = tom.sendText("你在吗？", to: "no-such-conversation")
        async let expired = tom.sendText("过期了", to: temporary)
        async let stored = tom.sendText("在的 👋", to: cid)
        let (missingAck, expiredAck, storedAck) = try await (missing, expired, stored)
        XCTAssertEqual(missingAck.code, IMErrorCode.invalidMessagingTarget.rawValue, "\(missingAck)")
        XCTAssertEqual(expiredAck.code, IMErrorCode.invalidMessagingTarget.rawValue, "\(expiredAck)")
        XCTAssertNil(storedAck.code)
        let delivered = try await jerry.nextMessage()
        XCTAssertEqual(delivered.text, "在的 👋")
        XCTAssertEqual(delivered.id, storedAck.uid)
    }

    /// A batch reads a conversation's members and row once and later batches keep them
    /// (`BatchTargets`); a member removed or added through the server changes who the next message reaches,
    /// and whether a sender is a member.
    func testMembershipChangesThroughTheServerReachTheNextBatch() async throws {
        let server = try await startServer()
        let (tom, jerry, bob) = try await server.login("Tom", "Jerry", "Bob")
        let cid = try await tom.startConversation(members: ["Jerry"], name: "周末")
        try await tom.sendText("一起吃饭吗？", to: cid)
        let first = try await jerry.nextMessage()
        XCTAssertEqual(first.text, "一起吃饭吗？")

        let removed = try await tom.request(Command.conv(.remove, cid, members: ["Jerry"]))
        XCTAssertEqual(removed.op, .removed, "\(removed)")
        let added = try await tom.request(Command.conv(.add, cid, members: ["Bob"]))
        XCTAssertEqual(added.op, .added, "\(added)")
        try await assertStored("周六中午 🍜", from: tom, in: cid, reaches: bob, notReaching: jerry)
        let refused = try await jerry.sendText("我也去", to: cid)
        XCTAssertEqual(refused.code, IMErrorCode.invalidMessagingTarget.rawValue, "\(refused)")
    }

    /// Changes another connection commits to the file (an operator's `sqlite3`, another process) are seen by the
    /// next batch too (`PRAGMA data_version`): members deleted and inserted, a temporary conversation expired.
    func testChangesCommittedByAnotherConnectionReachTheNextBatch() async throws {
        try XCTSkipIf(TestDatabase.backend == .postgres, "the SQLite store's batch")
        let server = try await startServer()
        let (tom, jerry, bob) = try await server.login("Tom", "Jerry", "Bob")
        let cid = try await tom.startConversation(members: ["Jerry"])
        let temporary = try await startTemporary(by: tom, with: ["Jerry"])
        try await tom.sendText("你好 @Jerry", to: cid)
        try await tom.sendText("临时的 ⏳", to: temporary)
        for _ in 0..<2 { _ = try await jerry.nextMessage() }

        let pool = try DatabasePool(path: server.databasePath)
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM members WHERE cid = ? AND client_id = 'Jerry'", arguments: [cid])
            try db.execute(
                sql: "INSERT INTO members (cid, client_id, joined_at, delivered_t, read_t) VALUES (?, 'Bob', 1, 0, 0)", arguments: [cid])
            try db.execute(sql: "UPDATE conversations SET expires_at = 1 WHERE id = ?", arguments: [temporary])
        }
        try pool.close()
        try await assertStored("换人了 🐱", from: tom, in: cid, reaches: bob, notReaching: jerry)
        let expired = try await tom.sendText("还在吗", to: temporary)
        XCTAssertEqual(expired.code, IMErrorCode.invalidMessagingTarget.rawValue, "\(expired)")
    }

    /// Message ids: 22 base-62 characters, a prefix drawn once per process and a counter, so ids of one process
    /// sort in the order they were given.
    func testMessageIDsAreBase62WithOnePrefixAndAnIncreasingCounter() {
        let ids = (0..<200).map { _ in Identifiers.messageID() }
        let alphabet = Set("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
        for id in ids {
            XCTAssertEqual(id.count, 22, id)
            XCTAssertTrue(id.allSatisfy(alphabet.contains), id)
            XCTAssertEqual(id.prefix(10), ids[0].prefix(10))
        }
        // Other tests run in parallel threads may take ids in between: strictly increasing, not consecutive.
        XCTAssertEqual(ids, ids.sorted())
        XCTAssertEqual(Set(ids).count, ids.count)
    }

    /// `IMServer.writerCPUSeconds` (what `hookbot bench` reports as `writerCPUMicrosPerMessage`): the SQLite
    /// pipeline's writer thread's CPU clock plus that of batches committed inline on an event loop (as these, one at a
    /// time, are), which grows as batches commit; nil on PostgreSQL.
    func testTheWriterThreadsCPUTimeGrowsWithStoredMessages() async throws {
        let server = try await startServer()
        let (tom, jerry) = try await server.login("Tom", "Jerry")
        let cid = try await tom.startConversation(members: ["Jerry"])
        try await tom.sendText("热身", to: cid)
        guard TestDatabase.backend == .sqlite else {
            XCTAssertNil(server.server.writerCPUSeconds)
            return
        }
        let before = try XCTUnwrap(server.server.writerCPUSeconds)
        for k in 0..<100 { try await tom.sendText("第 \(k) 条 ✉️", to: cid) }
        for _ in 0..<101 { _ = try await jerry.nextMessage() }
        let after = try XCTUnwrap(server.server.writerCPUSeconds)
        XCTAssertGreaterThan(after, before)
        XCTAssertLessThan(after - before, 10, "CPU seconds, not another unit")
    }

    /// A resend with the same dedupe token is found by the insert itself (`ON CONFLICT … DO NOTHING` on the dedupe
    /// index): in the same batch or a later one it is acked as the first, stored and delivered once, and moves neither
    /// the conversation's timestamps nor its `lm`; another sender's message with the same token is its own.
    func testResendsWithADedupeTokenAreStoredOnceInTheSameBatchAndLater() async throws {
        try XCTSkipIf(TestDatabase.backend == .postgres, "the SQLite store's insert")
        let server = try await startServer()
        let (tom, jerry) = try await server.login("Tom", "Jerry")
        let cid = try await tom.startConversation(members: ["Jerry"], name: "周末 🏕️")
        // Sent back to back (one read on the server, so usually one batch): the second is a resend of the first.
        async let first = tom.sendText("周六去露营 ⛺️ @Jerry", to: cid, dedupeToken: "camp-1")
        async let resent = tom.sendText("周六去露营 ⛺️ @Jerry", to: cid, dedupeToken: "camp-1")
        async let other = tom.sendText("带上吉他 🎸", to: cid, dedupeToken: "camp-2")
        let (a, b, c) = try await (first, resent, other)
        for ack in [a, b, c] { XCTAssertNil(ack.code, "\(ack)") }
        XCTAssertEqual(a.uid, b.uid)
        XCTAssertEqual(a.t, b.t)
        XCTAssertNotEqual(a.uid, c.uid)
        // Jerry's own message with Tom's token is not a resend of Tom's.
        let jerrys = try await jerry.sendText("好呀！", to: cid, dedupeToken: "camp-1")
        XCTAssertNil(jerrys.code, "\(jerrys)")
        XCTAssertNotEqual(jerrys.uid, a.uid)
        // A later batch: the resend is acked as the original, and nothing moves.
        let late = try await tom.sendText("带上吉他 🎸", to: cid, dedupeToken: "camp-2")
        XCTAssertEqual(late.uid, c.uid)
        XCTAssertEqual(late.t, c.t)

        var delivered: [String] = []
        for _ in 0..<2 { delivered.append(try required(try await jerry.nextMessage().id)) }
        XCTAssertEqual(Set(delivered), [try required(a.uid), try required(c.uid)])
        let more = await jerry.settle { $0.cmd == .direct }
        XCTAssertTrue(more.isEmpty, "a resend was delivered again: \(more)")
        let logs = try required(try await tom.history(cid, limit: 10).logs)
        XCTAssertEqual(logs.map(\.msgId).sorted(), [a.uid, c.uid, jerrys.uid].compactMap { $0 }.sorted())
        let newest = try required(logs.map(\.timestamp).max())
        XCTAssertEqual(newest, jerrys.t)
        let pool = try DatabasePool(path: server.databasePath)
        let lm = try await pool.read { db in try Int64.fetchOne(db, sql: "SELECT lm FROM conversations WHERE id = ?", arguments: [cid]) }
        XCTAssertEqual(lm, newest, "a resend does not move lm")
        try pool.close()
    }

    /// Acks of messages the last batches stored move delivery cursors without a lookup (`RecentMessages`): an ack
    /// that names a recent message of another conversation moves nothing, a true one moves its conversation's.
    func testAcksOfRecentMessagesMoveOnlyTheirOwnConversationsCursor() async throws {
        let server = try await startServer()
        let tom = try await server.login("Tom")
        let work = try await tom.startConversation(members: ["Jerry"], name: "工作")
        let home = try await tom.startConversation(members: ["Jerry"], name: "家")
        let jerry = try await server.login("Jerry")
        let monday = try await tom.sendText("周一开会 📅", to: work)
        let dinner = try await tom.sendText("晚饭吃什么？🍲", to: home)
        for _ in 0..<2 { _ = try await jerry.nextMessage() }
        for cid in [work, home] {
            // First claimed for the other conversation (moves nothing), then for its own.
            var ack = Command(cmd: .ack)
            ack.cid = cid
            ack.mid = dinner.uid
            _ = try await jerry.request(ack)
        }
        await jerry.close()

        let again = try await server.login("Jerry")
        let redelivered = try await again.nextMessage()
        XCTAssertEqual(redelivered.id, monday.uid)
        XCTAssertEqual(redelivered.offline, true)
        let more = await again.settle { $0.cmd == .direct }
        XCTAssertTrue(more.isEmpty, "the dinner message was acknowledged: \(more)")
    }

    /// `RecentMessages` keeps at most its capacity and always the newest half of it: two generations, the older
    /// dropped whole when the newer fills (no removal per message). What it answers is what the batch stored,
    /// for that conversation only; a failed or duplicate outcome is not remembered.
    func testRecentMessagesKeepTheNewestWithinTheirCapacity() {
        let recent = RecentMessages(capacity: 8)
        let cids = ["工作群", "家 🏠"]
        var records: [MessageRecord] = []
        for k in 0..<21 {
            let record = MessageRecord(
                id: "msg-\(k)", cid: cids[k % 2], from: k % 3 == 0 ? "Tom" : "小明", data: "第 \(k) 条 🎉", t: 1_000 + Int64(k),
                receipt: false, priority: nil)
            records.append(record)
            // Sometimes a batch of two, with a failed and a duplicate outcome among them.
            recent.remember([
                .failed(IMError(.invalidMessagingTarget, "not a member")), .stored(record, members: ["Tom", "小明"], room: false),
                .duplicate(MessageRecord(id: "dup-\(k)", cid: record.cid, from: "Tom", data: "重发", t: 1, receipt: false, priority: nil)),
            ])
            XCTAssertLessThanOrEqual(recent.count, 8)
            for newest in records.suffix(4) {
                XCTAssertEqual(recent.timestamp(of: newest.id, in: newest.cid), newest.t, "after \(k): \(newest.id)")
                XCTAssertNil(recent.timestamp(of: newest.id, in: newest.cid == cids[0] ? cids[1] : cids[0]))
            }
            XCTAssertNil(recent.timestamp(of: "dup-\(k)", in: record.cid))
        }
        for old in records.prefix(12) { XCTAssertNil(recent.timestamp(of: old.id, in: old.cid), old.id) }
        XCTAssertEqual(recent.count, 5)
    }

    /// Acks ride with the next message, or get a transaction of their own once they waited the pipeline's delay
    /// (`MessagePipeline.cursorDelay`); an ack recorded after a message took the earlier ones along waits its own full
    /// delay (the timer is set again for it). None is lost on the way: a chat at conversation pace, each message
    /// acknowledged before the next is sent, then a last ack alone; every cursor lands and nothing is redelivered.
    func testAcksBetweenMessagesAllLandWhetherTheyRideAlongOrWaitAlone() async throws {
        let server = try await startServer()
        let (tom, jerry) = try await server.login("Tom", "Jerry")
        let cid = try await tom.startConversation(members: ["Jerry"], name: "周末 🏕️")
        var committedBeforeLastAck = 0
        for k in 1...12 {
            let sent = try await tom.sendText("第 \(k) 条：周六几点出发？⛺️ @Jerry", to: cid)
            XCTAssertNil(sent.code, "\(sent)")
            // After the last message's commit, only the last ack can start a transaction (earlier acks rode with a
            // message or were written alone before it).
            committedBeforeLastAck = server.server.storageStats.transactions
            let received = try await jerry.nextMessage()
            XCTAssertEqual(received.id, sent.uid)
            var ack = Command(cmd: .ack)
            ack.cid = cid
            ack.mid = received.id
            _ = try await jerry.request(ack)
            // Sometimes a pause longer than the delay, so that some acks are written alone.
            if k % 4 == 0 { try await Task.sleep(for: .milliseconds(30)) }
        }
        let deadline = ContinuousClock.now + .seconds(2)
        while server.server.storageStats.transactions == committedBeforeLastAck, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        XCTAssertEqual(server.server.storageStats.transactions, committedBeforeLastAck + 1, "the last ack, alone, gets its transaction")
        let stats = server.server.storageStats
        XCTAssertEqual(stats.messages, 12)
        XCTAssertLessThanOrEqual(stats.transactions, 12 + 12, "an ack gets at most one transaction of its own")
        await jerry.close()
        let again = try await server.login("Jerry")
        let redelivered = await again.settle { $0.cmd == .direct }
        XCTAssertTrue(redelivered.isEmpty, "every ack was written: \(redelivered)")
    }
}
