import Foundation
import Synchronization

/// Session tokens handed out on login, valid for a fixed time.
final class SessionTokens: Sendable {
    private let ttl: TimeInterval
    private let tokens = Mutex<[String: (clientID: String, expires: Date)]>([:])

    init(ttl: TimeInterval) { self.ttl = ttl }

    func issue(for clientID: String) -> String {
        let token = Identifiers.random(length: 32)
        let now = Date()
        tokens.withLock { tokens in
            tokens = tokens.filter { $0.value.expires > now }
            tokens[token] = (clientID, now.addingTimeInterval(ttl))
        }
        return token
    }

    /// The client id the token was issued to, if it is still valid.
    func clientID(for token: String) -> String? {
        tokens.withLock { tokens in
            guard let entry = tokens[token], entry.expires > Date() else { return nil }
            return entry.clientID
        }
    }
}
