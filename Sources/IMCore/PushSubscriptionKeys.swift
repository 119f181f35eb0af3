/// The keys of a browser's `PushSubscription` (`subscription.toJSON().keys`), base64url as the browser gives them.
/// In IMCore because the server's providers and the SDK (`IMPushSubscriptionKeys`) carry the same two keys.
public struct PushSubscriptionKeys: Sendable, Hashable, Codable {
    /// The user agent's P-256 public key, uncompressed (65 bytes).
    public var p256dh: String
    /// The 16-byte authentication secret.
    public var auth: String

    public init(p256dh: String, auth: String) {
        self.p256dh = p256dh
        self.auth = auth
    }
}
