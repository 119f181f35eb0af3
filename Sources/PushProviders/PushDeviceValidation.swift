import Foundation

/// The checks a provider makes on a device before sending, made when the device is registered, so that a
/// client learns at once that its token, endpoint or keys cannot work (the same codes `send` throws).
extension PushDevice {
    /// The provider names a device may have.
    public static let providers = ["apns", "fcm", "webpush", "unifiedpush", "webhook"]

    /// Throws a `PushError` (4701 token or endpoint, 4702 keys, 4706 unknown provider) when `send` would
    /// refuse this device. `endpointPolicy` is the one the Web Push and UnifiedPush providers use.
    public func validate(endpointPolicy: PushEndpointPolicy = .publicHTTPS) throws {
        switch provider {
        case "apns": try Self.checkAPNsToken(token)
        case "fcm": try Self.checkFCMToken(token)
        case "webpush", "unifiedpush":
            _ = try endpointPolicy.check(token)
            if let keys {
                guard let p256dh = Base64URL.decode(keys.p256dh) else { throw PushError.invalidSubscriptionKeys("p256dh is not base64url") }
                guard let auth = Base64URL.decode(keys.auth) else { throw PushError.invalidSubscriptionKeys("auth is not base64url") }
                _ = try WebPushEncryption.publicKey(p256dh)
                guard auth.count == 16 else {
                    throw PushError.invalidSubscriptionKeys("the subscription's auth secret is \(auth.count) bytes, not 16")
                }
            } else if provider == "webpush" {
                throw PushError.invalidSubscriptionKeys("a Web Push subscription needs its p256dh and auth keys")
            }
        case "webhook": try Self.checkWebhookToken(token)
        default:
            throw PushError.wrongProvider("unknown push provider '\(provider)' (one of \(Self.providers.joined(separator: ", ")))")
        }
    }

    // The token shapes, one place for registration (above) and each provider's `send`.

    static func checkAPNsToken(_ token: String) throws {
        guard (64...200).contains(token.count), token.count % 2 == 0, token.allSatisfy(\.isHexDigit) else {
            throw PushError.invalidDeviceToken("an APNs device token is 64 to 200 hex digits, got \(token.count) characters")
        }
    }

    static func checkFCMToken(_ token: String) throws {
        guard (1...4096).contains(token.utf8.count),
            token.unicodeScalars.allSatisfy({
                $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "-_:.".unicodeScalars.contains($0))
            })
        else {
            throw PushError.invalidDeviceToken("an FCM registration token is 1 to 4096 letters, digits, '-', '_', ':' or '.'")
        }
    }

    static func checkWebhookToken(_ token: String) throws {
        guard (1...4096).contains(token.utf8.count) else {
            throw PushError.invalidDeviceToken("a webhook device token is 1 to 4096 bytes, got \(token.utf8.count)")
        }
    }
}
