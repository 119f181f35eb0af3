import Crypto
import Foundation
import GRDB
import IMCore
import Synchronization

/// The strings that are signed, as LeanCloud defines them; timestamps are in seconds.
public enum SignedAction: Sendable {
    case login(clientID: String)
    case start(clientID: String, members: [String])
    /// `action` is `join`, `invite` or `kick`.
    case member(clientID: String, conversationID: String, members: [String], action: String)

    func text(appID: String, timestamp: Int64, nonce: String) -> String {
        switch self {
        case .login(let clientID):
            return "\(appID):\(clientID)::\(timestamp):\(nonce)"
        case .start(let clientID, let members):
            return "\(appID):\(clientID):\(members.sorted().joined(separator: ":")):\(timestamp):\(nonce)"
        case .member(let clientID, let cid, let members, let action):
            return "\(appID):\(clientID):\(cid):\(members.sorted().joined(separator: ":")):\(timestamp):\(nonce):\(action)"
        }
    }
}

/// Computes signatures: lowercase hex HMAC-SHA1 of the action's text with the master key.
public struct Signer: Sendable {
    public let appID: String
    private let keyBytes: Data
    private var key: SymmetricKey { SymmetricKey(data: keyBytes) }

    public init(appID: String, masterKey: String) {
        self.appID = appID
        keyBytes = Data(masterKey.utf8)
    }

    public func sign(_ action: SignedAction, timestamp: Int64, nonce: String) -> String {
        let mac = HMAC<Insecure.SHA1>.authenticationCode(for: Data(action.text(appID: appID, timestamp: timestamp, nonce: nonce).utf8), using: key)
        return mac.map { String(format: "%02x", $0) }.joined()
    }

    /// Constant-time check of a presented signature.
    func isValid(_ signature: String, for action: SignedAction, timestamp: Int64, nonce: String) -> Bool {
        let message = Data(action.text(appID: appID, timestamp: timestamp, nonce: nonce).utf8)
        guard let presented = Self.bytes(fromHex: signature) else { return false }
        return HMAC<Insecure.SHA1>.isValidAuthenticationCode(presented, authenticating: message, using: key)
    }

    private static func bytes(fromHex hex: String) -> Data? {
        guard hex.count == 40 else { return nil }
        var data = Data(capacity: 20)
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            guard let byte = UInt8(hex[index..<next], radix: 16) else { return nil }
            data.append(byte)
            index = next
        }
        return data
    }
}

/// Checks signatures on login and conversation actions: valid, fresh (within the window) and not replayed
/// (each nonce once per window). Used nonces are written to the database in the check's transaction, so a
/// captured login cannot be replayed after a restart either.
final class SignatureVerifier: Sendable {
    let signer: Signer
    private let window: Int64
    private let db: DatabasePool
    /// Separates the nonces of different verifiers (the app's, each interceptor's).
    private let scope: String
    private let writes = Atomic<Int>(0)

    init(signer: Signer, windowSeconds: Int, db: DatabasePool, scope: String) {
        self.signer = signer
        window = Int64(windowSeconds)
        self.db = db
        self.scope = scope
    }

    /// Throws `failure` (4102 for login, 4302 for conversations) with a detail saying what was wrong.
    func verify(_ action: SignedAction, command: Command, failure: IMErrorCode) async throws {
        guard let t = command.t, let nonce = command.n, !nonce.isEmpty, let signature = command.s else {
            throw IMError(failure, "signature required: send t (seconds), n (nonce) and s")
        }
        let now = Int64(Date().timeIntervalSince1970)
        // Compared as a range around now: `t` comes from the client and may be any Int64 (no overflow).
        guard t >= now - window, t <= now + window else {
            throw IMError(failure, "signature timestamp is outside the \(window) s window")
        }
        guard signer.isValid(signature.lowercased(), for: action, timestamp: t, nonce: nonce) else {
            throw IMError(failure, "signature does not match")
        }
        let purge = writes.wrappingAdd(1, ordering: .relaxed).newValue % 1000 == 0
        let (scope, window) = (scope, window)
        let replayed = try await db.write { db -> Bool in
            if purge { try db.execute(sql: "DELETE FROM signature_nonces WHERE seen_at < ?", arguments: [now - window]) }
            if let seenAt = try Int64.fetchOne(
                db, sql: "SELECT seen_at FROM signature_nonces WHERE scope = ? AND nonce = ?", arguments: [scope, nonce]),
               seenAt >= now - window {
                return true
            }
            try db.execute(
                sql: "INSERT OR REPLACE INTO signature_nonces (scope, nonce, seen_at) VALUES (?, ?, ?)",
                arguments: [scope, nonce, now])
            return false
        }
        if replayed { throw IMError(failure, "nonce already used") }
    }
}
