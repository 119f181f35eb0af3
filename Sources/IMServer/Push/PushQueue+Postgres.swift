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
        // One multi-row INSERT (arrays unnested) per 1,000 pushes, not one statement per push.
        for chunk in Self.chunks(items, size: 1000) {
            let keys = chunk.map { $0.keys?.stored ?? "" }
            _ = try await fetch(
                """
                INSERT INTO push_queue (client_id, provider, token, keys, message_id, content, attempts, created_at, due_at)
                SELECT c, p, t, NULLIF(k, ''), m, b, a, cr, d FROM UNNEST(
                    \(chunk.map(\.clientID))::text[], \(chunk.map(\.provider))::text[], \(chunk.map(\.token))::text[],
                    \(keys)::text[], \(chunk.map(\.messageID))::text[], \(chunk.map(\.content))::text[],
                    \(chunk.map { Int32($0.attempts) })::int[], \(chunk.map(\.createdAt))::bigint[], \(chunk.map(\.dueAt))::bigint[]
                ) AS q(c, p, t, k, m, b, a, cr, d)
                """)
        }
    }

    func claimPushes(now: Int64, limits: [String: Int], holdUntil: Int64, removing finished: [Int64]) async throws
        -> [PushQueueItem]
    {
        try await removePushes(ids: finished)
        var items: [PushQueueItem] = []
        for (provider, limit) in limits.sorted(by: { $0.key < $1.key }) where limit > 0 {
            items += try await fetch(
                """
                UPDATE push_queue SET held_until = \(holdUntil) WHERE id IN (
                    SELECT id FROM push_queue WHERE provider = \(provider) AND due_at <= \(now) AND held_until <= \(now)
                    ORDER BY due_at, id LIMIT \(Int64(limit)) FOR UPDATE SKIP LOCKED)
                RETURNING id, client_id, provider, token, keys, message_id, content, attempts, created_at, due_at
                """
            ).map(Self.pushQueueItem)
        }
        for i in items.indices { items[i].heldUntil = holdUntil }
        return items.sorted { ($0.dueAt, $0.id) < ($1.dueAt, $1.id) }
    }

    private static func pushQueueItem(_ row: PostgresRow) throws -> PushQueueItem {
        let (id, client, provider, token, keys, message, content, attempts, createdAt, dueAt) = try row.decode(
            (Int64, String, String, String, String?, String, String, Int32, Int64, Int64).self)
        return PushQueueItem(
            id: id, clientID: client, device: PushDevice(provider: provider, token: token, keys: PushSubscriptionKeys(stored: keys)),
            messageID: message, content: content, attempts: Int(attempts), createdAt: createdAt, dueAt: dueAt)
    }

    func removePushes(ids: [Int64]) async throws {
        for chunk in Self.chunks(ids, size: 5000) {
            _ = try await fetch("DELETE FROM push_queue WHERE id = ANY(\(Array(chunk)))")
        }
    }

    func unreadTotals(of clientIDs: [String]) async throws -> [String: Int] {
        guard !clientIDs.isEmpty else { return [:] }
        let rows = try await fetch(
            """
            SELECT mem.client_id, COUNT(*) FROM members mem JOIN conversations c ON c.id = mem.cid
            JOIN messages m ON m.cid = mem.cid AND m.t > mem.read_t
            WHERE mem.client_id = ANY(\(Array(Set(clientIDs)))) AND (c.expires_at IS NULL OR c.expires_at > \(Identifiers.nowMillis()))
              AND m.from_id <> mem.client_id AND (m.recipients IS NULL OR mem.client_id = ANY(m.recipients))
            GROUP BY mem.client_id
            """)
        var totals: [String: Int] = [:]
        for row in rows {
            let (client, count) = try row.decode((String, Int64).self)
            totals[client] = Int(count)
        }
        return totals
    }

    func removePushes(provider: String, token: String) async throws -> Int {
        try await fetch("DELETE FROM push_queue WHERE provider = \(provider) AND token = \(token) RETURNING id").count
    }

    func reschedulePush(id: Int64, attempts: Int, dueAt: Int64, heldUntil: Int64) async throws {
        _ = try await fetch(
            """
            UPDATE push_queue SET attempts = \(Int32(attempts)), due_at = \(dueAt), held_until = 0
            WHERE id = \(id) AND held_until = \(heldUntil)
            """)
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
