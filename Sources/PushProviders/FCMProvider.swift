@preconcurrency import Crypto
import Foundation
import IMCore
import NIOHTTP1
@preconcurrency import _CryptoExtras

/// A Google service account key (the JSON file the Firebase console downloads), the fields FCM needs.
public struct FCMServiceAccount: Sendable {
    public var projectID: String
    public var clientEmail: String
    public var privateKeyID: String?
    /// PEM, PKCS#8 RSA (`-----BEGIN PRIVATE KEY-----`).
    public var privateKeyPEM: String
    /// Where the OAuth 2.0 JWT grant is posted (`https://oauth2.googleapis.com/token`).
    public var tokenURI: String

    public init(projectID: String, clientEmail: String, privateKeyID: String? = nil, privateKeyPEM: String, tokenURI: String) {
        self.projectID = projectID
        self.clientEmail = clientEmail
        self.privateKeyID = privateKeyID
        self.privateKeyPEM = privateKeyPEM
        self.tokenURI = tokenURI
    }

    /// Reads the service account JSON (`type: service_account`).
    public init(json: [UInt8]) throws {
        guard let object = (try? JSONDecoder().decode(JSONValue.self, from: Data(json)))?.objectValue else {
            throw PushError.invalidCredentials("the FCM service account file is not a JSON object")
        }
        func field(_ key: String) throws -> String {
            guard let value = object[key]?.stringValue, !value.isEmpty else {
                throw PushError.invalidCredentials("the FCM service account file has no '\(key)'")
            }
            return value
        }
        try self.init(
            projectID: field("project_id"), clientEmail: field("client_email"), privateKeyID: object["private_key_id"]?.stringValue,
            privateKeyPEM: field("private_key"), tokenURI: object["token_uri"]?.stringValue ?? "https://oauth2.googleapis.com/token")
    }

    /// Reads the service account JSON file at `path`.
    public init(file path: String) throws {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw PushError.invalidCredentials("the FCM service account file \(path) cannot be read")
        }
        try self.init(json: Array(data))
    }
}

public struct FCMSettings: Sendable {
    public var serviceAccount: FCMServiceAccount
    /// FCM's API root; messages go to `<endpoint>/v1/projects/<project>/messages:send`.
    public var endpoint: String = "https://fcm.googleapis.com"
    public var scope: String = "https://www.googleapis.com/auth/firebase.messaging"
    /// The access token is used until this long before Google's `expires_in` runs out.
    public var tokenRefreshMargin: Duration = .seconds(120)
    public var maxConcurrentRequests: Int = 64

    public init(serviceAccount: FCMServiceAccount, endpoint: String = "https://fcm.googleapis.com") {
        self.serviceAccount = serviceAccount
        self.endpoint = endpoint
    }
}

/// Firebase Cloud Messaging, HTTP v1 API: an OAuth 2.0 access token from the service account's signed JWT
/// (RS256, grant type `urn:ietf:params:oauth:grant-type:jwt-bearer`), cached until shortly before it expires;
/// a 401 makes a new one and sends once more.
public final class FCMProvider: PushProvider {
    public let name: String
    let settings: FCMSettings
    let http: PushHTTPClient
    let sendURL: String
    let tokens: TokenCache
    let limit: ConcurrencyLimit

    /// FCM refuses data keys that are reserved words or start with these.
    static let reservedDataKeys: Set<String> = ["from", "notification", "message_type"]
    static let reservedDataPrefixes = ["google", "gcm"]
    /// FCM takes at most 4096 bytes of message.
    static let maxPayloadBytes = 4096

