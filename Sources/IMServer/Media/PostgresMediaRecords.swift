import Foundation
import PostgresNIO

/// The `media_files` table of the shared PostgreSQL store (migration 6, `media-files`): the same rows as
/// `SQLiteMediaRecords`. The bytes stay in the node's media directory until the PostgreSQL content backend
/// exists, so in a cluster a file is served by the node that took it, or by every node when they share the
/// directory (docs/MEDIA.md).
struct PostgresMediaRecords: MediaRecordTable {
    let store: PostgresStore

    static func tables(schema s: String) -> [String] {
        [
            """
            CREATE TABLE \(s).media_files (
                id TEXT PRIMARY KEY,
                owner TEXT NOT NULL,
                name TEXT NOT NULL,
                declared_mime TEXT,
                size BIGINT NOT NULL,
                sha256 TEXT NOT NULL,
                mime TEXT NOT NULL,
                format TEXT,
                width BIGINT,
                height BIGINT,
                duration DOUBLE PRECISION,
                created_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX media_files_by_sha256 ON \(s).media_files (sha256)",
            "CREATE INDEX media_files_by_owner ON \(s).media_files (owner)",
        ]
    }

    func insert(_ record: MediaRecord) async throws {
        let m = record.metadata
        let (width, height) = (m.width.map(Int64.init), m.height.map(Int64.init))
        do {
            _ = try await store.fetch(
                """
                INSERT INTO media_files (id, owner, name, declared_mime, size, sha256, mime, format, width, height, duration, created_at)
                VALUES (\(record.id), \(record.owner), \(record.name), \(record.declaredMIME), \(m.size), \(m.sha256), \(m.mime),
                    \(m.format), \(width), \(height), \(m.duration), \(record.createdAt))
                """)
        } catch  where PostgresStore.sqlState(error) == "23505" {
            throw MediaError(.idTaken, "the media id \(record.id) is taken")
        }
    }

    func find(_ id: String) async throws -> MediaRecord? {
        try await store.fetch("SELECT * FROM media_files WHERE id = \(id)").first.map(Self.record)
    }

    func remove(_ id: String) async throws -> (record: MediaRecord, sharing: Int)? {
        try await store.transaction { connection -> (record: MediaRecord, sharing: Int)? in
            guard
                let row = try await connection.query("DELETE FROM media_files WHERE id = \(id) RETURNING *", logger: store.logger)
                    .collect().first
            else { return nil }
            let record = try Self.record(row)
            let sharing = try await connection.query(
                "SELECT COUNT(*) FROM media_files WHERE sha256 = \(record.metadata.sha256)", logger: store.logger
            ).collect().first?.decode(Int64.self)
            return (record, Int(sharing ?? 0))
        }
    }

    func count(sha256: String) async throws -> Int {
        Int(try await store.fetch("SELECT COUNT(*) FROM media_files WHERE sha256 = \(sha256)").first?.decode(Int64.self) ?? 0)
    }

    func usage(owner: String) async throws -> Int64 {
        try await store.fetch("SELECT COALESCE(SUM(size), 0)::BIGINT FROM media_files WHERE owner = \(owner)").first?.decode(Int64.self)
            ?? 0
    }

    static func record(_ row: PostgresRow) throws -> MediaRecord {
        let row = row.makeRandomAccess()
        return MediaRecord(
            id: try row["id"].decode(String.self), owner: try row["owner"].decode(String.self), name: try row["name"].decode(String.self),
            declaredMIME: try row["declared_mime"].decode(String?.self),
            metadata: MediaMetadata(
                size: try row["size"].decode(Int64.self), sha256: try row["sha256"].decode(String.self),
                mime: try row["mime"].decode(String.self), format: try row["format"].decode(String?.self),
                width: try row["width"].decode(Int64?.self).map(Int.init), height: try row["height"].decode(Int64?.self).map(Int.init),
                duration: try row["duration"].decode(Double?.self)),
            createdAt: try row["created_at"].decode(Int64.self))
    }
}
