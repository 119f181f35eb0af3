import Foundation
import GRDB
import IMCore

/// A conversation row.
struct ConversationRecord: Sendable, Equatable {
    var id: String
    var name: String?
    var creator: String
    var transient: Bool
    var uniqueKey: String?
    var attr: JSONValue
    var muted: [String]
    var lm: Int64?
    var createdAt: Int64
    var updatedAt: Int64
    /// When a temporary conversation expires (ms); nil for the others.
    var expiresAt: Int64?

    init(row: Row) {
        id = row["id"]
        name = row["name"]
        creator = row["creator"]
        transient = row["transient"]
        uniqueKey = row["unique_key"]
        attr = JSONValue.parse(row["attr"] ?? "{}") ?? .object([:])
        muted = ClientIDList.parse(row["muted"]) ?? []
        lm = row["lm"]
        createdAt = row["created_at"]
        updatedAt = row["updated_at"]
        expiresAt = row["expires_at"]
    }

    /// The wire form; `members` is nil for chat rooms.
    func info(members: [String]?) -> ConversationInfo {
        var info = ConversationInfo(objectId: id)
        info.name = name
        info.c = creator
        info.m = transient ? nil : members
        info.tr = transient
        info.unique = uniqueKey != nil
        info.attr = attr
        info.mu = muted
        info.lm = lm
        info.createdAt = createdAt
        info.updatedAt = updatedAt
        if let expiresAt { info.ttl = Int(clamping: max(0, (expiresAt - Identifiers.nowMillis()) / 1000)) }
        return info
    }
}

/// Conversation and membership queries. Functions take a GRDB `Database` so callers choose the transaction.
enum ConversationStore {
    static func uniqueKey(for members: [String]) -> String {
        Array(Set(members)).sorted().joined(separator: "\u{1F}")
    }

    /// Creates a conversation with `creator` among its members, or, for `unique`, returns the existing
    /// conversation with the same member set. Runs inside the caller's write transaction, so concurrent
    /// unique starts resolve to one row.
    /// A temporary conversation (`temporaryTTL` seconds) is never unique and gets an id starting `_tmp:`.
    static func create(
        _ db: Database, creator: String, members: [String], name: String?, attr: JSONValue?,
        unique: Bool, transient: Bool, temporaryTTL: Int? = nil, now: Int64
    ) throws -> (record: ConversationRecord, created: Bool) {
        var all = [creator]
        for member in members where !all.contains(member) { all.append(member) }
        let key = unique && !transient && temporaryTTL == nil ? uniqueKey(for: all) : nil
        if let key, let row = try Row.fetchOne(db, sql: "SELECT * FROM conversations WHERE unique_key = ?", arguments: [key]) {
            return (ConversationRecord(row: row), false)
        }
        let id = temporaryTTL == nil ? Identifiers.conversationID() : "_tmp:" + Identifiers.conversationID()
        let expiresAt = temporaryTTL.map { now + Int64($0) * 1000 }
        try db.execute(
            sql: """
                INSERT INTO conversations (id, name, creator, transient, unique_key, attr, created_at, updated_at, expires_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [id, name, creator, transient, key, (attr ?? .object([:])).jsonString(), now, now, expiresAt])
        if !transient {
            for member in all {
                try db.execute(
                    sql: "INSERT INTO members (cid, client_id, joined_at, delivered_t, read_t) VALUES (?, ?, ?, ?, ?)",
                    arguments: [id, member, now, now, now])
            }
        }
        guard let record = try find(db, id: id) else { throw IMError(.internalError, "conversation vanished") }
        return (record, true)
    }

    /// The conversation, or error 4401 when there is none with that id.
    static func existing(_ db: Database, id: String) throws -> ConversationRecord {
        guard let record = try find(db, id: id) else {
            throw IMError(.invalidMessagingTarget, "conversation \(id) does not exist")
        }
        return record
    }

    /// The largest conversation name, in UTF-8 bytes.
    static let maxNameBytes = 1024
    /// The largest attribute object, as compact JSON.
    static let maxAttributeBytes = 64 * 1024

    /// Refuses names and attributes over the limits (4903), at creation and on every update alike.
    static func checkLimits(name: String?, attr: JSONValue?) throws {
        if let name, name.utf8.count > maxNameBytes {
            throw IMError(.invalidField, "name exceeds \(maxNameBytes) bytes")
        }
        if let attr, attr.jsonString().utf8.count > maxAttributeBytes {
            throw IMError(.invalidField, "attributes exceed \(maxAttributeBytes / 1024) KiB")
        }
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
    static func memberships(_ db: Database, clientID: String) throws -> [(cid: String, deliveredT: Int64, readT: Int64)] {
        try Row.fetchAll(
            db,
            sql: """
                SELECT m.cid, m.delivered_t, m.read_t FROM members m JOIN conversations c ON c.id = m.cid
                WHERE m.client_id = ? AND (c.expires_at IS NULL OR c.expires_at > ?)
                """,
            arguments: [clientID, Identifiers.nowMillis()]
        ).map { ($0["cid"], $0["delivered_t"], $0["read_t"]) }
    }
}

extension ConversationStore {
    /// Adds members; returns those who were not members yet. New members' cursors start at the last
    /// message, so older messages reach them through history, not as offline backlog.
    static func addMembers(_ db: Database, cid: String, clientIDs: [String], now: Int64) throws -> [String] {
        let last = try MessageStore.lastTimestamp(db, cid: cid)
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
