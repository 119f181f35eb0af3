import Foundation
import IMCore
import PushProviders
import Synchronization

/// A client's push device as stored (`push_devices`, docs/PUSH.md "Devices"): one row per
/// `(provider, token)`, so a token belongs to one client id at a time.
struct PushDeviceRecord: Sendable, Equatable {
    var clientID: String
    /// Where its notifications go: the provider, the token and a push subscription's keys.
    var device: PushDevice
    /// LeanCloud's `deviceId` (the app install), `""` when the client gave none.
    var deviceID: String
    var createdAt: Int64
    var updatedAt: Int64

    var provider: String { device.provider }
    var token: String { device.token }
    var keys: PushSubscriptionKeys? { device.keys }

    /// The keys as stored (`{"p256dh", "auth"}` JSON), nil without keys.
    var keysJSON: String? { keys?.stored }

    /// What `device query` answers for it.
    var jsonValue: JSONValue {
        var object: [String: JSONValue] = [
            "provider": .string(provider), "token": .string(token), "createdAt": .int(Int(createdAt)),
            "updatedAt": .int(Int(updatedAt)),
        ]
        if !deviceID.isEmpty { object["deviceId"] = .string(deviceID) }
        if let keys { object["keys"] = keys.jsonValue }
        return .object(object)
    }
}

/// What registering a device changed.
struct PushDeviceRegistration: Sendable, Equatable {
    /// The client that held the token before, when it was another.
    var movedFrom: String?
    /// The client's oldest devices dropped to stay within the cap.
    var dropped: [PushDevice]
}

/// The device registry of a store (SQLite `v13-push-devices`, PostgreSQL migration 10).
protocol PushDeviceStore: Sendable {
    /// Stores `record` for its client: a token another client held moves to this one; the same `deviceID`
    /// with a new token replaces its old token; beyond `cap` devices the least recently registered go.
    func registerPushDevice(_ record: PushDeviceRecord, cap: Int) async throws -> PushDeviceRegistration
    /// The client's devices, most recently registered first.
    func pushDevices(of clientID: String) async throws -> [PushDeviceRecord]
    /// The devices of all of `clientIDs` in one query per few hundred ids (a message's offline receivers).
    func pushDevices(ofEach clientIDs: [String]) async throws -> [PushDeviceRecord]
    /// Removes the client's devices with this token (any provider when `provider` is nil), and those of
    /// `deviceID` when given; answers how many went.
    func removePushDevices(of clientID: String, provider: String?, token: String?, deviceID: String?) async throws -> Int
}

enum PushDevices {
    /// Devices one client id may have; registering one more drops the least recently registered.
    static let maxPerClient = 10

    /// The provider of a LeanCloud `deviceToken` sent at login: 64 hex digits is what the iOS SDK sends
    /// (an APNs token); anything else is taken as an FCM registration token (the Android SDK's).
    static func provider(ofLoginToken token: String) -> String {
        token.count == 64 && token.allSatisfy(\.isHexDigit) ? "apns" : "fcm"
    }

    private static let lastStamp = Mutex<Int64>(0)

    /// Milliseconds, strictly increasing within the process, so that "least recently registered" is an
    /// order even for registrations in the same millisecond.
    static func stamp() -> Int64 {
        lastStamp.withLock { last in
            last = max(last + 1, Identifiers.nowMillis())
            return last
        }
    }

    /// The IM error for a device `PushProviders` refused.
    static func imError(_ error: PushError) -> IMError {
        let reason =
            switch error.code {
            case 4701: "INVALID_PUSH_TOKEN"
            case 4702: "INVALID_PUSH_KEYS"
            case 4706: "UNKNOWN_PUSH_PROVIDER"
            default: "INVALID_PUSH_DEVICE"
            }
        return IMError(code: error.code, reason: reason, detail: error.reason)
    }
}

extension PushSubscriptionKeys {
    /// `{"p256dh", "auth"}`: what `device query` answers and (as text) what `push_devices` and `push_queue` keep.
    var jsonValue: JSONValue { .object(["p256dh": .string(p256dh), "auth": .string(auth)]) }

    /// The keys as the stores keep them (`jsonValue` as text).
    var stored: String { jsonValue.jsonString() }

    /// The keys a store kept; nil for none or text that is not `{"p256dh", "auth"}`.
    init?(stored text: String?) {
        guard let object = text.flatMap(JSONValue.parse)?.objectValue, let p256dh = object["p256dh"]?.stringValue,
            let auth = object["auth"]?.stringValue
        else { return nil }
        self.init(p256dh: p256dh, auth: auth)
    }
}
