import Dispatch
import Foundation
import GRDB
import HookbotTestSupport
import IMCore
import XCTest

@testable import IMServer

/// The records of concurrent uploads on SQLite are committed together (`SQLiteMediaInserts`): on a real
/// SQLite file, inserts that arrive while a transaction is being written share the next one, each still
/// answers only once it is committed, and a taken id fails its own insert, not its batch.
final class MediaGroupCommitTests: XCTestCase {
    private func database() throws -> (DatabasePool, URL) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("media-group-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let pool = try DatabasePool(path: directory.appendingPathComponent("records.sqlite").path)
        try pool.write { try SQLiteMediaRecords.create($0) }
        return (pool, directory)
    }

    /// Holds SQLite's writer busy until `release` is signalled, so that inserts pile up behind it.
    private func holdWriter(_ pool: DatabasePool) async -> (release: DispatchSemaphore, done: Task<Void, any Error>) {
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let done = Task {
            try await pool.write { _ in
                started.signal()
                release.wait()
            }
        }
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                started.wait()
                continuation.resume()
            }
        }
        return (release, done)
    }

    func testInsertsWaitingTogetherShareOneTransaction() async throws {
        let (pool, directory) = try database()
        defer { try? FileManager.default.removeItem(at: directory) }
        let inserts = SQLiteMediaInserts(db: pool)
        let (release, blocker) = await holdWriter(pool)
        // The first insert starts a transaction of its own (queued behind the blocker); the 49 after it wait.
        let first = Task { try await inserts.insert(record("file-0")) }
        try await waitUntil("one transaction", every: .milliseconds(10)) { inserts.transactions == 1 }
        let tasks = [first] + (1..<50).map { k in Task { try await inserts.insert(record("file-\(k)")) } }
        try await waitUntil("49 inserts waiting", every: .milliseconds(10)) { inserts.waiting == 49 }
        let stored = try await pool.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM media_files") }
        XCTAssertEqual(stored, 0, "nothing is committed while the writer is held")
        release.signal()
        try await blocker.value
        for task in tasks { try await task.value }
        XCTAssertEqual(inserts.transactions, 2, "one transaction for the first insert, one for the 49 that waited")
        let after = try await pool.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM media_files") }
        XCTAssertEqual(after, 50)
    }

    func testATakenIdFailsOnlyItsOwnInsert() async throws {
        let (pool, directory) = try database()
        defer { try? FileManager.default.removeItem(at: directory) }
        let inserts = SQLiteMediaInserts(db: pool)
        try await inserts.insert(record("taken"))
        let (release, blocker) = await holdWriter(pool)
        let first = Task { try await inserts.insert(record("first")) }
        // the first is being written (behind the blocker)
        try await waitUntil("two transactions", every: .milliseconds(10)) { inserts.transactions == 2 }
        let ids = ["a", "taken", "b", "c"]
        let tasks = ids.map { id in
            Task { () -> MediaError.Kind? in
                do {
                    try await inserts.insert(record(id))
                    return nil
                } catch let error as MediaError {
                    return error.kind
                }
            }
        }
        try await waitUntil("4 inserts waiting", every: .milliseconds(10)) { inserts.waiting == 4 }
        release.signal()
        try await blocker.value
        try await first.value
        var outcomes: [String: MediaError.Kind?] = [:]
        for (id, task) in zip(ids, tasks) { outcomes[id] = try await task.value }
        XCTAssertEqual(outcomes["taken"], .some(.idTaken))
        for id in ["a", "b", "c"] { XCTAssertEqual(outcomes[id], .some(nil), id) }
        XCTAssertEqual(inserts.transactions, 3)
        let ids2 = try await pool.read { try String.fetchAll($0, sql: "SELECT id FROM media_files ORDER BY id") }
        XCTAssertEqual(ids2, ["a", "b", "c", "first", "taken"])
    }
}

/// A record of a small PNG owned by Tom.
private func record(_ id: String) -> MediaRecord {
    MediaRecord(
        id: id, owner: "Tom", name: "\(id).png", declaredMIME: nil,
        metadata: MediaMetadata(size: 10, sha256: String(repeating: "a", count: 64), mime: "image/png"), createdAt: 1)
}
