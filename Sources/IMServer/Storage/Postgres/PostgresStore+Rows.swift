import Foundation
import IMCore
import Logging
import PostgresNIO

// MARK: Shared queries

extension PostgresStore {
    /// Runs a statement and returns its rows: on a transaction's connection, or on the pool.
    typealias Runner = (PostgresQuery) async throws -> [PostgresRow]

    static func runner(_ connection: PostgresConnection, _ logger: Logger) -> Runner {
        { query in try await connection.query(query, logger: logger).collect() }
    }

    /// The conversation unless it expired.
    static func conversation(_ run: Runner, id: String) async throws -> ConversationRecord? {
        try await run("SELECT * FROM conversations WHERE id = \(id) AND (expires_at IS NULL OR expires_at > \(now))")
            .first.map(ConversationRecord.init(postgres:))
    }

    /// The conversation, locked until the transaction ends, or error 4401.
    static func lockConversation(_ run: Runner, id: String) async throws -> ConversationRecord {
        let row = try await run("SELECT * FROM conversations WHERE id = \(id) AND (expires_at IS NULL OR expires_at > \(now)) FOR UPDATE")
            .first
        return try StoreRules.existing(row.map(ConversationRecord.init(postgres:)), id)
    }

    static func members(_ run: Runner, cid: String) async throws -> [String] {
        try await run("SELECT client_id FROM members WHERE cid = \(cid) ORDER BY joined_at, client_id").map { try $0.decode(String.self) }
    }

    /// The members of several conversations (each listed, possibly empty), in the order of `members`.
    static func memberLists(_ run: Runner, cids: [String]) async throws -> [String: [String]] {
        guard !cids.isEmpty else { return [:] }
        var lists = Dictionary(cids.map { ($0, [String]()) }, uniquingKeysWith: { first, _ in first })
        let rows = try await run("SELECT cid, client_id FROM members WHERE cid = ANY(\(cids)) ORDER BY cid, joined_at, client_id")
        for row in rows {
            let (cid, clientID) = try row.decode((String, String).self)
            lists[cid, default: []].append(clientID)
        }
        return lists
    }

    static func isMember(_ run: Runner, cid: String, clientID: String) async throws -> Bool {
        try await !run("SELECT 1 FROM members WHERE cid = \(cid) AND client_id = \(clientID)").isEmpty
    }

    static func lastTimestamp(_ run: Runner, cid: String) async throws -> Int64 {
        try await run("SELECT COALESCE(MAX(t), 0) FROM messages WHERE cid = \(cid)").first?.decode(Int64.self) ?? 0
    }
}

extension ConversationRecord {
    /// A `conversations` row (`SELECT *`).
    init(postgres row: PostgresRow) throws {
        let row = row.makeRandomAccess()
        self.init(
            id: try row["id"].decode(String.self), name: try row["name"].decode(String?.self),
            creator: try row["creator"].decode(String.self),
            transient: try row["transient"].decode(Bool.self), uniqueKey: try row["unique_key"].decode(String?.self),
            attr: JSONValue.parse(try row["attr"].decode(String.self)) ?? .object([:]),
            muted: ClientIDList.parse(try row["muted"].decode(String.self)) ?? [], lm: try row["lm"].decode(Int64?.self),
            createdAt: try row["created_at"].decode(Int64.self), updatedAt: try row["updated_at"].decode(Int64.self),
            expiresAt: try row["expires_at"].decode(Int64?.self),
            joinPolicy: JoinPolicy.stored(try row["join_policy"].decode(String?.self)),
            lockReason: try row["lock_reason"].decode(String?.self)
        )
    }
}

extension MessageRecord {
    /// A `messages` row (`SELECT *`).
    init(postgres row: PostgresRow) throws {
        let row = row.makeRandomAccess()
        self.init(
            id: try row["id"].decode(String.self), cid: try row["cid"].decode(String.self), from: try row["from_id"].decode(String.self),
            data: try row["data"].decode(String.self), t: try row["t"].decode(Int64.self), receipt: try row["receipt"].decode(Bool.self),
            priority: try row["priority"].decode(String?.self), mentionPids: try row["mention_pids"].decode([String]?.self),
            mentionAll: try row["mention_all"].decode(Bool.self), recalled: try row["recalled"].decode(Bool.self),
            patchT: try row["patch_t"].decode(Int64?.self), binary: try row["bin"].decode(Bool.self))
    }
}
