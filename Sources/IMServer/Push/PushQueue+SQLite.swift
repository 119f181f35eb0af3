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
}

extension SQLiteStore: PushQueueStore {
    func enqueuePushes(_ items: [PushQueueItem]) async throws {
        guard !items.isEmpty else { return }
        try await db.write { db in
            let insert = try db.cachedStatement(
                sql: """
                    INSERT INTO push_queue (client_id, provider, token, keys, message_id, content, attempts, created_at, due_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """)
            for item in items {
                let keys = item.keys.map {
                    JSONValue.object(["p256dh": .string($0.p256dh), "auth": .string($0.auth)]).jsonString()
                }
                try insert.execute(arguments: [
                    item.clientID, item.provider, item.token, keys, item.messageID, item.content, item.attempts, item.createdAt,
                    item.dueAt,
                ])
            }
        }
    }

    func claimPushes(now: Int64, limit: Int, holdUntil: Int64) async throws -> [PushQueueItem] {
        try await db.write { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT * FROM push_queue WHERE due_at <= ? AND held_until <= ? ORDER BY due_at, id LIMIT ?
                    """, arguments: [now, now, limit])
            let items = rows.map { row in
                PushQueueItem(
                    id: row["id"], clientID: row["client_id"], provider: row["provider"], token: row["token"],
                    keys: PushDeviceRecord.keys(fromJSON: row["keys"]), messageID: row["message_id"], content: row["content"],
                    attempts: row["attempts"], createdAt: row["created_at"], dueAt: row["due_at"])
            }
            for item in items {
                try db.execute(sql: "UPDATE push_queue SET held_until = ? WHERE id = ?", arguments: [holdUntil, item.id])
            }
            return items
        }
    }

    func removePush(id: Int64) async throws {
        try await db.write { db in try db.execute(sql: "DELETE FROM push_queue WHERE id = ?", arguments: [id]) }
    }

    func removePushes(provider: String, token: String) async throws -> Int {
        try await db.write { db in
            try db.execute(sql: "DELETE FROM push_queue WHERE provider = ? AND token = ?", arguments: [provider, token])
            return db.changesCount
        }
    }

    func reschedulePush(id: Int64, attempts: Int, dueAt: Int64) async throws {
        try await db.write { db in
            try db.execute(
                sql: "UPDATE push_queue SET attempts = ?, due_at = ?, held_until = 0 WHERE id = ?", arguments: [attempts, dueAt, id])
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
