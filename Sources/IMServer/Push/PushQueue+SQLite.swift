import Foundation
import GRDB
import IMCore
import PushProviders

/// `push_queue` in the server's SQLite file (migration `v14-push-queue`).
enum SQLitePushQueue {
    static func create(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE push_queue (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    client_id TEXT NOT NULL,
                    provider TEXT NOT NULL,
                    token TEXT NOT NULL,
                    keys TEXT,
                    message_id TEXT NOT NULL,
                    content TEXT NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    created_at INTEGER NOT NULL,
                    due_at INTEGER NOT NULL,
                    held_until INTEGER NOT NULL DEFAULT 0
                );
                CREATE INDEX push_queue_due ON push_queue(due_at);
                CREATE INDEX push_queue_device ON push_queue(provider, token);
                """)
    }

    /// Migration `v16-badge-indexes`: what a push's badge (the receiver's unread count) is counted with, a few
    /// index lookups per receiver (`unreadTotals`).
    static func createBadgeIndexes(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE INDEX messages_by_sender ON messages(cid, from_id, t);
                CREATE INDEX messages_restricted ON messages(cid, t) WHERE recipients IS NOT NULL;
                """)
    }
}

extension SQLiteStore: PushQueueStore {
    func enqueuePushes(_ items: [PushQueueItem]) async throws {
        // 500 rows a transaction: the message pipeline's commits get the writer in between.
        for chunk in Self.chunks(items, size: 500) {
            try await db.write { db in
                let insert = try db.cachedStatement(
                    sql: """
                        INSERT INTO push_queue (client_id, provider, token, keys, message_id, content, attempts, created_at, due_at)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """)
                for item in chunk {
                    let keys = item.keys?.stored
                    try insert.execute(arguments: [
                        item.clientID, item.provider, item.token, keys, item.messageID, item.content, item.attempts, item.createdAt,
                        item.dueAt,
                    ])
                }
            }
        }
    }

    func claimPushes(now: Int64, limits: [String: Int], holdUntil: Int64, removing finished: [Int64]) async throws
        -> [PushQueueItem]
    {
        try await db.write { db in
            for chunk in Self.chunks(finished, size: 500) {
                try db.execute(
                    sql: "DELETE FROM push_queue WHERE id IN (\(databaseQuestionMarks(count: chunk.count)))",
                    arguments: StatementArguments(Array(chunk)))
            }
            var items: [PushQueueItem] = []
            // `+provider`: the due-time index, walked from the oldest; the (provider, token) index would read
            // every queued push of the provider and sort them.
            let select = try db.cachedStatement(
                sql: """
                    SELECT * FROM push_queue WHERE +provider = ? AND due_at <= ? AND held_until <= ? ORDER BY due_at, id LIMIT ?
                    """)
            for (provider, limit) in limits.sorted(by: { $0.key < $1.key }) where limit > 0 {
                items += try Row.fetchAll(select, arguments: [provider, now, now, limit]).map(Self.pushQueueItem)
            }
            for chunk in Self.chunks(items.map(\.id), size: 500) {
                try db.execute(
                    sql: "UPDATE push_queue SET held_until = ? WHERE id IN (\(databaseQuestionMarks(count: chunk.count)))",
                    arguments: StatementArguments([holdUntil] + Array(chunk)))
            }
            for i in items.indices { items[i].heldUntil = holdUntil }
            return items.sorted { ($0.dueAt, $0.id) < ($1.dueAt, $1.id) }
        }
    }

    private static func pushQueueItem(_ row: Row) -> PushQueueItem {
        PushQueueItem(
            id: row["id"], clientID: row["client_id"],
            device: PushDevice(provider: row["provider"], token: row["token"], keys: PushSubscriptionKeys(stored: row["keys"])),
            messageID: row["message_id"], content: row["content"],
            attempts: row["attempts"], createdAt: row["created_at"], dueAt: row["due_at"])
    }

