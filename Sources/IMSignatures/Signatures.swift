import Crypto
import Foundation

/// An action the server may require a signature for (when it runs with an app id and master key): what
/// clients sign and what the server checks, in one place.
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

    /// The text that is signed, as LeanCloud defines it (timestamps in seconds).
    ///
    /// The texts are fields joined by `:`, so they are unambiguous only because the server refuses `:` in
    /// client ids and nonces (conversation ids are generated and hold none after their `_tmp:` prefix;
    /// timestamps are digits), refuses the nonces `join`, `invite` and `kick` (a `conv start` text ending in
    /// one would read as that action's), and refuses a signed `conv start` with no members, whose text
    /// (`app:client::t:n`) is a login's. LeanCloud's SDKs always list the creator among the members they sign
    /// (so does IMClient), and the nonces the server has seen are shared by all actions.
    func text(appID: String, clientID: String, timestamp: Int64, nonce: String) -> String {
        func member(_ cid: String, _ members: [String], _ action: String) -> String {
            "\(appID):\(clientID):\(cid):\(members.sorted().joined(separator: ":")):\(timestamp):\(nonce):\(action)"
        }
        switch self {
        case .open:
            return "\(appID):\(clientID)::\(timestamp):\(nonce)"
        case .startConversation(let members):
            return "\(appID):\(clientID):\(members.sorted().joined(separator: ":")):\(timestamp):\(nonce)"
        case .join(let cid):
            return member(cid, [clientID], "join")
        case .invite(let cid, let members):
            return member(cid, members, "invite")
        case .kick(let cid, let members):
            return member(cid, members, "kick")
        }
    }
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

/// Computes and checks signatures: lowercase hex HMAC-SHA1 of the action's text with a key (the app's
/// master key, or an interceptor's secret).
public struct Signer: Sendable {
    public let appID: String
    private let keyBytes: Data
    private var key: SymmetricKey { SymmetricKey(data: keyBytes) }

    public init(appID: String, masterKey: String) {
        self.appID = appID
        keyBytes = Data(masterKey.utf8)
    }

    /// The signature of `action` by `clientID`.
    public func sign(_ action: IMSignatureAction, clientID: String, timestamp: Int64, nonce: String) -> String {
        let text = action.text(appID: appID, clientID: clientID, timestamp: timestamp, nonce: nonce)
        let mac = HMAC<Insecure.SHA1>.authenticationCode(for: Data(text.utf8), using: key)
        return mac.map { String(format: "%02x", $0) }.joined()
    }

    /// A fresh signature of `action` by `clientID`: now, with a random nonce.
    public func signature(for action: IMSignatureAction, clientID: String) -> IMSignature {
        let timestamp = Int64(Date().timeIntervalSince1970)
        let nonce = UUID().uuidString
        return IMSignature(
            timestamp: timestamp, nonce: nonce,
            signature: sign(action, clientID: clientID, timestamp: timestamp, nonce: nonce))
    }

    /// Constant-time check of a presented signature.
    public func isValid(
        _ signature: String, for action: IMSignatureAction, clientID: String, timestamp: Int64,
        nonce: String
    ) -> Bool {
        let message = Data(action.text(appID: appID, clientID: clientID, timestamp: timestamp, nonce: nonce).utf8)
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
