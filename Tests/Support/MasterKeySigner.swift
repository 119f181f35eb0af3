import Foundation
import IMClient

/// Signs logins and conversation actions with the master key, as an app backend would.
public struct MasterKeySigner: IMSignatureProvider {
    public let signer: Signer

    public init(signer: Signer) { self.signer = signer }

    public func signature(clientId: String, action: IMSignatureAction) async throws -> IMSignature {
        signer.signature(for: action, clientID: clientId)
    }
}
