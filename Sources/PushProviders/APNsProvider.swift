@preconcurrency import Crypto
import Foundation
import IMCore
import NIOHTTP1

/// Apple Push Notification service with token-based authentication (a `.p8` signing key).
public struct APNsSettings: Sendable {
    public enum Environment: String, Sendable {
        case production, sandbox

        /// Apple's endpoints.
        public var url: String {
            switch self {
            case .production: "https://api.push.apple.com"
            case .sandbox: "https://api.sandbox.push.apple.com"
            }
        }
    }

    /// The Team ID (the JWT's `iss`).
    public var teamID: String
    /// The signing key's Key ID (the JWT's `kid`).
    public var keyID: String
    /// The `.p8` file's text (a PKCS#8 P-256 private key in PEM).
    public var privateKeyPEM: String
    /// The app's bundle id (`apns-topic`).
    public var topic: String
    public var environment: Environment
    /// Where requests go instead of the environment's URL (a test server, a proxy).
    public var endpoint: String?
    /// A provider token is reused this long (Apple: refresh between 20 and 60 minutes).
    public var tokenLifetime: Duration = .seconds(50 * 60)
    /// Requests in flight at once (APNs multiplexes them as HTTP/2 streams on one connection).
    public var maxConcurrentRequests: Int = 100

    public init(
        teamID: String, keyID: String, privateKeyPEM: String, topic: String, environment: Environment = .production,
        endpoint: String? = nil
    ) {
        self.teamID = teamID
        self.keyID = keyID
        self.privateKeyPEM = privateKeyPEM
        self.topic = topic
        self.environment = environment
        self.endpoint = endpoint
    }

    /// Settings whose key is read from the `.p8` file at `keyFile`.
    public init(
        teamID: String, keyID: String, keyFile: String, topic: String, environment: Environment = .production,
        endpoint: String? = nil
    ) throws {
        guard let text = try? String(contentsOfFile: keyFile, encoding: .utf8) else {
            throw PushError.invalidCredentials("APNs key file \(keyFile) cannot be read")
        }
        self.init(teamID: teamID, keyID: keyID, privateKeyPEM: text, topic: topic, environment: environment, endpoint: endpoint)
    }
}

/// Sends to APNs over HTTP/2 (`POST /3/device/<token>`), authenticated by an ES256 JWT that is reused for
/// `tokenLifetime` and made anew when APNs answers `ExpiredProviderToken` (then the request is sent once more).
public final class APNsProvider: PushProvider {
    public let name: String
    let settings: APNsSettings
    let http: PushHTTPClient
    let baseURL: String
    let tokens: TokenCache
    let limit: ConcurrencyLimit

    /// APNs takes at most 4 KB of payload (5 KB for VoIP, not used here).
    static let maxPayloadBytes = 4096

    public init(name: String = "apns", settings: APNsSettings, http: PushHTTPClient) throws {
        let key: P256.Signing.PrivateKey
        do {
            key = try P256.Signing.PrivateKey(pemRepresentation: settings.privateKeyPEM)
        } catch {
            throw PushError.invalidCredentials("APNs key \(settings.keyID) is not a PEM P-256 private key (.p8): \(error)")
        }
        guard !settings.teamID.isEmpty, !settings.keyID.isEmpty, !settings.topic.isEmpty else {
            throw PushError.invalidSettings("APNs needs a team id, a key id and a topic (the bundle id)")
        }
        let base = settings.endpoint ?? settings.environment.url
        _ = try checkedHTTPURL(base, what: "APNs endpoint", error: PushError.invalidSettings)
        self.name = name
        self.settings = settings
        self.http = http
        self.baseURL = base.hasSuffix("/") ? String(base.dropLast()) : base
        self.limit = ConcurrencyLimit(settings.maxConcurrentRequests)
        let (teamID, keyID, lifetime) = (settings.teamID, settings.keyID, settings.tokenLifetime)
        self.tokens = TokenCache {
            let issuedAt = Int(Date().timeIntervalSince1970)
            let jwt = try JWT.es256(header: ["kid": .string(keyID)], claims: ["iss": .string(teamID), "iat": .int(issuedAt)], key: key)
            return .init(value: jwt, validUntil: .now + lifetime)
        }
    }

