import Foundation
import GRDB
import PostgresNIO

/// The `media_files` table of the server's SQLite file: one row a stored file (migration v10-media-files).
struct SQLiteMediaRecords: MediaRecordTable {
    let db: DatabasePool

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
        try await db.read { db in try Row.fetchOne(db, sql: "SELECT * FROM media_files WHERE id = ?", arguments: [id]).map(Self.record) }
    }

    func usage(owner: String) async throws -> Int64 { try await SQLiteMediaTransaction(db: db).usage(owner: owner) }

    /// One process uses the SQLite file, and the caller holds this process's locks of the content and the
    /// owner already: each statement runs on its own.
    func locked<T: Sendable>(sha256: String, owner: String?, _ body: (any MediaTransaction) async throws -> T) async throws -> T {
        try await body(SQLiteMediaTransaction(db: db))
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
    var postgres: PostgresConnection? { nil }

    func insert(_ record: MediaRecord) async throws {
        do {
            try await db.write { db in
                let m = record.metadata
                try db.execute(
                    sql: """
                        INSERT INTO media_files (id, owner, name, declared_mime, size, sha256, mime, format, width, height, duration, created_at)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """,
                    arguments: [
                        record.id, record.owner, record.name, record.declaredMIME, m.size, m.sha256, m.mime, m.format, m.width, m.height,
                        m.duration, record.createdAt,
                    ])
            }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            throw MediaError(.idTaken, "the media id \(record.id) is taken")
        }
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
            try Int64.fetchOne(db, sql: "SELECT COALESCE(SUM(size), 0) FROM media_files WHERE owner = ?", arguments: [owner]) ?? 0
        }
    }
}