    public init(name: String = "fcm", settings: FCMSettings, http: PushHTTPClient) throws {
        let account = settings.serviceAccount
        let key: _RSA.Signing.PrivateKey
        do {
            key = try _RSA.Signing.PrivateKey(pemRepresentation: account.privateKeyPEM)
        } catch {
            throw PushError.invalidCredentials("the FCM service account's private_key is not a PEM RSA key: \(error)")
        }
        let tokenURL = try checkedHTTPURL(account.tokenURI, what: "FCM token_uri", error: PushError.invalidSettings)
        _ = try checkedHTTPURL(settings.endpoint, what: "FCM endpoint", error: PushError.invalidSettings)
        guard account.projectID.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == ":" || $0 == "." }) else {
            throw PushError.invalidSettings("FCM project_id '\(account.projectID)' has characters a project id has not")
        }
        self.name = name
        self.settings = settings
        self.http = http
        let base = settings.endpoint.hasSuffix("/") ? String(settings.endpoint.dropLast()) : settings.endpoint
        self.sendURL = "\(base)/v1/projects/\(account.projectID)/messages:send"
        self.limit = ConcurrencyLimit(settings.maxConcurrentRequests)
        let (scope, margin) = (settings.scope, settings.tokenRefreshMargin)
        self.tokens = TokenCache {
            try await Self.fetchAccessToken(
                account: account, key: key, tokenURL: tokenURL.absoluteString, scope: scope, margin: margin, http: http)
        }
    }

    /// Thrown by the token fetch: the outcome the send answers with.
    struct TokenFailure: Error {
        var outcome: PushOutcome
    }

    static func fetchAccessToken(
        account: FCMServiceAccount, key: _RSA.Signing.PrivateKey, tokenURL: String, scope: String, margin: Duration, http: PushHTTPClient
    ) async throws -> TokenCache.Token {
        let now = Int(Date().timeIntervalSince1970)
        var header: [String: JSONValue] = ["typ": .string("JWT")]
        if let kid = account.privateKeyID { header["kid"] = .string(kid) }
        let assertion = try JWT.rs256(
            header: header,
            claims: [
                "iss": .string(account.clientEmail), "scope": .string(scope), "aud": .string(account.tokenURI),
                "iat": .int(now), "exp": .int(now + 3600),
            ], key: key)
        let form = "grant_type=" + formEscape("urn:ietf:params:oauth:grant-type:jwt-bearer") + "&assertion=" + formEscape(assertion)
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "application/x-www-form-urlencoded")
        let started = ContinuousClock.now
        let response: PushHTTPClient.Response
        do {
            response = try await http.send(method: .POST, url: tokenURL, headers: headers, body: Array(form.utf8))
        } catch {
            throw TokenFailure(outcome: transportOutcome(error))
        }
        let json = response.json
        guard response.status == 200, let accessToken = json?["access_token"]?.stringValue, !accessToken.isEmpty else {
            let reason = "OAuth token: " + (json?["error"]?.stringValue ?? response.text.prefix(200).description)
            throw TokenFailure(outcome: genericOutcome(response, deliveredID: nil, reason: reason).notGone)
        }
        let lifetime = Duration.seconds(json?["expires_in"]?.intValue ?? 3600)
        return .init(value: accessToken, validUntil: started + max(.zero, lifetime - margin))
    }

    public func send(_ notification: PushNotification, to device: PushDevice) async throws -> PushOutcome {
        try checkProvider(of: device)
        let token = device.token
        try PushDevice.checkFCMToken(token)
        for key in notification.data.keys {
            if Self.reservedDataKeys.contains(key) || Self.reservedDataPrefixes.contains(where: { key.lowercased().hasPrefix($0) }) {
                throw PushError.invalidNotification("FCM reserves the data key '\(key)'")
            }
        }
        let body = Array(JSONValue.object(["message": Self.message(for: notification, token: token)]).jsonString().utf8)
        guard body.count <= Self.maxPayloadBytes + 1024 else { // the envelope around the 4 KB of message
            throw PushError.payloadTooLarge("FCM message is \(body.count) bytes, the limit is \(Self.maxPayloadBytes)")
        }
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "application/json; charset=UTF-8")
        let baseHeaders = headers
        return await limit.run {
            await http.postAuthorized(
                url: sendURL, headers: baseHeaders, body: body, scheme: "Bearer", tokens: tokens,
                tokenFailure: { error in
                    (error as? TokenFailure)?.outcome ?? .rejected(status: 0, reason: "FCM token signing failed: \(error)")
                },
                refused: { $0.status == 401 }, outcome: Self.outcome)
        }
    }

    /// FCM's answer as an outcome: `{"name": ...}` on success; on failure `error.status` and the FcmError
    /// `errorCode` of `error.details` (UNREGISTERED, SENDER_ID_MISMATCH, QUOTA_EXCEEDED, UNAVAILABLE, ...).
    static func outcome(_ response: PushHTTPClient.Response) -> PushOutcome {
        let json = response.json
        if (200..<300).contains(response.status) { return .delivered(id: json?["name"]?.stringValue) }
        let error = json?["error"]
        let errorCode = error?["details"]?.arrayValue?.lazy.compactMap { $0["errorCode"]?.stringValue }.first
        let status = error?["status"]?.stringValue
        let reason = [errorCode ?? status, error?["message"]?.stringValue].compactMap { $0 }.joined(separator: ": ")
        let text = reason.isEmpty ? response.text.prefix(200).description : reason
        if errorCode == "UNREGISTERED" || errorCode == "SENDER_ID_MISMATCH" || response.status == 404 {
            return .deviceGone(reason: "\(response.status) \(text)")
        }
        return genericOutcome(response, deliveredID: nil, reason: text).notGone
    }

    /// The v1 `message`: `notification` (left out for a background push), `data` as strings, and the Android and
    /// APNs parts for priority, collapse key, time to live, badge and sound.
    static func message(for notification: PushNotification, token: String) -> JSONValue {
        var message: [String: JSONValue] = ["token": .string(token)]
        if !notification.isBackground {
            var shown: [String: JSONValue] = [:]
            if let title = notification.title { shown["title"] = .string(title) }
            if let body = notification.body { shown["body"] = .string(body) }
            message["notification"] = .object(shown)
        }
        if !notification.data.isEmpty {
            message["data"] = .object(
                notification.data.mapValues { value in .string(value.stringValue ?? value.jsonString()) })
        }
        var android: [String: JSONValue] = ["priority": .string(notification.priority == .high ? "HIGH" : "NORMAL")]
        if let collapseID = notification.collapseID { android["collapse_key"] = .string(collapseID) }
        if let ttl = notification.ttl { android["ttl"] = .string("\(max(0, ttl))s") }
        var androidNotification: [String: JSONValue] = [:]
        if !notification.isBackground {
            if let sound = notification.sound { androidNotification["sound"] = .string(sound) }
            if let badge = notification.badge { androidNotification["notification_count"] = .int(badge) }
        }
        if !androidNotification.isEmpty { android["notification"] = .object(androidNotification) }
        message["android"] = .object(android)

        var apnsHeaders: [String: JSONValue] = [
            "apns-priority": .string(notification.isBackground || notification.priority == .normal ? "5" : "10")
        ]
        if let collapseID = notification.collapseID { apnsHeaders["apns-collapse-id"] = .string(collapseID) }
        if let ttl = notification.ttl {
            apnsHeaders["apns-expiration"] = .string(ttl <= 0 ? "0" : String(Int(Date().timeIntervalSince1970) + ttl))
        }
        var aps: [String: JSONValue] = [:]
        if notification.isBackground { aps["content-available"] = .int(1) }
        if let badge = notification.badge { aps["badge"] = .int(badge) }
        if let sound = notification.sound { aps["sound"] = .string(sound) }
        var apns: [String: JSONValue] = ["headers": .object(apnsHeaders)]
        if !aps.isEmpty { apns["payload"] = .object(["aps": .object(aps)]) }
        message["apns"] = .object(apns)
        return .object(message)
    }
}

extension PushOutcome {
    /// A 404/410 that does not mean the device (a wrong project, a token endpoint that moved): rejected instead.
    var notGone: PushOutcome {
        if case .deviceGone(let reason) = self { return .rejected(status: 404, reason: reason) }
        return self
    }
}

/// application/x-www-form-urlencoded escaping of one value.
func formEscape(_ value: String) -> String {
    var allowed = CharacterSet.alphanumerics
    allowed.insert(charactersIn: "-._~")
    return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
}
