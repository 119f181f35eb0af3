import Foundation
import GRDB

/// Session tokens handed out on login, valid for a fixed time. They are kept in SQLite, so a client
/// can resume with its token after the server restarts.
struct SessionTokens: Sendable {
    let db: DatabasePool
    let ttl: TimeInterval

    /// A new token for `clientID`; expired tokens are removed on the way.
    func issue(for clientID: String) async throws -> String {
        let token = Identifiers.random(length: 32)
        let now = Identifiers.nowMillis()
        let expires = now + Int64(ttl * 1000)
        try await db.write { db in
            try db.execute(sql: "DELETE FROM session_tokens WHERE expires_at <= ?", arguments: [now])
            try db.execute(
                sql: "INSERT INTO session_tokens (token, client_id, expires_at) VALUES (?, ?, ?)",
                arguments: [token, clientID, expires])
        }
        return token
    }

    /// Ends a token's validity (the session it was issued to closed itself).
    func revoke(_ token: String) async throws {
        try await db.write { db in
            try db.cachedStatement(sql: "DELETE FROM session_tokens WHERE token = ?").execute(arguments: [token])
        }
    }

    /// The client id the token was issued to, if it is still valid.
    func clientID(for token: String) async throws -> String? {
        let now = Identifiers.nowMillis()
        return try await db.read { db in
            try String.fetchOne(
                db, sql: "SELECT client_id FROM session_tokens WHERE token = ? AND expires_at > ?", arguments: [token, now])
        }
    }
}
