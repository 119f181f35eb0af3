import Foundation
import GRDB
import IMCore
import PostgresNIO
import Synchronization

/// The `media_files` table of the server's SQLite file: one row a stored file (migration v10-media-files).
struct SQLiteMediaRecords: MediaRecordTable {
    let db: DatabasePool
    let inserts: SQLiteMediaInserts

    init(db: DatabasePool) {
        self.db = db
        inserts = SQLiteMediaInserts(db: db)
    }

    static func create(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE media_files (
                    id TEXT PRIMARY KEY NOT NULL,
                    owner TEXT NOT NULL,
                    name TEXT NOT NULL,
                    declared_mime TEXT,
                    size INTEGER NOT NULL,
                    sha256 TEXT NOT NULL,
                    mime TEXT NOT NULL,
                    format TEXT,
                    width INTEGER,
                    height INTEGER,
                    duration REAL,
                    created_at INTEGER NOT NULL
                );
                CREATE INDEX media_files_by_sha256 ON media_files(sha256);
                CREATE INDEX media_files_by_owner ON media_files(owner);
                """)
    }

    func find(_ id: String) async throws -> MediaRecord? {
        // Cached statements (here and below): prepared once per connection, not parsed and authorised on every
        // upload.
        try await db.read { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM media_files WHERE id = ?"), arguments: [id]).map(Self.record)
        }
    }

    func usage(owner: String) async throws -> Int64 { try await SQLiteMediaTransaction(db: db).usage(owner: owner) }

    /// One process uses the SQLite file, and the caller holds this process's locks of the content and the
    /// owner already: each statement runs on its own.
    func locked<T: Sendable>(sha256: String, owner: String?, _ body: (any MediaTransaction) async throws -> T) async throws -> T {
        try await body(SQLiteMediaTransaction(db: db, inserts: inserts))
    }

    static func record(_ row: Row) -> MediaRecord {
        MediaRecord(
            id: row["id"], owner: row["owner"], name: row["name"], declaredMIME: row["declared_mime"],
            metadata: MediaMetadata(
                size: row["size"], sha256: row["sha256"], mime: row["mime"], format: row["format"], width: row["width"],
                height: row["height"], duration: row["duration"]),
            createdAt: row["created_at"])
    }
}

/// The records' statements of a commit or delete on SQLite, each its own write.
struct SQLiteMediaTransaction: MediaTransaction {
    let db: DatabasePool
    /// When given, inserts are committed together with those of concurrent uploads.
    var inserts: SQLiteMediaInserts? = nil
    var postgres: PostgresConnection? { nil }

    func insert(_ record: MediaRecord) async throws {
        if let inserts { return try await inserts.insert(record) }
        do {
            try await db.write { db in try Self.insertRow(record, db) }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            throw MediaError(.idTaken, "the media id \(record.id) is taken")
        }
    }

    static func insertRow(_ record: MediaRecord, _ db: Database) throws {
        let m = record.metadata
        try db.cachedStatement(
            sql: """
                INSERT INTO media_files (id, owner, name, declared_mime, size, sha256, mime, format, width, height, duration, created_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """
        ).execute(arguments: [
            record.id, record.owner, record.name, record.declaredMIME, m.size, m.sha256, m.mime, m.format, m.width, m.height,
            m.duration, record.createdAt,
        ])
    }

    func remove(_ id: String) async throws -> MediaRecord? {
        try await db.write { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM media_files WHERE id = ?", arguments: [id]) else { return nil }
            try db.execute(sql: "DELETE FROM media_files WHERE id = ?", arguments: [id])
            return SQLiteMediaRecords.record(row)
        }
    }

    func count(sha256: String) async throws -> Int {
        try await db.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM media_files WHERE sha256 = ?", arguments: [sha256]) ?? 0 }
    }

    func usage(owner: String) async throws -> Int64 {
        try await db.read { db in
            try Int64.fetchOne(
                db.cachedStatement(sql: "SELECT COALESCE(SUM(size), 0) FROM media_files WHERE owner = ?"), arguments: [owner])
                ?? 0
        }
    }
}

/// Group commit for the records of concurrent uploads: an insert that arrives while another batch is being
/// written waits for the next transaction, which takes every insert waiting by then. With
/// `synchronous=FULL` each commit waits for the disk, so 200 uploads at once took 200 commits one after
/// the other (0.5-3 ms each here); now they take a few. Each insert answers once its transaction is
/// committed, as before; each runs in a savepoint, so a taken id fails only its own upload.
final class SQLiteMediaInserts: Sendable {
    private struct Waiting {
        let record: MediaRecord
        let done: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var waiting: [Waiting] = []
        var writing = false
        var transactions = 0
    }

    private let db: DatabasePool
    private let state = Mutex(State())

    init(db: DatabasePool) { self.db = db }

    /// Inserts waiting for the next transaction, and transactions written so far (tests).
    var waiting: Int { state.withLock { $0.waiting.count } }
    var transactions: Int { state.withLock { $0.transactions } }

    func insert(_ record: MediaRecord) async throws {
        try await withCheckedThrowingContinuation { (done: CheckedContinuation<Void, any Error>) in
            let start = state.withLock { state -> Bool in
                state.waiting.append(Waiting(record: record, done: done))
                guard !state.writing else { return false }
                state.writing = true
                return true
            }
            if start { Task { await self.writeBatches() } }
        }
    }

    /// Writes what waits, one transaction a batch, until nothing does.
    private func writeBatches() async {
        while true {
            let batch = state.withLock { state -> [Waiting] in
                defer { state.waiting = [] }
                if state.waiting.isEmpty { state.writing = false }
                return state.waiting
            }
            guard !batch.isEmpty else { return }
            state.withLock { $0.transactions += 1 }
            do {
                let failures: [(any Error)?] = try await db.write { db in
                    try batch.map { waiting -> (any Error)? in
                        do {
                            try db.inSavepoint {
                                try SQLiteMediaTransaction.insertRow(waiting.record, db)
                                return .commit
                            }
                            return nil
                        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
                            return MediaError(.idTaken, "the media id \(waiting.record.id) is taken")
                        }
                    }
                }
                for (waiting, failure) in zip(batch, failures) {
                    if let failure { waiting.done.resume(throwing: failure) } else { waiting.done.resume() }
                }
            } catch {
                for waiting in batch { waiting.done.resume(throwing: error) }
            }
        }
    }
}
