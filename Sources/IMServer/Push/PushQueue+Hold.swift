import Foundation
import GRDB
import IMCore
import PostgresNIO

/// Held pushes (docs/PUSH.md, "on_offline"): a message's pushes are queued due only after the `on_offline`
/// hook's deadline, then released by what the hook answered. A crash, no answer or a bad one leaves them
/// as queued: the defaults go out when the hold ends.
protocol PushHoldStore: Sendable {
    /// The pushes of `messageID` queued due at `heldDue` and not yet claimed by a worker: those of the
    /// receivers in `dropping` are removed, those in `rewriting` get the new content (`PushContent.stored`),
    /// and all that remain are due at `now`. Answers how many were removed.
    @discardableResult
    func releaseHeldPushes(
        messageID: String, heldDue: Int64, dropping: Set<String>, rewriting: [String: String], now: Int64
    ) async throws -> Int
}

extension SQLiteStore: PushHoldStore {
    func releaseHeldPushes(
        messageID: String, heldDue: Int64, dropping: Set<String>, rewriting: [String: String], now: Int64
    ) async throws -> Int {
        try await db.write { db in
            // The rows are found by their due time (indexed), then changed by id: no scan per receiver.
            let rows = try Row.fetchAll(
                db,
                sql: "SELECT id, client_id FROM push_queue WHERE due_at = ? AND message_id = ? AND held_until = 0",
                arguments: [heldDue, messageID])
            var removed = 0
            let delete = try db.cachedStatement(sql: "DELETE FROM push_queue WHERE id = ?")
            let rewrite = try db.cachedStatement(sql: "UPDATE push_queue SET content = ?, due_at = ? WHERE id = ?")
            let release = try db.cachedStatement(sql: "UPDATE push_queue SET due_at = ? WHERE id = ?")
            for row in rows {
                let id: Int64 = row["id"]
                let client: String = row["client_id"]
                if dropping.contains(client) {
                    try delete.execute(arguments: [id])
                    removed += 1
                } else if let content = rewriting[client] {
                    try rewrite.execute(arguments: [content, now, id])
                } else {
                    try release.execute(arguments: [now, id])
                }
            }
            return removed
        }
    }
}

extension PostgresStore: PushHoldStore {
    func releaseHeldPushes(
        messageID: String, heldDue: Int64, dropping: Set<String>, rewriting: [String: String], now: Int64
    ) async throws -> Int {
        try await transaction { connection in
            // Rows another node claimed meanwhile (held_until set) are left alone: they go out as they are.
            var ids: [(Int64, String)] = []
            for try await row in try await connection.query(
                """
                SELECT id, client_id FROM push_queue
                WHERE due_at = \(heldDue) AND message_id = \(messageID) AND held_until = 0 FOR UPDATE SKIP LOCKED
                """, logger: logger)
            {
                ids.append(try row.decode((Int64, String).self))
            }
            let removed = ids.filter { dropping.contains($0.1) }.map(\.0)
            if !removed.isEmpty {
                _ = try await connection.query("DELETE FROM push_queue WHERE id = ANY(\(removed))", logger: logger).collect()
            }
            var byContent: [String: [Int64]] = [:]
            var released: [Int64] = []
            for (id, client) in ids where !dropping.contains(client) {
                if let content = rewriting[client] { byContent[content, default: []].append(id) } else { released.append(id) }
            }
            for (content, group) in byContent {
                _ = try await connection.query(
                    "UPDATE push_queue SET content = \(content), due_at = \(now) WHERE id = ANY(\(group))", logger: logger
                ).collect()
            }
            if !released.isEmpty {
                _ = try await connection.query("UPDATE push_queue SET due_at = \(now) WHERE id = ANY(\(released))", logger: logger)
                    .collect()
            }
            return removed.count
        }
    }
}
