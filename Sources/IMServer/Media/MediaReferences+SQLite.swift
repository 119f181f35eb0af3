import Foundation
import GRDB
import IMCore

/// `media_refs` in the server's SQLite file (migration `v11-media-refs`). The store calls these inside the
/// transaction that stores, edits or recalls a message or changes a conversation.
extension MediaReferences {
    static func create(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE media_refs (
                    media_id TEXT NOT NULL,
                    cid TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                    message_id TEXT NOT NULL,
                    PRIMARY KEY (media_id, cid, message_id)
                ) WITHOUT ROWID;
                CREATE INDEX media_refs_by_source ON media_refs(cid, message_id);
                CREATE INDEX media_files_by_created_at ON media_files(created_at);
                """)
        // What the server stored before this migration.
        let messages = try Row.fetchCursor(
            db,
            sql: """
                SELECT id, cid, data FROM messages
                WHERE bin = 0 AND recalled = 0 AND (data LIKE '%media%' OR data LIKE '%objId%')
                """)
        while let row = try messages.next() {
            try insert(db, ids(in: row["data"] as String), cid: row["cid"], source: row["id"])
        }
        let conversations = try Row.fetchCursor(db, sql: "SELECT id, name, attr FROM conversations")
        while let row = try conversations.next() {
            let attr = JSONValue.parse(row["attr"] as String? ?? "{}") ?? .object([:])
            try insert(db, ids(name: row["name"], attr: attr), cid: row["id"], source: conversationSource)
        }
    }

    /// A new message's references (nothing to write for a message that names no file).
    static func insert(_ db: Database, _ record: MessageRecord) throws {
        try insert(db, ids(in: record), cid: record.cid, source: record.id)
    }

    /// An edited or recalled message's references: the new content's (a recalled message names none).
    static func replace(_ db: Database, _ record: MessageRecord) throws {
        try db.cachedStatement(sql: "DELETE FROM media_refs WHERE cid = ? AND message_id = ?").execute(arguments: [record.cid, record.id])
        try insert(db, record)
    }

    /// A conversation's own references, from its (new) name and attributes.
    static func replace(_ db: Database, cid: String, name: String?, attr: JSONValue) throws {
        try db.cachedStatement(sql: "DELETE FROM media_refs WHERE cid = ? AND message_id = ?").execute(
            arguments: [cid, conversationSource])
        try insert(db, ids(name: name, attr: attr), cid: cid, source: conversationSource)
    }

    private static func insert(_ db: Database, _ ids: [String], cid: String, source: String) throws {
        guard !ids.isEmpty else { return }
        let statement = try db.cachedStatement(sql: "INSERT OR IGNORE INTO media_refs (media_id, cid, message_id) VALUES (?, ?, ?)")
        for id in ids { try statement.execute(arguments: [id, cid, source]) }
    }
}

extension SQLiteStore: MediaRetentionQueries {
    func unreferencedMedia(createdAtOrBefore cutoff: Int64, after: MediaRetention.Cursor?, limit: Int) async throws -> [MediaRetention.File]
    {
        try await db.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT id, owner, name, size, created_at FROM media_files f
                    WHERE created_at <= ? AND (created_at > ? OR (created_at = ? AND id > ?))
                    AND NOT EXISTS (SELECT 1 FROM media_refs r WHERE r.media_id = f.id)
                    ORDER BY created_at, id LIMIT ?
                    """,
                arguments: [cutoff, after?.createdAt ?? Int64.min, after?.createdAt ?? Int64.min, after?.id ?? "", limit]
            ).map { MediaRetention.File(id: $0["id"], owner: $0["owner"], name: $0["name"], size: $0["size"], createdAt: $0["created_at"]) }
        }
    }

    func conversationsNamingMedia(_ id: String) async throws -> [String] {
        try await db.read { db in
            try String.fetchAll(db, sql: "SELECT DISTINCT cid FROM media_refs WHERE media_id = ? ORDER BY cid", arguments: [id])
        }
    }

    func isMediaReferenced(_ id: String) async throws -> Bool {
        try await db.read { db in try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM media_refs WHERE media_id = ?)", arguments: [id])
        }
            ?? false
    }
}
