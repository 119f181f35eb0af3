import Foundation
import GRDB
import IMCore

extension ConversationRecord {
    init(row: Row) {
        self.init(
            id: row["id"], name: row["name"], creator: row["creator"], transient: row["transient"], uniqueKey: row["unique_key"],
            attr: JSONValue.parse(row["attr"] ?? "{}") ?? .object([:]), muted: ClientIDList.parse(row["muted"]) ?? [],
            lm: row["lm"], createdAt: row["created_at"], updatedAt: row["updated_at"], expiresAt: row["expires_at"],
            joinPolicy: JoinPolicy.stored(row["join_policy"]), lockReason: row["lock_reason"])
    }
}

/// Conversation and membership queries. Functions take a GRDB `Database` so callers choose the transaction.
enum ConversationTable {
    /// Creates a conversation with its creator among its members, or, for a unique one, returns the existing
    /// conversation with the same member set. Runs inside the caller's write transaction, so concurrent
    /// unique starts resolve to one row.
    static func create(_ db: Database, _ new: NewConversation) throws -> (record: ConversationRecord, created: Bool) {
        let key = new.uniqueKey
        if let key, let row = try Row.fetchOne(db, sql: "SELECT * FROM conversations WHERE unique_key = ?", arguments: [key]) {
            return (ConversationRecord(row: row), false)
        }
        let id = new.newID()
        try db.execute(
            sql: """
                INSERT INTO conversations
                    (id, name, creator, transient, unique_key, attr, created_at, updated_at, expires_at, join_policy)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                id, new.name, new.creator, new.transient, key, (new.attr ?? .object([:])).jsonString(), new.now, new.now, new.expiresAt,
                new.joinPolicy.rawValue,
            ])
        if !new.transient {
            for member in new.allMembers {
                try db.execute(
                    sql: "INSERT INTO members (cid, client_id, joined_at, delivered_t, read_t) VALUES (?, ?, ?, ?, ?)",
                    arguments: [id, member, new.now, new.now, new.now])
            }
        }
        guard let record = try find(db, id: id) else { throw IMError(.internalError, "conversation vanished") }
        return (record, true)
    }

    /// The conversation, or error 4401 when there is none with that id.
    static func existing(_ db: Database, id: String) throws -> ConversationRecord {
        try StoreRules.existing(find(db, id: id), id)
    }

    /// The conversation with this id; an expired temporary conversation no longer exists.
    static func find(_ db: Database, id: String) throws -> ConversationRecord? {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT * FROM conversations WHERE id = ? AND (expires_at IS NULL OR expires_at > ?)"),
            arguments: [id, Identifiers.nowMillis()]
        ).map(ConversationRecord.init)
    }

    /// Deletes expired temporary conversations with their members and messages; returns how many.
    @discardableResult
    static func purgeExpired(_ db: Database, now: Int64) throws -> Int {
        try db.execute(sql: "DELETE FROM conversations WHERE expires_at IS NOT NULL AND expires_at <= ?", arguments: [now])
        return db.changesCount
    }

    static func members(_ db: Database, cid: String) throws -> [String] {
        try String.fetchAll(
            db.cachedStatement(sql: "SELECT client_id FROM members WHERE cid = ? ORDER BY joined_at, client_id"), arguments: [cid])
    }

    static func isMember(_ db: Database, cid: String, clientID: String) throws -> Bool {
        try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM members WHERE cid = ? AND client_id = ?"), arguments: [cid, clientID])
            ?? false
    }

    /// Memberships of a client in conversations that exist (not expired), with its delivery cursor and
    /// read mark in each.
    static func memberships(_ db: Database, clientID: String) throws -> [Membership] {
        try Row.fetchAll(
            db,
            sql: """
                SELECT m.cid, m.delivered_t, m.read_t FROM members m JOIN conversations c ON c.id = m.cid
                WHERE m.client_id = ? AND (c.expires_at IS NULL OR c.expires_at > ?)
                """,
            arguments: [clientID, Identifiers.nowMillis()]
        ).map { Membership(cid: $0["cid"], deliveredT: $0["delivered_t"], readT: $0["read_t"]) }
    }
}

extension ConversationTable {
    /// Adds members; returns those who were not members yet. New members' cursors start at the last
    /// message, so older messages reach them through history, not as offline backlog.
    static func addMembers(_ db: Database, cid: String, clientIDs: [String], now: Int64) throws -> [String] {
        let last = try MessageTable.lastTimestamp(db, cid: cid)
        var added: [String] = []
        for clientID in clientIDs {
            try db.execute(
                sql: "INSERT OR IGNORE INTO members (cid, client_id, joined_at, delivered_t, read_t) VALUES (?, ?, ?, ?, ?)",
                arguments: [cid, clientID, now, last, last])
            if db.changesCount > 0 { added.append(clientID) }
        }
        if !added.isEmpty { try touch(db, cid: cid, now: now) }
        return added
    }

    /// Removes members; returns those who were members.
    static func removeMembers(_ db: Database, cid: String, clientIDs: [String]) throws -> [String] {
        var removed: [String] = []
        for clientID in clientIDs {
            try db.execute(sql: "DELETE FROM members WHERE cid = ? AND client_id = ?", arguments: [cid, clientID])
            if db.changesCount > 0 { removed.append(clientID) }
        }
        if !removed.isEmpty { try touch(db, cid: cid, now: Identifiers.nowMillis()) }
        return removed
    }

    static func touch(_ db: Database, cid: String, now: Int64) throws {
        try db.execute(sql: "UPDATE conversations SET updated_at = ? WHERE id = ?", arguments: [now, cid])
    }
}
