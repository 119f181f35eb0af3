import Foundation
import GRDB
import XCTest

@testable import IMServer

final class SynchronousLevelTests: XCTestCase {
    /// GRDB turns WAL writers to synchronous=NORMAL when it opens a pool; the server must end up with the
    /// level it was configured for on the connection that commits, or acks would precede durability.
    func testTheWriterCommitsWithTheConfiguredSynchronousLevel() throws {
        let directory = try makeTemporaryDirectory("hookbot-sync")
        for (full, expected) in [(true, 2), (false, 1)] {
            let pool = try SQLiteSchema.open(path: directory.appendingPathComponent("db-\(full).sqlite").path, synchronousFull: full)
            let level = try pool.write { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
            XCTAssertEqual(level, expected, "synchronousFull = \(full)")
            let journal = try pool.read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") }
            XCTAssertEqual(journal, "wal")
        }
    }
}
