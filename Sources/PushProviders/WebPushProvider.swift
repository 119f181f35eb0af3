@preconcurrency import Crypto
import Foundation
import IMCore
import NIOHTTP1

/// The application server's identity for VAPID (RFC 8292): a P-256 key and a contact.
public struct VAPIDSettings: Sendable {
    /// `mailto:` or `https:` contact the push service may use (the JWT's `sub`).
    public var subject: String
    /// The private key: base64url of the 32-byte scalar (what `web-push generate-vapid-keys` prints) or PEM.
    public var privateKey: String
    /// How long one JWT is valid (RFC 8292: at most 24 hours); it is reused for one audience until 10 minutes
    /// before that.
    public var tokenLifetime: Duration = .seconds(12 * 3600)

    public init(subject: String, privateKey: String) {
        self.subject = subject
        self.privateKey = privateKey
    }
}

public struct WebPushSettings: Sendable {
    public var vapid: VAPIDSettings
    /// The `TTL` header when the notification has none: four weeks, what browsers' push services keep at most.
    public var defaultTTL: Int = 28 * 24 * 3600
    public var maxConcurrentRequests: Int = 128
    /// Which subscription endpoints are posted to (public https hosts by default).
    public var endpointPolicy: PushEndpointPolicy = .publicHTTPS

    public init(vapid: VAPIDSettings) { self.vapid = vapid }
}

public struct UnifiedPushSettings: Sendable {
    /// Sent along when set; distributors that check VAPID need it, the others ignore it.
    public var vapid: VAPIDSettings?
    public var defaultTTL: Int = 28 * 24 * 3600
    public var maxConcurrentRequests: Int = 128
    /// Which distributor endpoints are posted to (public https hosts by default; a distributor on the local
    /// network needs `allowHTTP` / `allowPrivateAddresses`).
    public var endpointPolicy: PushEndpointPolicy = .publicHTTPS

    public init(vapid: VAPIDSettings? = nil) { self.vapid = vapid }
}

/// A VAPID signing key with its JWTs cached per audience (the push service's origin).
final class VAPIDSigner: Sendable {
    let key: P256.Signing.PrivateKey
    let settings: VAPIDSettings
    /// base64url of the uncompressed public key: the `k=` of the header, the browser's `applicationServerKey`.
    let publicKey: String
    private let cache = VAPIDTokens()

    init(settings: VAPIDSettings) throws {
        let text = settings.privateKey.trimmingCharacters(in: .whitespacesAndNewlines)
        if text.hasPrefix("-----BEGIN") {
            guard let key = try? P256.Signing.PrivateKey(pemRepresentation: text) else {
                throw PushError.invalidCredentials("the VAPID key is PEM but not a P-256 private key")
            }
            self.key = key
        } else {
            guard let raw = Base64URL.decode(text), raw.count == 32, let key = try? P256.Signing.PrivateKey(rawRepresentation: raw) else {
                throw PushError.invalidCredentials("the VAPID key is neither PEM nor base64url of a 32-byte P-256 private key")
            }
            self.key = key
        }
        guard settings.subject.hasPrefix("mailto:") || settings.subject.hasPrefix("https:") else {
            throw PushError.invalidSettings("the VAPID subject is a mailto: or https: URI, got '\(settings.subject)'")
        }
        guard settings.tokenLifetime > .seconds(600), settings.tokenLifetime <= .seconds(24 * 3600) else {
            throw PushError.invalidSettings("the VAPID token lifetime is between 10 minutes and 24 hours")
        }
        self.settings = settings
        self.publicKey = Base64URL.encode(key.publicKey.x963Representation)
    }

    /// The push resource's origin (RFC 6454), the JWT's `aud`: scheme, host (bracketed when IPv6), port when given.
    static func origin(of url: URL) -> String {
        let host = (url.host ?? "").lowercased()
        let bracketed = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        return "\((url.scheme ?? "https").lowercased())://\(bracketed)" + (url.port.map { ":\($0)" } ?? "")
    }

    /// `Authorization: vapid t=<jwt>, k=<public key>` for a push resource at `url`.
    func authorization(for url: URL) async throws -> String {
        let audience = Self.origin(of: url)
        let jwt = try await cache.token(for: audience, lifetime: settings.tokenLifetime) { expiry in
            try JWT.es256(
                header: ["typ": .string("JWT")],
                claims: ["aud": .string(audience), "exp": .int(expiry), "sub": .string(settings.subject)], key: key)
        }
        return "vapid t=\(jwt), k=\(publicKey)"
    }
}

private actor VAPIDTokens {
    private var tokens: [String: (jwt: String, reuseUntil: ContinuousClock.Instant)] = [:]

    func token(for audience: String, lifetime: Duration, make: @Sendable (Int) throws -> String) rethrows -> String {
        if let cached = tokens[audience], ContinuousClock.now < cached.reuseUntil { return cached.jwt }
        let seconds = Int(lifetime.components.seconds)
        let jwt = try make(Int(Date().timeIntervalSince1970) + seconds)
        if tokens.count > 10_000 { tokens.removeAll() } // one per push service origin: a handful in practice
        tokens[audience] = (jwt, .now + lifetime - .seconds(600))
        return jwt
    }
}