    public func send(_ notification: PushNotification, to device: PushDevice) async throws -> PushOutcome {
        try checkProvider(of: device)
        let token = device.token
        try PushDevice.checkAPNsToken(token)
        if let collapseID = notification.collapseID, collapseID.utf8.count > 64 {
            throw PushError.invalidNotification("apns-collapse-id is at most 64 bytes, got \(collapseID.utf8.count)")
        }
        if let collapseID = notification.collapseID,
            collapseID.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        {
            // It becomes a header: a line break in it would be refused by HTTP/2 or split the header block.
            throw PushError.invalidNotification("apns-collapse-id has a control character")
        }
        let body = Array(Self.payload(for: notification).jsonString().utf8)
        guard body.count <= Self.maxPayloadBytes else {
            throw PushError.payloadTooLarge("APNs payload is \(body.count) bytes, the limit is \(Self.maxPayloadBytes)")
        }
        var headers = HTTPHeaders()
        headers.add(name: "apns-topic", value: settings.topic)
        headers.add(name: "apns-push-type", value: notification.isBackground ? "background" : "alert")
        // Apple: background pushes must have priority 5.
        headers.add(name: "apns-priority", value: notification.isBackground || notification.priority == .normal ? "5" : "10")
        if let ttl = notification.ttl {
            headers.add(name: "apns-expiration", value: ttl <= 0 ? "0" : String(Int(Date().timeIntervalSince1970) + ttl))
        }
        if let collapseID = notification.collapseID { headers.add(name: "apns-collapse-id", value: collapseID) }
        headers.add(name: "content-type", value: "application/json")
        let url = "\(baseURL)/3/device/\(token)"
        let baseHeaders = headers
        return await limit.run {
            await http.postAuthorized(
                url: url, headers: baseHeaders, body: body, scheme: "bearer", tokens: tokens,
                tokenFailure: { .rejected(status: 0, reason: "APNs token signing failed: \($0)") },
                refused: { $0.status == 403 && Self.reason($0) == "ExpiredProviderToken" },
                outcome: { Self.outcome($0, reason: Self.reason($0)) })
        }
    }

    /// APNs' `reason` of an answer, or the start of its text.
    static func reason(_ response: PushHTTPClient.Response) -> String {
        response.json?["reason"]?.stringValue ?? response.text.prefix(200).description
    }

    /// APNs' answer as an outcome (Apple's "Handling notification responses from APNs").
    static func outcome(_ response: PushHTTPClient.Response, reason: String) -> PushOutcome {
        switch (response.status, reason) {
        case (200, _): return .delivered(id: response.headers.first(name: "apns-id"))
        case (410, _), (400, "BadDeviceToken"), (400, "DeviceTokenNotForTopic"):
            return .deviceGone(reason: "\(response.status) \(reason)")
        case (429, _), (500..<600, _): return .retryLater(after: response.retryAfter, reason: "\(response.status) \(reason)")
        default: return .rejected(status: response.status, reason: reason)
        }
    }

    /// `{"aps": {...}}` with the app's data beside `aps` (a data key named `aps` is dropped).
    static func payload(for notification: PushNotification) -> JSONValue {
        var aps: [String: JSONValue] = [:]
        if notification.isBackground {
            aps["content-available"] = .int(1)
        } else {
            var alert: [String: JSONValue] = [:]
            if let title = notification.title { alert["title"] = .string(title) }
            if let body = notification.body { alert["body"] = .string(body) }
            aps["alert"] = .object(alert)
        }
        if let badge = notification.badge { aps["badge"] = .int(badge) }
        if let sound = notification.sound { aps["sound"] = .string(sound) }
        var payload = notification.data
        payload["aps"] = .object(aps)
        return .object(payload)
    }
}
