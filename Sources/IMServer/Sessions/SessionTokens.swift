import Foundation

/// Session tokens handed out on login, valid for a fixed time. They are kept in the store, so a client
/// can resume with its token after the server restarts, or on another node.
struct SessionTokens: Sendable {
    let store: any ServerStore
    let ttl: TimeInterval

    /// A new token for `clientID`; expired tokens are removed on the way.
    func issue(for clientID: String) async throws -> String {
        let token = Identifiers.random(length: 32)
        let now = Identifiers.nowMillis()
        let expires = now + Int64(ttl * 1000)
        try await store.issueToken(token, clientID: clientID, expiresAt: expires, now: now)
        return token
    }

    /// Ends a token's validity (the session it was issued to closed itself).
    func revoke(_ token: String) async throws {
        try await store.revokeToken(token)
    }

    /// The client id the token was issued to, if it is still valid.
    func clientID(for token: String) async throws -> String? {
        try await store.clientID(forToken: token, now: Identifiers.nowMillis())
    }
}