/// What Web Push and UnifiedPush share: the endpoint is the device, the body is the notification's JSON,
/// encrypted (RFC 8291) when the device has keys.
struct WebPushSender: Sendable {
    let http: PushHTTPClient
    let vapid: VAPIDSigner?
    let defaultTTL: Int
    let limit: ConcurrencyLimit
    let policy: PushEndpointPolicy

    func send(_ notification: PushNotification, to device: PushDevice, requireKeys: Bool) async throws -> PushOutcome {
        let url = try policy.check(device.token)
        let plaintext = Array(notification.jsonValue.jsonString().utf8)
        var headers = HTTPHeaders()
        let body: [UInt8]
        if let keys = device.keys {
            guard let userAgentKey = Base64URL.decode(keys.p256dh) else {
                throw PushError.invalidSubscriptionKeys("p256dh is not base64url")
            }
            guard let auth = Base64URL.decode(keys.auth) else { throw PushError.invalidSubscriptionKeys("auth is not base64url") }
            body = try WebPushEncryption.encrypt(plaintext, userAgentPublicKey: userAgentKey, authSecret: auth)
            headers.add(name: "content-encoding", value: "aes128gcm")
            headers.add(name: "content-type", value: "application/octet-stream")
        } else if requireKeys {
            throw PushError.invalidSubscriptionKeys("a Web Push subscription needs its p256dh and auth keys")
        } else {
            guard plaintext.count <= 4096 else {
                throw PushError.payloadTooLarge("push message is \(plaintext.count) bytes, the limit is 4096")
            }
            body = plaintext
            headers.add(name: "content-type", value: "application/json")
        }
        headers.add(name: "ttl", value: String(max(0, notification.ttl ?? defaultTTL)))
        headers.add(name: "urgency", value: notification.priority == .high ? "high" : "normal")
        if let collapseID = notification.collapseID { headers.add(name: "topic", value: Self.topic(collapseID)) }
        let authorization = try await vapid?.authorization(for: url)
        if let authorization { headers.add(name: "authorization", value: authorization) }
        let requestHeaders = headers
        return await limit.run {
            do {
                let response = try await http.send(method: .POST, url: device.token, headers: requestHeaders, body: body)
                return genericOutcome(response, deliveredID: response.headers.first(name: "location"), reason: Self.reason(response))
            } catch {
                return transportOutcome(error)
            }
        }
    }

    static func reason(_ response: PushHTTPClient.Response) -> String {
        if let json = response.json {
            // Mozilla's autopush: {"code", "errno", "error", "message"}; others vary.
            let parts = [json["error"]?.stringValue, json["message"]?.stringValue].compactMap { $0 }
            if !parts.isEmpty { return parts.joined(separator: ": ") }
        }
        let text = response.text.prefix(200).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? HTTPResponseStatus(statusCode: response.status).reasonPhrase : text
    }

    /// RFC 8030 §5.4: a topic is at most 32 characters of the base64url alphabet; a collapse id that is not is
    /// replaced by base64url of the first 24 bytes of its SHA-256 (32 characters, the same for the same id).
    static func topic(_ collapseID: String) -> String {
        let alphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        if !collapseID.isEmpty, collapseID.count <= 32, collapseID.allSatisfy(alphabet.contains) { return collapseID }
        return Base64URL.encode(SHA256.hash(data: Array(collapseID.utf8)).prefix(24))
    }
}

/// Web Push (RFC 8030) to a browser's push subscription: the payload encrypted with the subscription's keys
/// (RFC 8291, `aes128gcm`), the application server identified by VAPID (RFC 8292).
public final class WebPushProvider: PushProvider {
    public let name: String
    let sender: WebPushSender
    /// The VAPID public key, base64url: what the page passes to `pushManager.subscribe({applicationServerKey})`.
    public var applicationServerKey: String { sender.vapid!.publicKey }

    public init(name: String = "webpush", settings: WebPushSettings, http: PushHTTPClient) throws {
        self.name = name
        sender = WebPushSender(
            http: http, vapid: try VAPIDSigner(settings: settings.vapid), defaultTTL: settings.defaultTTL,
            limit: ConcurrencyLimit(settings.maxConcurrentRequests), policy: settings.endpointPolicy)
    }

    public func send(_ notification: PushNotification, to device: PushDevice) async throws -> PushOutcome {
        try checkProvider(of: device)
        return try await sender.send(notification, to: device, requireKeys: true)
    }
}

/// UnifiedPush: the device is the endpoint its distributor gave. With the subscription's keys the message is
/// encrypted as Web Push (what current distributors expect); without, the notification's JSON is posted as is.
public final class UnifiedPushProvider: PushProvider {
    public let name: String
    let sender: WebPushSender

    public init(name: String = "unifiedpush", settings: UnifiedPushSettings = UnifiedPushSettings(), http: PushHTTPClient) throws {
        self.name = name
        sender = WebPushSender(
            http: http, vapid: try settings.vapid.map(VAPIDSigner.init), defaultTTL: settings.defaultTTL,
            limit: ConcurrencyLimit(settings.maxConcurrentRequests), policy: settings.endpointPolicy)
    }

    public func send(_ notification: PushNotification, to device: PushDevice) async throws -> PushOutcome {
        try checkProvider(of: device)
        return try await sender.send(notification, to: device, requireKeys: false)
    }
}
