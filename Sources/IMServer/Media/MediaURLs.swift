import Crypto
import Foundation
import Synchronization

/// How the server writes file URLs and checks the ones it is asked for (docs/MEDIA.md, "File URLs").
///
/// - The origin. With `MediaConfiguration.publicURL` every absolute URL starts with it. Without it, the answers
///   to a requester (`fileTokens`, `/1.1/files/<id>`) use the origin that requester reached the server by (its
///   `Host`), which concerns only itself; what goes to *other* clients (the `url` the file-message fill writes)
///   never comes from a request: it is the server's listening address (`http://127.0.0.1:8080`), or the bare
///   path when the server listens on every address (`0.0.0.0`, `::`), where it cannot know its own name.
/// - Signed URLs (`signedURLs`): `/media/<id>/<expires>-<mac>/<name>`, the expiry (Unix seconds) and an
///   HMAC-SHA256 of the id and expiry in the path, not the query, since LeanCloud's `thumbnailURL()` appends
///   `?imageView/…` to the URL it has. The key is derived from the master key, as the upload tickets' is, so
///   every node of a cluster accepts the others' URLs; without a master key it is random per process.
public final class MediaURLs: Sendable {
    let publicURL: String?
    let signed: Bool
    let ttl: Int64
    private let key: Data
    private let scheme: String
    private let host: String?
    private let bound: Mutex<Int>

    init(_ configuration: ServerConfiguration) {
        publicURL = configuration.media.publicURL
        signed = configuration.media.signedURLs
        ttl = Int64(max(1, configuration.media.urlTTL))
        key = Self.signingKey(configuration)
        scheme = configuration.tls == nil ? "http" : "https"
        let host = configuration.host
        self.host = ["", "0.0.0.0", "::", "[::]", "*"].contains(host) ? nil : (host.contains(":") ? "[\(host)]" : host)
        bound = Mutex(configuration.port)
    }

    private static let processKey = SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }

    static func signingKey(_ configuration: ServerConfiguration) -> Data {
        guard let master = configuration.masterKey else { return processKey }
        return Data(SHA256.hash(data: Data("hookbot media url\u{0}\(master)".utf8)))
    }

    /// The port the server listens on, once bound (the configured one may be 0).
    func listening(port: Int) { bound.withLock { $0 = port } }

    /// The origin written into what other clients receive: the public URL, else the listening address; nil
    /// when neither is known.
    var origin: String? {
        if let publicURL { return publicURL }
        guard let host else { return nil }
        let port = bound.withLock { $0 }
        guard port > 0 else { return nil }
        return "\(scheme)://\(host):\(port)"
    }

    /// `/media/<id>[/<expires>-<mac>]/<name>`: the name percent-encoded, the signature when URLs are signed.
    func path(id: String, name: String, now: Int64 = Int64(Date().timeIntervalSince1970)) -> String {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "/?#;")
        let encoded = name.addingPercentEncoding(withAllowedCharacters: allowed) ?? "file"
        guard signed else { return "/media/\(id)/\(encoded)" }
        let expires = now + ttl
        return "/media/\(id)/\(expires)-\(mac(id: id, expires: expires))/\(encoded)"
    }

    /// An absolute URL for an answer to `requestBase`'s requester: the public URL's origin when set, else the
    /// one the request came by.
    func url(id: String, name: String, requestBase: String) -> String { (publicURL ?? requestBase) + path(id: id, name: name) }

    /// What the file-message fill writes: `origin` + path, or the bare path when no origin is known.
    func messageURL(id: String, name: String) -> String { (origin ?? "") + path(id: id, name: name) }

    /// The URL `POST /media` answers: absolute with a public URL, else the path (relative to the server).
    func uploadAnswerURL(id: String, name: String) -> String { (publicURL ?? "") + path(id: id, name: name) }

    private func mac(id: String, expires: Int64) -> String {
        let code = HMAC<SHA256>.authenticationCode(for: Data("media\u{0}\(id)\u{0}\(expires)".utf8), using: SymmetricKey(data: key))
        return LeanCloudUploadTicket.base64URL(Data(code).prefix(16))
    }

    /// Checks the signature part of a download path (`<expires>-<mac>`, nil when the path has none). Passes
    /// anything when URLs are not signed (a signed URL written earlier keeps working after signing is turned off).
    func check(id: String, signature: String?, now: Int64 = Int64(Date().timeIntervalSince1970)) throws(MediaURLError) {
        guard signed else { return }
        guard let signature else {
            throw .unsigned(
                "this server serves files by signed URL only (/media/<id>/<expires>-<signature>/<name>); ask for the file's URL again")
        }
        let parts = signature.split(separator: "-", maxSplits: 1)
        guard parts.count == 2, let expires = Int64(parts[0]),
            LeanCloudCaller.constantTimeEqual(String(parts[1]), mac(id: id, expires: expires))
        else { throw .badSignature("the URL's signature does not hold for this file (altered, or not issued by this server)") }
        guard expires >= now else {
            throw .expired("the URL expired \(now - expires) s ago; ask for the file's URL again (GET /1.1/files/\(id))")
        }
    }
}

/// A download refused for its URL (HTTP 403): 4610 not signed or a bad signature, 4611 expired.
enum MediaURLError: Error, Equatable {
    case unsigned(String)
    case badSignature(String)
    case expired(String)

    var code: Int {
        switch self {
        case .unsigned, .badSignature: 4610
        case .expired: 4611
        }
    }

    var reason: String {
        switch self {
        case .unsigned: "unsignedURL"
        case .badSignature: "badSignature"
        case .expired: "urlExpired"
        }
    }

    var detail: String {
        switch self {
        case .unsigned(let text), .badSignature(let text), .expired(let text): text
        }
    }
}
