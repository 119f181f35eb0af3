import Foundation
import IMCore
import PostgresNIO
import PushProviders

/// `push_queue` in the shared PostgreSQL store (migration 11, `push-queue`): the nodes claim due pushes with
/// `FOR UPDATE SKIP LOCKED`, so each is sent once, and a dead node's held pushes are taken by another once
/// their hold (`claimTimeout`) runs out.
enum PostgresPushQueue {
    static func tables(schema s: String) -> [String] {
        [
            """
            CREATE TABLE \(s).push_queue (
                id BIGSERIAL PRIMARY KEY,
                client_id TEXT NOT NULL,
                provider TEXT NOT NULL,
                token TEXT NOT NULL,
                keys TEXT,
                message_id TEXT NOT NULL,
                content TEXT NOT NULL,
                attempts INTEGER NOT NULL DEFAULT 0,
                created_at BIGINT NOT NULL,
                due_at BIGINT NOT NULL,
                held_until BIGINT NOT NULL DEFAULT 0
            )
            """,
            "CREATE INDEX push_queue_due ON \(s).push_queue (due_at)",
            "CREATE INDEX push_queue_device ON \(s).push_queue (provider, token)",
        ]
    }
}

extension PostgresStore: PushQueueStore {
    func enqueuePushes(_ items: [PushQueueItem]) async throws {
        guard !items.isEmpty else { return }
        try await transaction { connection in
            for item in items {
                let keys = item.keys.map { JSONValue.object(["p256dh": .string($0.p256dh), "auth": .string($0.auth)]).jsonString() }
                _ = try await connection.query(
                    """
                    INSERT INTO push_queue (client_id, provider, token, keys, message_id, content, attempts, created_at, due_at)
                    VALUES (\(item.clientID), \(item.provider), \(item.token), \(keys), \(item.messageID), \(item.content),
                        \(item.attempts), \(item.createdAt), \(item.dueAt))
                    """, logger: logger
                ).collect()
            }
        }
    }

    func claimPushes(now: Int64, limit: Int, holdUntil: Int64) async throws -> [PushQueueItem] {
        try await fetch(
            """
            UPDATE push_queue SET held_until = \(holdUntil) WHERE id IN (
                SELECT id FROM push_queue WHERE due_at <= \(now) AND held_until <= \(now)
                ORDER BY due_at, id LIMIT \(Int64(limit)) FOR UPDATE SKIP LOCKED)
            RETURNING id, client_id, provider, token, keys, message_id, content, attempts, created_at, due_at
            """
        ).map { row in
            let (id, client, provider, token, keys, message, content, attempts, createdAt, dueAt) = try row.decode(
                (Int64, String, String, String, String?, String, String, Int32, Int64, Int64).self)
            return PushQueueItem(
                id: id, clientID: client, provider: provider, token: token, keys: PushDeviceRecord.keys(fromJSON: keys),
                messageID: message, content: content, attempts: Int(attempts), createdAt: createdAt, dueAt: dueAt)
        }.sorted { ($0.dueAt, $0.id) < ($1.dueAt, $1.id) }
    }

    func removePush(id: Int64) async throws {
        _ = try await fetch("DELETE FROM push_queue WHERE id = \(id)")
    }

    func removePushes(provider: String, token: String) async throws -> Int {
        try await fetch("DELETE FROM push_queue WHERE provider = \(provider) AND token = \(token) RETURNING id").count
    }

    func reschedulePush(id: Int64, attempts: Int, dueAt: Int64) async throws {
        _ = try await fetch("UPDATE push_queue SET attempts = \(Int32(attempts)), due_at = \(dueAt), held_until = 0 WHERE id = \(id)")
    }

    /// Nothing: other nodes may be sending what they hold; a dead node's holds run out by themselves.
    func releasePushHolds() async throws {}

    func pushQueueDepth() async throws -> Int {
        Int(try await fetch("SELECT COUNT(*) FROM push_queue").first?.decode(Int64.self) ?? 0)
    }

    func connectedElsewhere(_ clientIDs: [String]) async throws -> Set<String> {
        Set(
            try await fetch("SELECT DISTINCT client_id FROM presence WHERE client_id = ANY(\(clientIDs))").map {
                try $0.decode(String.self)
            })
    }
}