    func removePushes(ids: [Int64]) async throws {
        guard !ids.isEmpty else { return }
        try await db.write { db in
            for chunk in Self.chunks(ids, size: 500) {
                try db.execute(
                    sql: "DELETE FROM push_queue WHERE id IN (\(databaseQuestionMarks(count: chunk.count)))",
                    arguments: StatementArguments(Array(chunk)))
            }
        }
    }

    /// Per membership: every message after the read mark (`messages_by_conversation`, index only), less the
    /// receiver's own (`messages_by_sender`) and the restricted ones it may not see (`messages_restricted`, only
    /// rows with recipients). The first count is shared by the receivers with the same conversation and read
    /// mark (a batch of one message's pushes: one count for all of them), so a badge costs a few index lookups,
    /// not a walk over every unread message's row.
    func unreadTotals(of clientIDs: [String]) async throws -> [String: Int] {
        guard !clientIDs.isEmpty else { return [:] }
        return try await db.read { db in
            var totals: [String: Int] = [:]
            var after: [String: Int] = [:]
            let now = Identifiers.nowMillis()
            let all = try db.cachedStatement(sql: "SELECT COUNT(*) FROM messages WHERE cid = ? AND t > ?")
            let own = try db.cachedStatement(
                sql: "SELECT COUNT(*) FROM messages INDEXED BY messages_by_sender WHERE cid = ? AND from_id = ? AND t > ?")
            let hidden = try db.cachedStatement(
                sql: """
                    SELECT COUNT(*) FROM messages INDEXED BY messages_restricted
                    WHERE cid = ? AND t > ? AND recipients IS NOT NULL AND from_id <> ?
                      AND NOT EXISTS (SELECT 1 FROM json_each(messages.recipients) WHERE value = ?)
                    """)
            for chunk in Self.chunks(Array(Set(clientIDs)), size: 400) {
                let memberships = try Row.fetchAll(
                    db,
                    sql: """
                        SELECT mem.client_id, mem.cid, mem.read_t FROM members mem JOIN conversations c ON c.id = mem.cid
                        WHERE mem.client_id IN (\(databaseQuestionMarks(count: chunk.count)))
                          AND (c.expires_at IS NULL OR c.expires_at > ?)
                        """, arguments: StatementArguments(Array(chunk)) + [now])
                for row in memberships {
                    let (client, cid, readT): (String, String, Int64) = (row[0], row[1], row[2])
                    let key = cid + "\u{0}" + String(readT)
                    let newer: Int
                    if let known = after[key] {
                        newer = known
                    } else {
                        newer = try Int.fetchOne(all, arguments: [cid, readT]) ?? 0
                        after[key] = newer
                    }
                    guard newer > 0 else { continue }
                    let mine = try Int.fetchOne(own, arguments: [cid, client, readT]) ?? 0
                    let unseen = try Int.fetchOne(hidden, arguments: [cid, readT, client, client]) ?? 0
                    let unread = newer - mine - unseen
                    if unread > 0 { totals[client, default: 0] += unread }
                }
            }
            return totals
        }
    }

    func removePushes(provider: String, token: String) async throws -> Int {
        try await db.write { db in
            try db.execute(sql: "DELETE FROM push_queue WHERE provider = ? AND token = ?", arguments: [provider, token])
            return db.changesCount
        }
    }

    func reschedulePush(id: Int64, attempts: Int, dueAt: Int64, heldUntil: Int64) async throws {
        try await db.write { db in
            try db.execute(
                sql: "UPDATE push_queue SET attempts = ?, due_at = ?, held_until = 0 WHERE id = ? AND held_until = ?",
                arguments: [attempts, dueAt, id, heldUntil])
        }
    }

    func releasePushHolds() async throws {
        try await db.write { db in try db.execute(sql: "UPDATE push_queue SET held_until = 0 WHERE held_until <> 0") }
    }

    func connectedElsewhere(_ clientIDs: [String]) async throws -> Set<String> { [] }

    func pushQueueDepth() async throws -> Int {
        try await db.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM push_queue") ?? 0 }
    }
}
