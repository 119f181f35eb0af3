import Foundation
import IMCore
import PostgresNIO

/// `media_refs` in the shared PostgreSQL store (migration 8, `media-refs`). The store calls these inside
/// the transaction that stores, edits or recalls a message or changes a conversation.
extension MediaReferences {
    static func tables(schema s: String) -> [String] {
        let (url, objID) = (postgresPatterns[0], postgresPatterns[1])
        return [
            """
            CREATE TABLE \(s).media_refs (
                media_id TEXT NOT NULL,
                cid TEXT NOT NULL REFERENCES \(s).conversations (id) ON DELETE CASCADE,
                message_id TEXT NOT NULL,
                PRIMARY KEY (media_id, cid, message_id)
            )
            """,
            "CREATE INDEX media_refs_by_source ON \(s).media_refs (cid, message_id)",
            "CREATE INDEX media_files_by_created_at ON \(s).media_files (created_at)",
            // What the server stored before this migration (the same patterns as `ids(in:)`).
            """
            INSERT INTO \(s).media_refs (media_id, cid, message_id)
            SELECT DISTINCT found.m[1], messages.cid, messages.id FROM \(s).messages,
                LATERAL (SELECT regexp_matches(messages.data, '\(url)', 'g') UNION ALL
                    SELECT regexp_matches(messages.data, '\(objID)', 'g')) AS found(m)
            WHERE NOT messages.bin AND NOT messages.recalled
            ON CONFLICT DO NOTHING
            """,
            """
            INSERT INTO \(s).media_refs (media_id, cid, message_id)
            SELECT DISTINCT found.m[1], c.id, '' FROM \(s).conversations c,
                LATERAL (SELECT regexp_matches(coalesce(c.name, '') || ' ' || c.attr::text, '\(url)', 'g') UNION ALL
                    SELECT regexp_matches(coalesce(c.name, '') || ' ' || c.attr::text, '\(objID)', 'g')) AS found(m)
            ON CONFLICT DO NOTHING
            """,
        ]
    }

    /// The references of the messages a batch inserted, in one statement; none when no message names a file
    /// (the batch's round trips stay as they were).
    static func insert(_ run: PostgresStore.Runner, _ records: [MessageRecord], inserted: Set<String>) async throws {
        var (media, cids, sources) = ([String](), [String](), [String]())
        for record in records where inserted.contains(record.id) {
            for id in ids(in: record) {
                media.append(id)
                cids.append(record.cid)
                sources.append(record.id)
            }
        }
        guard !media.isEmpty else { return }
        _ = try await run(
            """
            INSERT INTO media_refs (media_id, cid, message_id)
            SELECT * FROM unnest(\(media)::text[], \(cids)::text[], \(sources)::text[]) ON CONFLICT DO NOTHING
            """)
    }

    /// An edited or recalled message's references: the new content's (a recalled message names none).
    static func replace(_ run: PostgresStore.Runner, _ record: MessageRecord) async throws {
        try await replace(run, ids(in: record), cid: record.cid, source: record.id)
    }

    /// A conversation's own references, from its (new) name and attributes.
    static func replace(_ run: PostgresStore.Runner, cid: String, name: String?, attr: JSONValue) async throws {
        try await replace(run, ids(name: name, attr: attr), cid: cid, source: conversationSource)
    }

    /// A new conversation's references; no statement when its name and attributes name no file.
    static func insert(_ run: PostgresStore.Runner, conversation record: ConversationRecord) async throws {
        let found = ids(name: record.name, attr: record.attr)
        guard !found.isEmpty else { return }
        try await replace(run, found, cid: record.id, source: conversationSource)
    }

    /// One statement: the source's old rows out, its new ones in. The rows both name stay (a statement's
    /// insert does not see its own delete, so deleting them too would lose them).
    private static func replace(_ run: PostgresStore.Runner, _ ids: [String], cid: String, source: String) async throws {
        _ = try await run(
            """
            WITH gone AS (DELETE FROM media_refs WHERE cid = \(cid) AND message_id = \(source) AND media_id <> ALL(\(ids)::text[]))
            INSERT INTO media_refs (media_id, cid, message_id)
            SELECT media, \(cid), \(source) FROM unnest(\(ids)::text[]) AS media ON CONFLICT DO NOTHING
            """)
    }
}

extension PostgresStore: MediaRetentionQueries {
    func unreferencedMedia(createdAtOrBefore cutoff: Int64, after: MediaRetention.Cursor?, limit: Int) async throws -> [MediaRetention.File]
    {
        let (afterT, afterID) = (after?.createdAt ?? Int64.min, after?.id ?? "")
        return try await fetch(
            """
            SELECT id, owner, name, size, created_at FROM media_files f
            WHERE created_at <= \(cutoff) AND (created_at, id) > (\(afterT), \(afterID))
            AND NOT EXISTS (SELECT 1 FROM media_refs r WHERE r.media_id = f.id)
            ORDER BY created_at, id LIMIT \(Int64(limit))
            """
        ).map { row in
            let (id, owner, name, size, createdAt) = try row.decode((String, String, String, Int64, Int64).self)
            return MediaRetention.File(id: id, owner: owner, name: name, size: size, createdAt: createdAt)
        }
    }

    func conversationsNamingMedia(_ id: String) async throws -> [String] {
        try await fetch("SELECT DISTINCT cid FROM media_refs WHERE media_id = \(id) ORDER BY cid").map { try $0.decode(String.self) }
    }

    func isMediaReferenced(_ id: String) async throws -> Bool {
        try await fetch("SELECT EXISTS (SELECT 1 FROM media_refs WHERE media_id = \(id))").first?.decode(Bool.self) ?? false
    }
}
