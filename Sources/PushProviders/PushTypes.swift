import Foundation
import IMCore

/// What one device is shown: the same value goes to every provider, each maps it onto its own format.
public struct PushNotification: Sendable, Hashable {
    /// The alert's title and text. A notification with neither is a background (silent) push: APNs
    /// `content-available`, an FCM data-only message, a Web Push payload without `title`/`body`.
    public var title: String?
    public var body: String?
    /// The number on the app's icon (APNs `badge`, FCM's `notification_count`).
    public var badge: Int?
    /// A sound name (`"default"` for the platform's own).
    public var sound: String?
    /// The app's own payload. FCM carries strings only: other values go as their JSON text.
    public var data: [String: JSONValue]
    /// Notifications with the same collapse id replace each other on the device (APNs `apns-collapse-id`,
    /// FCM `collapse_key`, Web Push `Topic`).
    public var collapseID: String?
    public var priority: PushPriority
    /// How long the provider keeps the notification for a device that is off, in seconds; `nil` is the
    /// provider's default, 0 is "now or never".
    public var ttl: Int?

    public init(
        title: String? = nil, body: String? = nil, badge: Int? = nil, sound: String? = nil, data: [String: JSONValue] = [:],
        collapseID: String? = nil, priority: PushPriority = .high, ttl: Int? = nil
    ) {
        self.title = title
        self.body = body
        self.badge = badge
        self.sound = sound
        self.data = data
        self.collapseID = collapseID
        self.priority = priority
        self.ttl = ttl
    }

    /// True when there is nothing to show: the push only wakes the app.
    public var isBackground: Bool { title == nil && body == nil }

    /// The provider-neutral JSON form (what Web Push, UnifiedPush and the webhook carry): only the fields that
    /// are set, `collapse_id` and `ttl` in snake case.
    public var jsonValue: JSONValue {
        var object: [String: JSONValue] = ["priority": .string(priority.rawValue)]
        if let title { object["title"] = .string(title) }
        if let body { object["body"] = .string(body) }
        if let badge { object["badge"] = .int(badge) }
        if let sound { object["sound"] = .string(sound) }
        if !data.isEmpty { object["data"] = .object(data) }
        if let collapseID { object["collapse_id"] = .string(collapseID) }
        if let ttl { object["ttl"] = .int(ttl) }
        return .object(object)
    }
}

public enum PushPriority: String, Sendable, Hashable {
    /// Shown at once, wakes the device (APNs 10, FCM HIGH, Web Push `Urgency: high`).
    case high
    /// May be delayed to save power (APNs 5, FCM NORMAL, Web Push `Urgency: normal`).
    case normal
}

/// Where a notification goes: a provider's name and what that provider needs to reach one app install.
public struct PushDevice: Sendable, Hashable, Codable {
    /// `apns`, `fcm`, `webpush`, `unifiedpush` or `webhook` (the name of a configured provider).
    public var provider: String
    /// The APNs device token (hex), the FCM registration token, the Web Push / UnifiedPush endpoint URL, or
    /// for the webhook whatever the client registered (passed through).
    public var token: String
    /// A push subscription's keys (Web Push; UnifiedPush when the distributor encrypts).
    public var keys: PushSubscriptionKeys?

    public init(provider: String, token: String, keys: PushSubscriptionKeys? = nil) {
        self.provider = provider
        self.token = token
        self.keys = keys
    }
}

/// What a provider answered for one device.
public enum PushOutcome: Sendable, Hashable {
    /// Accepted by the provider; `id` is its id for the notification when it gives one (APNs `apns-id`, the
    /// FCM message name, the Web Push message's `Location`).
    case delivered(id: String?)
    /// The token or subscription is dead for good: remove the device.
    case deviceGone(reason: String)
    /// Try again later: the provider throttled or failed, or could not be reached. `after` is the provider's
    /// Retry-After when it sent one.
    case retryLater(after: Duration?, reason: String)
    /// The provider refused this request (bad request, bad credentials, payload too large): log it, do not retry.
    case rejected(status: Int, reason: String)
}

/// One push service. `send` answers an outcome for everything the provider or the network says; it throws a
/// `PushError` only for input that is refused before anything is sent (a token of the wrong shape, bad
/// subscription keys, a payload above the provider's limit).
public protocol PushProvider: Sendable {
    /// The provider's name, the `provider` of the devices it serves.
    var name: String { get }
    func send(_ notification: PushNotification, to device: PushDevice) async throws -> PushOutcome
}

/// Input refused before sending, with a numeric code and reason (4701-4709).
public struct PushError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: Int
    public var reason: String

    public init(code: Int, reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String { "\(code) \(reason)" }

    /// A device token or endpoint of the wrong shape for its provider.
    public static func invalidDeviceToken(_ reason: String) -> PushError { PushError(code: 4701, reason: reason) }
    /// Web Push subscription keys missing or not a P-256 key and 16-byte secret.
    public static func invalidSubscriptionKeys(_ reason: String) -> PushError { PushError(code: 4702, reason: reason) }
    /// The payload is larger than the provider takes.
    public static func payloadTooLarge(_ reason: String) -> PushError { PushError(code: 4703, reason: reason) }
    /// A signing key or service account that cannot be read.
    public static func invalidCredentials(_ reason: String) -> PushError { PushError(code: 4704, reason: reason) }
    /// Settings that cannot work (an endpoint that is not an http(s) URL, a limit below 1).
    public static func invalidSettings(_ reason: String) -> PushError { PushError(code: 4705, reason: reason) }
    /// A device of another provider handed to this one.
    public static func wrongProvider(_ reason: String) -> PushError { PushError(code: 4706, reason: reason) }
    /// A notification this provider cannot carry (an over-long collapse id, a reserved FCM data key).
    public static func invalidNotification(_ reason: String) -> PushError { PushError(code: 4707, reason: reason) }
}

extension PushProvider {
    /// Throws 4706 unless `device` is for this provider.
    func checkProvider(of device: PushDevice) throws {
        guard device.provider == name else {
            throw PushError.wrongProvider("device of provider '\(device.provider)' sent to provider '\(name)'")
        }
    }
}
