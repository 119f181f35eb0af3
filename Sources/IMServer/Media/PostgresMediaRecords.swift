import Foundation
import IMCore
import Logging
import PostgresNIO

/// The `media_files` table of the shared PostgreSQL store (migration 6, `media-files`): the same rows as
/// `SQLiteMediaRecords`. The bytes are in the same database (`PostgresMediaContent`), unless the operator
/// keeps them in a media directory (`MediaConfiguration.contentInDirectory`).
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

    func find(_ id: String) async throws -> MediaRecord? {
        try await store.fetch("SELECT * FROM media_files WHERE id = \(id)").first.map(Self.record)
    }

    func usage(owner: String) async throws -> Int64 {
        try await store.fetch("SELECT COALESCE(SUM(size), 0)::BIGINT FROM media_files WHERE owner = \(owner)").first?.decode(Int64.self)
            ?? 0
    }

    /// A transaction holding transaction-scoped advisory locks on the content's hash and the owner (keys
    /// from `hashtextextended` of the schema and the name: a collision only makes two commits wait for each
    /// other), so the nodes sharing the database commit one content or one owner's uploads one at a time.
    func locked<T: Sendable>(sha256: String, owner: String?, _ body: (any MediaTransaction) async throws -> T) async throws -> T {
        let (contentKey, ownerKey) = ("\(store.schema) media content \(sha256)", owner.map { "\(store.schema) media owner \($0)" })
        do {
            return try await store.transaction { connection in
                _ = try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\(contentKey), 0))", logger: store.logger)
                    .collect()
                if let ownerKey {
                    _ = try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\(ownerKey), 0))", logger: store.logger)
                        .collect()
                }
                return try await body(PostgresMediaTransaction(connection: connection, logger: store.logger))
            }
        } catch let error as MediaError {
            throw error // a refusal (quota, id taken), not a database failure: the route answers it
        } catch let error as PSQLError {
            // The database failed (full disk: 53100, gone, …): 507 / 4606 like a full media directory.
            let state = PostgresStore.sqlState(error) ?? "-"
            store.logger.error(
                "PostgreSQL media commit failed", metadata: ["sqlstate": "\(state)", "error": "\(String(reflecting: error))"])
            throw MediaError(.storageFailed, "the database could not store the file (SQLSTATE \(state))")
        }
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

/// The records' statements of a commit or delete inside a PostgreSQL transaction.
struct PostgresMediaTransaction: MediaTransaction {
    let connection: PostgresConnection
    let logger: Logger
    var postgres: PostgresConnection? { connection }

    func insert(_ record: MediaRecord) async throws {
        let m = record.metadata
        let (width, height) = (m.width.map(Int64.init), m.height.map(Int64.init))
        let exists = try await connection.query("SELECT 1 FROM media_files WHERE id = \(record.id)", logger: logger).collect()
        // Checked first: a failed INSERT would abort the transaction, and the caller may still undo its content.
        guard exists.isEmpty else { throw MediaError(.idTaken, "the media id \(record.id) is taken") }
        do {
            _ = try await connection.query(
                """
                INSERT INTO media_files (id, owner, name, declared_mime, size, sha256, mime, format, width, height, duration, created_at)
                VALUES (\(record.id), \(record.owner), \(record.name), \(record.declaredMIME), \(m.size), \(m.sha256), \(m.mime),
                    \(m.format), \(width), \(height), \(m.duration), \(record.createdAt))
                """, logger: logger
            ).collect()
        } catch  where PostgresStore.sqlState(error) == "23505" {
            throw MediaError(.idTaken, "the media id \(record.id) is taken")
        }
    }

    func remove(_ id: String) async throws -> MediaRecord? {
        try await connection.query("DELETE FROM media_files WHERE id = \(id) RETURNING *", logger: logger).collect().first.map(
            PostgresMediaRecords.record)
    }

    func count(sha256: String) async throws -> Int {
        Int(
            try await connection.query("SELECT COUNT(*) FROM media_files WHERE sha256 = \(sha256)", logger: logger).collect().first?
                .decode(Int64.self) ?? 0)
    }

    func usage(owner: String) async throws -> Int64 {
        try await connection.query("SELECT COALESCE(SUM(size), 0)::BIGINT FROM media_files WHERE owner = \(owner)", logger: logger)
            .collect().first?.decode(Int64.self) ?? 0
    }
}
