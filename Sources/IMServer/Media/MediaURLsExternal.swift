import Foundation
import GRDB
import IMCore
import PostgresNIO

/// A record of a file kept elsewhere: an id for a URL, no bytes (docs/MEDIA.md, "Files kept elsewhere").
///
/// LeanCloud's typed-messages plugin cannot read an `_lcfile` without `objId` (it throws, and the message arrives
/// as a plain `Message`), so the file-message fill gives a URL-only file message an `objId` naming one of these;
/// `GET /1.1/files/<id>` answers its url, and `POST /1.1/files` (`AV.File.withURL(name, url).save()`) makes one.
/// One record per sender and URL: the same URL sent again by the same client gets the same id.
struct ExternalFile: Sendable, Equatable {
    var id: String
    /// The client that named the URL first; `""` for the operator or the app key.
    var owner: String
    var url: String
    var name: String
    /// The type the sender declared (`mime_type`), if any: nobody has seen the bytes.
    var mime: String?
    /// Milliseconds since 1970.
    var createdAt: Int64
}

/// Where external file records are kept: the table `media_external` of the server's database (SQLite
/// migration `v12-media-external`, PostgreSQL migration 9 `media-external`).
protocol ExternalFileTable: Sendable {
    /// The record of `url` named by `owner`, made (with a new id) when there is none.
    func record(owner: String, url: String, name: String, mime: String?) async throws -> ExternalFile
    func find(_ id: String) async throws -> ExternalFile?
    /// False when there was no such record.
    func delete(_ id: String) async throws -> Bool
}

enum ExternalFiles {
    /// The longest URL a record keeps.
    static let maxURLBytes = 2048

    /// The table of `store`'s database, or nil for a store without one.
    static func table(_ store: any ServerStore) -> (any ExternalFileTable)? {
        if let sqlite = store as? SQLiteStore { return SQLiteExternalFiles(db: sqlite.db) }
        if let postgres = store as? PostgresStore { return PostgresExternalFiles(store: postgres) }
        return nil
    }

    /// `url` when a record may name it: an absolute `http`/`https` URL with a host, no credentials, no control
    /// characters or spaces, at most `maxURLBytes`; nil otherwise (the message is then left as sent).
    static func acceptable(_ url: String) -> String? {
        guard url.utf8.count <= maxURLBytes, !url.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F }),
            let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            scheme == "http" || scheme == "https",
            let host = components.host, !host.isEmpty, components.user == nil, components.password == nil
        else { return nil }
        return url
    }

    /// The name a record gets: the one given, else the URL's last path component, cleaned as stored names are.
    static func name(given: String?, url: String) -> String {
        if let given, !given.isEmpty { return MediaNames.clean(given) }
        let last = URLComponents(string: url)?.path.split(separator: "/").last.map(String.init) ?? ""
        return MediaNames.clean(last.removingPercentEncoding ?? last)
    }

    /// What `GET /1.1/files/<id>` answers for one: LeanCloud's `_File` of a `withURL` file.
    static func json(_ file: ExternalFile) -> [String: JSONValue] {
        let created = JSONValue.string(LeanCloudFilesRoute.isoDate(file.createdAt))
        var answer: [String: JSONValue] = [
            "objectId": .string(file.id), "name": .string(file.name), "url": .string(file.url),
            "metaData": .object(["__source": .string("external"), "owner": .string(file.owner.isEmpty ? "unknown" : file.owner)]),
            "provider": .string("external"), "createdAt": created, "updatedAt": created,
        ]
        if let mime = file.mime { answer["mime_type"] = .string(mime) }
        return answer
    }
}

/// `media_external` in the server's SQLite file.
struct SQLiteExternalFiles: ExternalFileTable {
    let db: DatabasePool

