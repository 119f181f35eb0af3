import Foundation
import IMCore

/// An action the server may require a signature for (when it runs with an app id and master key).
public enum IMSignatureAction: Sendable, Equatable {
    /// Logging in (`session open`).
    case open
    /// Creating a conversation with `members` (as sent, without the creator).
    case startConversation(members: [String])
    /// Joining a conversation.
    case join(conversationId: String)
    /// Adding other members.
    case invite(conversationId: String, members: [String])
    /// Removing other members.
    case kick(conversationId: String, members: [String])
}

/// A signature: timestamp in seconds, a nonce used once, and the hex HMAC-SHA1 the server checks.
public struct IMSignature: Sendable, Equatable {
    public var timestamp: Int64
    public var nonce: String
    public var signature: String

    public init(timestamp: Int64, nonce: String, signature: String) {
        self.timestamp = timestamp
        self.nonce = nonce
        self.signature = signature
    }
}

/// Supplies signatures, typically by asking the app's own backend (which holds the master key).
/// Reconnects present the session token of the last login instead, so they need no new login signature.
public protocol IMSignatureProvider: Sendable {
    func signature(clientId: String, action: IMSignatureAction) async throws -> IMSignature
}

extension IMClient {
    /// `command` with `t`, `n` and `s` set when a signature provider is configured.
    func signed(_ command: Command, _ action: IMSignatureAction) async throws(IMError) -> Command {
        guard let provider = options.signatureProvider else { return command }
        let signature: IMSignature
        do {
            signature = try await provider.signature(clientId: clientId, action: action)
        } catch let error as IMError {
            throw error
        } catch {
            throw IMError(.signatureUnavailable, "the signature provider failed: \(error)")
        }
        var command = command
        command.t = signature.timestamp
        command.n = signature.nonce
        command.s = signature.signature
        return command
    }
}
