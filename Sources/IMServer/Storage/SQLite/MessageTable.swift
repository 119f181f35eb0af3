import Foundation
import GRDB
import IMCore

extension MessageRecord {
    init(row: Row) {
        self.init(
            id: row["id"], cid: row["cid"], from: row["from_id"], data: row["data"], t: row["t"], receipt: row["receipt"],
            priority: row["priority"], mentionPids: ClientIDList.parse(row["mention_pids"]), mentionAll: row["mention_all"],
            recalled: row["recalled"], patchT: row["patch_t"], binary: row["bin"])
    }
}

/// Message history, offline backlog and delivery cursors.
enum MessageTable {
    static func insert(_ db: Database, _ m: MessageRecord, dedupeToken: String?, recipients: [String]? = nil) throws {
        _ = try insert(db, m, dedupeToken: dedupeToken, recipients: recipients, unlessDuplicate: false)
    }

    /// Inserts `m`, or, with `unlessDuplicate`, nothing when its sender already stored a message with this dedupe
    /// token (the insert's own probe of `messages_by_dedupe_token` answers, instead of a SELECT before every insert);
    /// returns whether it was inserted. Any other constraint (the id, `(cid, t)`) still fails the statement.
    static func insert(
        _ db: Database, _ m: MessageRecord, dedupeToken: String?, recipients: [String]?, unlessDuplicate: Bool
    ) throws -> Bool {
        let audience = recipients.map(ClientIDList.text)
        let mentions = m.mentionPids.map(ClientIDList.text)
        // Constant texts: the statement cache is keyed by the SQL text, which was built anew for every message.
        try db.cachedStatement(sql: unlessDuplicate ? insertUnlessDuplicateSQL : insertSQL).execute(
            arguments: [m.id, m.cid, m.from, m.data, m.t, m.receipt, m.priority, dedupeToken, audience, mentions, m.mentionAll, m.binary])
        return !unlessDuplicate || db.changesCount > 0
    }

    private static let insertSQL = """
        INSERT INTO messages (id, cid, from_id, data, t, receipt, priority, dt, recipients, mention_pids, mention_all, bin)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """
    /// The conflict target names the partial unique index (its WHERE included), so DO NOTHING covers that index only.
    private static let insertUnlessDuplicateSQL = insertSQL + " ON CONFLICT (from_id, dt) WHERE dt IS NOT NULL DO NOTHING"

    /// SQL condition: the message is visible to the client bound twice after it (sender, or in the audience).
    static let visibleTo = "(recipients IS NULL OR from_id = ? OR EXISTS (SELECT 1 FROM json_each(messages.recipients) WHERE value = ?))"

    static func find(_ db: Database, from: String, dedupeToken: String) throws -> MessageRecord? {
        try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM messages WHERE from_id = ? AND dt = ?"), arguments: [from, dedupeToken])
            .map(MessageRecord.init)
    }

    static func find(_ db: Database, id: String) throws -> MessageRecord? {
        try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM messages WHERE id = ?"), arguments: [id]).map(MessageRecord.init)
    }

    static func lastTimestamp(_ db: Database, cid: String) throws -> Int64 {
        try Int64.fetchOne(db.cachedStatement(sql: "SELECT MAX(t) FROM messages WHERE cid = ?"), arguments: [cid]) ?? 0
    }

    /// `limit` messages strictly between `afterT` and `beforeT`, returned in ascending order: the newest
    /// ones, or with `oldestFirst` the oldest ones. Uses the (cid, t) index: O(log n + limit).
    static func history(
        _ db: Database, cid: String, limit: Int, beforeT: Int64?, afterT: Int64?,
        viewer: String? = nil, oldestFirst: Bool = false
    ) throws -> [MessageRecord] {
        let viewer = viewer ?? ""
        let rows = try Row.fetchAll(
            db,
            sql: """
                SELECT * FROM messages WHERE cid = ? AND t < ? AND t > ? AND (? = '' OR \(visibleTo))
                ORDER BY t \(oldestFirst ? "ASC" : "DESC") LIMIT ?
                """,
            arguments: [cid, beforeT ?? Int64.max, afterT ?? Int64.min, viewer, viewer, viewer, limit])
        let records = rows.map(MessageRecord.init)
        return oldestFirst ? records : records.reversed()
    }

    /// Messages of `cid` after the cursor that `clientID` did not send, oldest first.
    static func backlog(_ db: Database, cid: String, clientID: String, after: Int64, limit: Int) throws -> [MessageRecord] {
        try Row.fetchAll(
            db,
            sql: "SELECT * FROM messages WHERE cid = ? AND t > ? AND from_id <> ? AND \(visibleTo) ORDER BY t LIMIT ?",
            arguments: [cid, after, clientID, clientID, clientID, limit]
        ).map(MessageRecord.init)
    }

    /// Moves each delivery cursor forward (never back) to the newest stored message of that conversation
    /// among the acknowledged ones, or at or before the acknowledged range's end. `recent` answers for the
    /// messages the last batches stored without a lookup.
    static func advanceCursors(_ db: Database, _ moves: [CursorKey: CursorMove], recent: RecentMessages? = nil) throws {
        guard !moves.isEmpty else { return }
        let update = try db.cachedStatement(
            sql: "UPDATE members SET delivered_t = MAX(delivered_t, ?) WHERE cid = ? AND client_id = ?")
        let timestamp = try db.cachedStatement(sql: "SELECT t FROM messages WHERE id = ? AND cid = ?")
        let newestThrough = try db.cachedStatement(sql: "SELECT MAX(t) FROM messages WHERE cid = ? AND t <= ?")
        // Members of a conversation acknowledge the same messages: each (id, cid) is looked up once per batch
        // (a fan-out to 50 members was 50 lookups of each message).
        struct MessageKey: Hashable {
            var id: String
            var cid: String
        }
        var timestamps: [MessageKey: Int64?] = [:]
        for (key, move) in moves {
            var newest: Int64?
            for id in move.ids {
                let lookup = MessageKey(id: id, cid: key.cid)
                let found: Int64?
                if let known = timestamps[lookup] {
                    found = known
                } else if let t = recent?.timestamp(of: id, in: key.cid) {
                    found = t
                } else {
                    found = try Int64.fetchOne(timestamp, arguments: [id, key.cid])
                    timestamps[lookup] = found
                }
                if let t = found { newest = max(newest ?? t, t) }
            }
            if let through = move.through, let t = try Int64.fetchOne(newestThrough, arguments: [key.cid, through]) {
                newest = max(newest ?? t, t)
            }
            if let newest { try update.execute(arguments: [newest, key.cid, key.clientID]) }
        }
    }
}