    static func create(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE media_external (
                    id TEXT PRIMARY KEY NOT NULL,
                    owner TEXT NOT NULL,
                    url TEXT NOT NULL,
                    name TEXT NOT NULL,
                    mime TEXT,
                    created_at INTEGER NOT NULL,
                    UNIQUE (owner, url)
                )
                """)
    }

    func record(owner: String, url: String, name: String, mime: String?) async throws -> ExternalFile {
        // Read first: the same URL sent again costs no write.
        let query = "SELECT * FROM media_external WHERE owner = ? AND url = ?"
        if let row = try await db.read({ db in try Row.fetchOne(db, sql: query, arguments: [owner, url]) }) { return Self.file(row) }
        return try await db.write { db in
            if let row = try Row.fetchOne(db, sql: query, arguments: [owner, url]) {
                return Self.file(row)
            }
            let file = ExternalFile(
                id: MediaIDs.make(), owner: owner, url: url, name: name, mime: mime, createdAt: Int64(Date().timeIntervalSince1970 * 1000))
            try db.execute(
                sql: "INSERT INTO media_external (id, owner, url, name, mime, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                arguments: [file.id, file.owner, file.url, file.name, file.mime, file.createdAt])
            return file
        }
    }

    func find(_ id: String) async throws -> ExternalFile? {
        try await db.read { db in try Row.fetchOne(db, sql: "SELECT * FROM media_external WHERE id = ?", arguments: [id]).map(Self.file) }
    }

    func delete(_ id: String) async throws -> Bool {
        try await db.write { db in
            try db.execute(sql: "DELETE FROM media_external WHERE id = ?", arguments: [id])
            return db.changesCount > 0
        }
    }

    static func file(_ row: Row) -> ExternalFile {
        ExternalFile(
            id: row["id"], owner: row["owner"], url: row["url"], name: row["name"], mime: row["mime"], createdAt: row["created_at"])
    }
}

/// `media_external` in the shared PostgreSQL database.
struct PostgresExternalFiles: ExternalFileTable {
    let store: PostgresStore

    static func tables(schema s: String) -> [String] {
        [
            """
            CREATE TABLE \(s).media_external (
                id TEXT PRIMARY KEY,
                owner TEXT NOT NULL,
                url TEXT NOT NULL,
                name TEXT NOT NULL,
                mime TEXT,
                created_at BIGINT NOT NULL,
                UNIQUE (owner, url)
            )
            """
        ]
    }

    func record(owner: String, url: String, name: String, mime: String?) async throws -> ExternalFile {
        let (id, created) = (MediaIDs.make(), Int64(Date().timeIntervalSince1970 * 1000))
        return try await store.logged {
            if let row = try await store.fetch("SELECT * FROM media_external WHERE owner = \(owner) AND url = \(url)").first {
                return try Self.file(row)
            }
            // Two nodes naming the same URL at once: one insert wins, both read the same row.
            _ = try await store.fetch(
                """
                INSERT INTO media_external (id, owner, url, name, mime, created_at)
                VALUES (\(id), \(owner), \(url), \(name), \(mime), \(created)) ON CONFLICT (owner, url) DO NOTHING
                """)
            guard let row = try await store.fetch("SELECT * FROM media_external WHERE owner = \(owner) AND url = \(url)").first else {
                throw MediaError(.storageFailed, "the external file record of \(url) could not be written")
            }
            return try Self.file(row)
        }
    }

    func find(_ id: String) async throws -> ExternalFile? {
        try await store.logged { try await store.fetch("SELECT * FROM media_external WHERE id = \(id)").first.map(Self.file) }
    }

    func delete(_ id: String) async throws -> Bool {
        try await store.logged { try await !store.fetch("DELETE FROM media_external WHERE id = \(id) RETURNING id").isEmpty }
    }

    static func file(_ row: PostgresRow) throws -> ExternalFile {
        let row = row.makeRandomAccess()
        return ExternalFile(
            id: try row["id"].decode(String.self), owner: try row["owner"].decode(String.self), url: try row["url"].decode(String.self),
            name: try row["name"].decode(String.self), mime: try row["mime"].decode(String?.self),
            createdAt: try row["created_at"].decode(Int64.self))
    }
}
