import Foundation
import IMCore
import IMSignatures

extension Command {
    /// `session open` for an interceptor, signed with its interceptor secret.
    static func interceptorOpen(_ clientID: String, secret: String) -> Command {
        let t = Int64(Date().timeIntervalSince1970)
        var open = Command(cmd: .session, op: .open)
        open.peerId = clientID
        open.t = t
        open.n = UUID().uuidString
        open.s = Signer(appID: "hookbot", masterKey: secret).sign(.open, clientID: clientID, timestamp: t, nonce: open.n ?? "")
        return open
    }
}
