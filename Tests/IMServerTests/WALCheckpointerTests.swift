import Foundation
import GRDB
import HookbotTestSupport
import IMCore
import XCTest

@testable import IMServer

/// SQLite's WAL checkpoint is left to the message pipeline's writer thread when a batch is committed inline on an event
/// loop (`WALCheckpointer`); other commits checkpoint as SQLite's automatic checkpoint did, and past `limit` frames any.
final class WALCheckpointerTests: XCTestCase {
    private func pool() throws -> (DatabasePool, URL) {
        let path = try makeTemporaryDirectory("wal").appendingPathComponent("db.sqlite").path
        let pool = try DatabasePool(path: path)
        try pool.write { db in try db.execute(sql: "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL)") }
        return (pool, URL(fileURLWithPath: path + "-wal"))
    }

    private func walBytes(_ url: URL) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: url.path))?[.size] as? Int) ?? 0
    }

    /// Commits one small row at a time, as a quiet server does; `deferring`: as inline commits do.
    private func insert(_ count: Int, into pool: DatabasePool, deferringWith checkpointer: WALCheckpointer? = nil) throws {
        for k in 0..<count {
            let commit = {
                try pool.write { db in try db.execute(sql: "INSERT INTO notes (text) VALUES (?)", arguments: ["第 \(k) 条 📝"]) }
            }
            if let checkpointer { try checkpointer.deferring(commit) } else { try commit() }
        }
    }

    private func rows(_ pool: DatabasePool) throws -> Int? {
        try pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM notes") }
    }

    /// Commits that do not defer checkpoint past the threshold, as SQLite's automatic checkpoint did: the WAL is reset
    /// and reused instead of growing with every commit.
    func testOtherCommitsCheckpointAsTheAutomaticCheckpointDid() throws {
        let (pool, wal) = try pool()
        let checkpointer = try WALCheckpointer(pool: pool, threshold: 20, limit: 100_000)
        try insert(600, into: pool)
        XCTAssertGreaterThan(checkpointer.checkpoints.inCommit, 0)
        XCTAssertEqual(checkpointer.checkpoints.deferred, 0)
        XCTAssertFalse(checkpointer.isDue)
        // 600 commits of at least one 4 KB page each: 2.4 MB had the WAL never been reset.
        XCTAssertLessThan(walBytes(wal), 60 * 4096)
        XCTAssertEqual(try rows(pool), 600)
    }

    /// A deferring commit past the threshold leaves the checkpoint due instead of running it; `runDue` runs it once,
    /// and the WAL is reused from its start after it.
    func testADeferringCommitLeavesTheCheckpointToRunDue() throws {
        let (pool, wal) = try pool()
        let checkpointer = try WALCheckpointer(pool: pool, threshold: 20, limit: 100_000)
        try insert(100, into: pool, deferringWith: checkpointer)
        XCTAssertTrue(checkpointer.isDue)
        XCTAssertEqual(checkpointer.checkpoints.inCommit, 0)
        let grown = walBytes(wal)
        XCTAssertGreaterThan(grown, 90 * 4096, "no commit checkpointed")
        checkpointer.runDue(pool)
        checkpointer.runDue(pool)
        XCTAssertFalse(checkpointer.isDue)
        XCTAssertEqual(checkpointer.checkpoints.deferred, 1)
        try insert(15, into: pool, deferringWith: checkpointer)
        XCTAssertEqual(walBytes(wal), grown, "the WAL was reset: new frames overwrite it from its start")
        XCTAssertEqual(try rows(pool), 115)
    }

    /// Past `limit` frames a deferring commit checkpoints in place, so the WAL stays bounded even when nothing runs the
    /// checkpoint left due.
    func testPastTheLimitADeferringCommitCheckpointsInPlace() throws {
        let (pool, wal) = try pool()
        let checkpointer = try WALCheckpointer(pool: pool, threshold: 20, limit: 50)
        try insert(500, into: pool, deferringWith: checkpointer)
        XCTAssertGreaterThan(checkpointer.checkpoints.pastLimit, 0)
        XCTAssertEqual(checkpointer.checkpoints.inCommit, 0)
        XCTAssertLessThan(walBytes(wal), 120 * 4096)
        XCTAssertEqual(try rows(pool), 500)
    }

    /// A server at human pace commits inline, and its checkpoints run on the writer thread: a conversation of a few
    /// hundred messages (several WAL pages each) crosses the 1,000-frame threshold, and no inline commit checkpoints.
    func testAQuietServersCheckpointsRunOnTheWriterThread() async throws {
        try XCTSkipIf(TestDatabase.backend == .postgres, "SQLite's WAL")
        // A budget no commit exceeds, however busy the machine running the tests: every message is committed inline.
        let server = try await startServer { $0.inlineCommitBudget = .seconds(60) }
        let (tom, jerry) = try await server.login("Tom", "Jerry")
        let cid = try await tom.startConversation(members: ["Jerry"], name: "长聊 🐱🐭")
        for k in 0..<300 {
            let ack = try await tom.sendText("第 \(k) 条：今天的奶酪在哪里？🧀", to: cid)
            XCTAssertNil(ack.code)
            jerry.acknowledge(try await jerry.nextMessage())
        }
        let store = try XCTUnwrap(server.server.service.store as? SQLiteStore)
        XCTAssertGreaterThan(server.server.inlineTransactions, 250)
        XCTAssertGreaterThan(store.checkpointer.checkpoints.deferred, 0)
        XCTAssertEqual(store.checkpointer.checkpoints.pastLimit, 0)
    }
}
