@preconcurrency import Crypto
import Foundation
import IMCore
import NIOHTTP1

public struct WebhookSettings: Sendable {
    /// The operator's gateway; every notification is POSTed here.
    public var url: String
    /// The HMAC-SHA256 key of `X-Hookbot-Signature`.
    public var secret: String
    public var maxConcurrentRequests: Int = 32

    public init(url: String, secret: String) {
        self.url = url
        self.secret = secret
    }
}

/// A JSON POST to the operator's own gateway, for push services Hookbot has no client for:
/// `{"device": {"provider", "token"}, "notification": {...}, "sent_at": <ms>}`, signed with
/// `X-Hookbot-Signature: sha256=<hex HMAC-SHA256 of the body>`. The gateway answers like a push service:
/// 2xx sent, 404/410 the device is gone, 429/5xx later (Retry-After), other statuses refused.
public final class WebhookProvider: PushProvider {
    public let name: String
    let url: String
    let key: SymmetricKey
    let http: PushHTTPClient
    let limit: ConcurrencyLimit

    public init(name: String = "webhook", settings: WebhookSettings, http: PushHTTPClient) throws {
        _ = try checkedHTTPURL(settings.url, what: "webhook url", error: PushError.invalidSettings)
        guard settings.secret.utf8.count >= 16 else {
            throw PushError.invalidSettings("the webhook secret is at least 16 bytes")
        }
        self.name = name
        self.url = settings.url
        self.key = SymmetricKey(data: Array(settings.secret.utf8))
        self.http = http
        self.limit = ConcurrencyLimit(settings.maxConcurrentRequests)
    }

    /// `sha256=<hex>` of `body` under `secret`: what the gateway recomputes to check a request.
    public static func signature(of body: [UInt8], secret: String) -> String {
        let mac = HMAC<SHA256>.authenticationCode(for: body, using: SymmetricKey(data: Array(secret.utf8)))
        return "sha256=" + mac.map { String(format: "%02x", $0) }.joined()
    }

    public func send(_ notification: PushNotification, to device: PushDevice) async throws -> PushOutcome {
        try checkProvider(of: device)
        try PushDevice.checkWebhookToken(device.token)
        let body = Array(
            JSONValue.object([
                "device": .object(["provider": .string(device.provider), "token": .string(device.token)]),
                "notification": notification.jsonValue,
                "sent_at": .int(Int(Date().timeIntervalSince1970 * 1000)),
            ]).jsonString().utf8)
        let mac = HMAC<SHA256>.authenticationCode(for: body, using: key)
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "application/json")
        headers.add(name: "x-hookbot-signature", value: "sha256=" + mac.map { String(format: "%02x", $0) }.joined())
        let requestHeaders = headers
        return await limit.run {
            do {
                let response = try await http.send(method: .POST, url: url, headers: requestHeaders, body: body)
                return genericOutcome(response, deliveredID: nil, reason: WebPushSender.reason(response))
            } catch {
                return transportOutcome(error)
            }
        }
    }
}
