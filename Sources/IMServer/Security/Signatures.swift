import Foundation
import IMCore
import IMSignatures
import Synchronization

/// Checks signatures on login and conversation actions: valid, fresh (within the window) and not replayed
/// (each nonce once per window). Used nonces are written to the store in the check's transaction, so a
/// captured login cannot be replayed after a restart, nor on another node.
final class SignatureVerifier: Sendable {
    let signer: Signer
    private let window: Int64
    private let store: any ServerStore
    /// Separates the nonces of different verifiers (the app's, each interceptor's).
    private let scope: String
    private let writes = Atomic<Int>(0)

    init(signer: Signer, windowSeconds: Int, store: any ServerStore, scope: String) {
        self.signer = signer
        window = Int64(windowSeconds)
        self.store = store
        self.scope = scope
    }

    /// Throws `failure` (4102 for login, 4302 for conversations) with a detail saying what was wrong.
    func verify(_ action: IMSignatureAction, by clientID: String, command: Command, failure: IMErrorCode) async throws {
        guard let t = command.t, let nonce = command.n, !nonce.isEmpty, let signature = command.s else {
            throw IMError(failure, "signature required: send t (seconds), n (nonce) and s")
        }
        // Signed texts are fields joined by ':' (see `IMSignatureAction.text`): a nonce holding one could
        // shift the fields so that one action's signature verifies as another's, and a `conv start` text
        // ending in an action's name could read as that action's.
        guard !nonce.contains(":"), !["join", "invite", "kick"].contains(nonce) else {
            throw IMError(failure, "the nonce must not contain ':' nor be join, invite or kick")
        }
        if case .startConversation(let members) = action, members.isEmpty {
            throw IMError(
                failure,
                "a signed conv start lists its members in m, the creator included (as LeanCloud's SDKs do): with none its text is a login's"
            )
        }
        let now = Int64(Date().timeIntervalSince1970)
        // Compared as a range around now: `t` comes from the client and may be any Int64 (no overflow).
        guard t >= now - window, t <= now + window else {
            throw IMError(failure, "signature timestamp is outside the \(window) s window")
        }
        let presented = signature.lowercased()
        guard
            Self.acceptedTexts(for: action, by: clientID).contains(where: {
                signer.isValid(presented, for: $0, clientID: clientID, timestamp: t, nonce: nonce)
            })
        else {
            throw IMError(failure, "signature does not match")
        }
        let purge = writes.wrappingAdd(1, ordering: .relaxed).newValue % 1000 == 0
        let replayed = try await store.useNonce(scope: scope, nonce: nonce, now: now, window: window, purge: purge)
        if replayed { throw IMError(failure, "nonce already used") }
    }

    /// The actions whose signed text authorizes `action`. A join (`conv join`, or `conv add` of the client
    /// itself) is signed `…:join` by Hookbot's IMClient, but LeanCloud has no join action: its SDKs'
    /// `join()` is `add([self])` and call the signature factory with `invite` (the JS SDK's
    /// `_appendConversationSignature(command, 'invite', [self])`), so a factory written to LeanCloud's
    /// documentation signs `…:cid:self:t:n:invite`. Both texts say the master key's holder lets this client
    /// in, so both are accepted.
    static func acceptedTexts(for action: IMSignatureAction, by clientID: String) -> [IMSignatureAction] {
        guard case .join(let cid) = action else { return [action] }
        return [action, .invite(conversationId: cid, members: [clientID])]
    }
}
