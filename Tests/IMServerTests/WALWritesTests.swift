import Foundation
import GRDB
import GRDBSQLite
import HookbotTestSupport
import XCTest

@testable import IMServer

/// The VFS that collects a transaction's WAL writes into one (`Sources/CWALWrites/wal_writes.c`, installed by
/// `SQLiteSchema.open`): fewer writes, and nothing a reader, a checkpoint, a reopened file or another thread could tell
/// from SQLite's own VFS.
final class WALWritesTests: XCTestCase {
    override func setUpWithError() throws {
        WALWrites.install()
        try XCTSkipUnless(WALWrites.isInstalled, "HOOKBOT_WAL_WRITES=0 in the environment")
    }

    private func databasePath() throws -> String {
        try makeTemporaryDirectory("walwrites").appendingPathComponent("db.sqlite").path
    }

    private func notesPool(_ path: String, _ prepare: (@Sendable (Database) throws -> Void)? = nil) throws -> DatabasePool {
        var configuration = Configuration()
        if let prepare { configuration.prepareDatabase(prepare) }
        let pool = try DatabasePool(path: path, configuration: configuration)
        try pool.write { db in
            try db.execute(sql: "CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL, body BLOB NOT NULL)")
            try db.execute(sql: "CREATE INDEX IF NOT EXISTS notes_by_text ON notes(text)")
        }
        return pool
    }

