import Crypto
import Foundation
import IMCore

/// The short-lived authorisation of one upload, carried in the `upload_url` the `fileTokens` answer gives (the
/// storage SDK `PUT`s there with no LeanCloud header) and returned as its `token` (which the SDK sends back in
/// `fileCallback`). It names everything the upload needs — the file's object id, its uploader, name and type —
/// and is signed with HMAC-SHA256, so no node has to remember it: with a master key configured every node of a
/// cluster derives the same signing key from it; without one the key is random per process (a single node).
struct LeanCloudUploadTicket: Equatable {
    var objectID: String
    /// The client that asked for the upload; nil for the app key or the operator.
    var uploader: String?
    var name: String
    var mimeType: String?
    /// Unix seconds after which the ticket is refused.
    var expires: Int64

    /// How long an upload URL stays valid.
    static let lifetime: Int64 = 3600

    private static let processKey = SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }

    static func signingKey(_ configuration: ServerConfiguration) -> Data {
        guard let master = configuration.masterKey else { return processKey }
        return Data(SHA256.hash(data: Data("hookbot upload ticket\u{0}\(master)".utf8)))
    }

    func encoded(key: Data) -> String {
        var fields: [String: JSONValue] = ["o": .string(objectID), "n": .string(name), "e": .int(Int(expires))]
        if let uploader { fields["u"] = .string(uploader) }
        if let mimeType { fields["m"] = .string(mimeType) }
        let payload = Data(JSONValue.object(fields).jsonString().utf8)
        let mac = Data(HMAC<SHA256>.authenticationCode(for: payload, using: SymmetricKey(data: key)))
        return Self.base64URL(payload) + "." + Self.base64URL(mac)
    }

    /// The ticket `text` carries, if its signature holds and it has not expired.
    static func decode(_ text: String, key: Data, now: Int64 = Int64(Date().timeIntervalSince1970)) throws -> LeanCloudUploadTicket {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let payload = data(base64URL: String(parts[0])), let mac = data(base64URL: String(parts[1])) else {
            throw LeanCloudFilesError.unauthorized("the upload token is malformed")
        }
        guard HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: payload, using: SymmetricKey(data: key)) else {
            throw LeanCloudFilesError.unauthorized("the upload token's signature does not hold (not issued by this server)")
        }
        guard let text = String(data: payload, encoding: .utf8), let fields = JSONValue.parse(text)?.objectValue,
            let objectID = fields["o"]?.stringValue, let name = fields["n"]?.stringValue, let expires = fields["e"]?.intValue
        else { throw LeanCloudFilesError.unauthorized("the upload token is malformed") }
        guard Int64(expires) >= now else {
            throw LeanCloudFilesError.unauthorized("the upload token has expired; ask POST /1.1/fileTokens again")
        }
        return LeanCloudUploadTicket(
            objectID: objectID, uploader: fields["u"]?.stringValue, name: name, mimeType: fields["m"]?.stringValue, expires: Int64(expires))
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func data(base64URL text: String) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64)
    }
}
