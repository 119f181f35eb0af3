import Foundation
import IMClient
import IMServer

/// Signs logins and conversation actions with the master key, as an app backend would.
public struct MasterKeySigner: IMSignatureProvider {
    public let signer: Signer

    public init(signer: Signer) { self.signer = signer }

    public func signature(clientId: String, action: IMSignatureAction) async throws -> IMSignature {
        let signed: SignedAction = switch action {
        case .open: .login(clientID: clientId)
        case .startConversation(let members): .start(clientID: clientId, members: members)
        case .join(let cid): .member(clientID: clientId, conversationID: cid, members: [clientId], action: "join")
        case .invite(let cid, let members): .member(clientID: clientId, conversationID: cid, members: members, action: "invite")
        case .kick(let cid, let members): .member(clientID: clientId, conversationID: cid, members: members, action: "kick")
        }
        let timestamp = Int64(Date().timeIntervalSince1970)
        let nonce = UUID().uuidString
        return IMSignature(timestamp: timestamp, nonce: nonce, signature: signer.sign(signed, timestamp: timestamp, nonce: nonce))
    }
}
