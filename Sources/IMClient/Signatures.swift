import Foundation
import IMCore
@_exported import IMSignatures

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