    /// A row's body: `size` bytes that depend on `k`, so a page from the wrong frame or an older WAL generation shows.
    private static func body(_ k: Int, size: Int) -> Data {
        Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ k &* 7) })
    }

    private static func text(_ k: Int) -> String { "第 \(k) 条 📝 @all https://example.com/\(k)" }

    private func insert(_ k: Int, size: Int = 200, into pool: DatabasePool) throws {
        try pool.write { db in
            try db.execute(
                sql: "INSERT INTO notes (id, text, body) VALUES (?, ?, ?)", arguments: [k, Self.text(k), Self.body(k, size: size)])
        }
    }

    /// Every row 0..<count is there with its text and body, and the file checks out.
    private func assertIntact(_ pool: DatabasePool, count: Int, size: (Int) -> Int, file: StaticString = #filePath, line: UInt = #line)
        throws
    {
        try pool.read { db in
            XCTAssertEqual(try Int.fetchOne(db, sql: "SELECT count(*) FROM notes"), count, file: file, line: line)
            let rows = try Row.fetchCursor(db, sql: "SELECT id, text, body FROM notes ORDER BY id")
            var expected = 0
            while let row = try rows.next() {
                let k: Int = row["id"]
                XCTAssertEqual(k, expected, file: file, line: line)
                XCTAssertEqual(row["text"] as String, Self.text(k), file: file, line: line)
                XCTAssertEqual(row["body"] as Data, Self.body(k, size: size(k)), "row \(k)", file: file, line: line)
                expected += 1
            }
            XCTAssertEqual(try String.fetchAll(db, sql: "PRAGMA integrity_check"), ["ok"], file: file, line: line)
        }
    }

    /// One-row transactions on a WAL that is reused from its start (as after every checkpoint of a running server):
    /// each reaches the file in one write instead of two per page, and a second pool on the file reads them all.
    func testEachTransactionsFramesReachTheFileInOneWrite() throws {
        let path = try databasePath()
        let pool = try notesPool(path)
        // Grow the WAL, then have the next transaction start it over (the file keeps its size).
        for k in 0..<40 { try insert(k, into: pool) }
        try pool.writeWithoutTransaction { db in try db.checkpoint(.restart) }
        let before = WALWrites.counts
        for k in 40..<80 { try insert(k, into: pool) }
        let after = WALWrites.counts
        let issued = after.issued - before.issued
        let coalesced = after.coalesced - before.coalesced
        // Each transaction writes at least its table and index pages: two frames, four writes collected into one (the
        // first also the WAL's new header). Other tests' writes running meanwhile only add to both counts.
        XCTAssertGreaterThanOrEqual(coalesced, 40 * 4)
        XCTAssertLessThanOrEqual(issued, coalesced / 3)
        // Written with the commit frame's page, none left for the barrier.
        XCTAssertEqual(after.late, before.late)
        try assertIntact(pool, count: 80, size: { _ in 200 })
        let other = try notesPool(path)
        try assertIntact(other, count: 80, size: { _ in 200 })
    }

    /// A writer committing 1,500 transactions of rows from 100 bytes to 9 KB (overflow pages, WAL restarts after
    /// SQLite's automatic checkpoints) while two readers check, over and over, that the newest row they see is whole:
    /// a reader never finds a frame that is not in the file. Then every row, the integrity check, and the file
    /// reopened.
    func testReadersAlwaysFindWholeRowsWhileAWriterCommits() throws {
        let path = try databasePath()
        let pool = try notesPool(path)
        let size: @Sendable (Int) -> Int = { k in 100 + (k * 613) % 9_000 }
        let done = ReadersStop()
        let failures = FailureLog()
        let readers = (0..<2).map { _ in
            Thread {
                var seen = -1
                while !done.isSet {
                    do {
                        try pool.read { db in
                            guard let row = try Row.fetchOne(db, sql: "SELECT id, text, body FROM notes ORDER BY id DESC LIMIT 1") else {
                                return
                            }
                            let k: Int = row["id"]
                            if k < seen { failures.add("went back from \(seen) to \(k)") }
                            seen = k
                            if row["text"] as String != Self.text(k) || row["body"] as Data != Self.body(k, size: size(k)) {
                                failures.add("row \(k) not whole")
                            }
                        }
                    } catch {
                        failures.add("\(error)")
                    }
                }
                done.finished()
            }
        }
        let late = WALWrites.counts.late
        for reader in readers { reader.start() }
        for k in 0..<1_500 { try insert(k, size: size(k), into: pool) }
        done.set()
        done.waitForFinished(count: readers.count)
        XCTAssertEqual(failures.entries, [])
        XCTAssertEqual(WALWrites.counts.late, late)
        try assertIntact(pool, count: 1_500, size: size)
        let reopened = try notesPool(path)
        try assertIntact(reopened, count: 1_500, size: size)
    }

    /// Transactions larger than the buffer, with a page cache of ten pages so that SQLite spills pages into the WAL
    /// before the commit and reads them back (and rewrites frames already written, then their checksums), and one
    /// rolled back after spilling after each: whole after every one, also in a new pool and after a checkpoint copies
    /// the frames into the database file; nothing was left for the barrier.
    func testLargeTransactionsAndCacheSpills() throws {
        let path = try databasePath()
        let pool = try notesPool(path) { db in try db.execute(sql: "PRAGMA cache_size = 10") }
        let size: @Sendable (Int) -> Int = { k in 500 + (k * 37) % 3_000 }
        let late = WALWrites.counts.late
        for batch in 0..<4 {
            try pool.write { db in
                for k in (batch * 600)..<((batch + 1) * 600) {
                    try db.execute(
                        sql: "INSERT INTO notes (id, text, body) VALUES (?, ?, ?)",
                        arguments: [k, Self.text(k), Self.body(k, size: size(k))])
                }
                // Rewrites pages that may already be in the WAL from this transaction.
                try db.execute(sql: "UPDATE notes SET body = body WHERE id % 7 = 0")
            }
            try assertIntact(pool, count: (batch + 1) * 600, size: size)
            // A transaction rolled back after spilling pages: none of its frames may count.
            struct Abandoned: Error {}
            XCTAssertThrowsError(
                try pool.write { db in
                    for k in 100_000..<100_400 {
                        try db.execute(
                            sql: "INSERT INTO notes (id, text, body) VALUES (?, ?, ?)",
                            arguments: [k, Self.text(k), Self.body(k, size: 2_000)])
                    }
                    throw Abandoned()
                })
        }
        try pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
        try assertIntact(try notesPool(path), count: 2_400, size: size)
        XCTAssertEqual(WALWrites.counts.late, late)
    }

    /// A commit whose collected frames cannot be written (the file may not grow: `RLIMIT_FSIZE`, as a full disk) fails
    /// with an error, as with SQLite's own VFS: the process goes on, the rows are not there, and the next commit works.
    func testAFailedWriteOfTheCollectedFramesFailsTheCommit() throws {
        let path = try databasePath()
        let pool = try notesPool(path)
        for k in 0..<5 { try insert(k, into: pool) }
        let walSize = (try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
        XCTAssertGreaterThan(walSize, 0)
        let late = WALWrites.counts.late
        // Three pages or so of frames, all collected until the commit frame's page: the one write that would make the
        // WAL longer than allowed is the commit's.
        var previous = rlimit()
        getrlimit(Int32(RLIMIT_FSIZE.rawValue), &previous)
        let handler = signal(SIGXFSZ, SIG_IGN)
        var limit = previous
        limit.rlim_cur = rlim_t(walSize + 1_024)
        setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limit)
        let failure = Result { try insert(5, size: 6_000, into: pool) }
        setrlimit(Int32(RLIMIT_FSIZE.rawValue), &previous)
        signal(SIGXFSZ, handler)
        guard case .failure(let error) = failure else { return XCTFail("the commit succeeded past the file size limit") }
        XCTAssertTrue(error is DatabaseError, "\(error)")
        XCTAssertEqual(WALWrites.counts.late, late)
        try assertIntact(pool, count: 5, size: { _ in 200 })
        try insert(5, into: pool)
        try assertIntact(pool, count: 6, size: { _ in 200 })
        try assertIntact(try notesPool(path), count: 6, size: { _ in 200 })
    }

    /// The server's store opens its file through the collecting VFS.
    func testTheServersStoreUsesIt() throws {
        let pool = try SQLiteSchema.open(path: try databasePath(), synchronousFull: true)
        let name = try pool.read { db -> String? in
            var pointer: UnsafeMutablePointer<CChar>?
            guard sqlite3_file_control(db.sqliteConnection, "main", SQLITE_FCNTL_VFSNAME, &pointer) == SQLITE_OK, let pointer else {
                return nil
            }
            defer { sqlite3_free(pointer) }
            return String(cString: pointer)
        }
        XCTAssertEqual(name?.hasPrefix("hookbot-wal/"), true, name ?? "no name")
    }
}

/// A flag the readers poll, and a count of readers that stopped.
private final class ReadersStop: @unchecked Sendable {
    private let condition = NSCondition()
    private var flag = false
    private var stopped = 0

    var isSet: Bool {
        condition.lock()
        defer { condition.unlock() }
        return flag
    }

    func set() {
        condition.lock()
        flag = true
        condition.unlock()
    }

    func finished() {
        condition.lock()
        stopped += 1
        condition.broadcast()
        condition.unlock()
    }

    func waitForFinished(count: Int) {
        condition.lock()
        while stopped < count { condition.wait() }
        condition.unlock()
    }
}

private final class FailureLog: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [String] = []

    func add(_ entry: String) { lock.withLock { if list.count < 20 { list.append(entry) } } }
    var entries: [String] { lock.withLock { list } }
}
