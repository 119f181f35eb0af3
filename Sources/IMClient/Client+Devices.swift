import Foundation
import IMCore

/// A push service the server can reach a device through (docs/PUSH.md).
public enum IMPushProvider: String, Sendable, Hashable, CaseIterable {
    /// Apple's push service: the token is the APNs device token (hex).
    case apns
    /// Firebase Cloud Messaging: the token is the FCM registration token.
    case fcm
    /// A browser's push subscription: the token is its `endpoint`, `keys` its `p256dh` and `auth`.
    case webPush = "webpush"
    /// A UnifiedPush distributor: the token is the endpoint it gave (keys when it encrypts).
    case unifiedPush = "unifiedpush"
    /// The operator's own gateway: the token is whatever the gateway knows the device by.
    case webhook
}

/// The keys of a Web Push subscription (`subscription.toJSON().keys`), base64url: the type the server's providers use.
public typealias IMPushSubscriptionKeys = PushSubscriptionKeys

/// Where the server reaches this client with a push notification while it is offline.
public struct IMPushDevice: Sendable, Hashable {
    public var provider: IMPushProvider
    public var token: String
    /// The device's id (LeanCloud's `deviceId`); registering the same id with a new token replaces the old one.
    public var deviceId: String?
    public var keys: IMPushSubscriptionKeys?
    /// When the server first stored it and when it was last registered (nil on a device not yet registered).
    public var createdAt: Date?
    public var updatedAt: Date?

    public init(provider: IMPushProvider, token: String, deviceId: String? = nil, keys: IMPushSubscriptionKeys? = nil) {
        self.provider = provider
        self.token = token
        self.deviceId = deviceId
        self.keys = keys
    }

    /// The `device` object of the `device` command.
    var jsonValue: JSONValue {
        var object: [String: JSONValue] = ["provider": .string(provider.rawValue), "token": .string(token)]
        if let deviceId { object["deviceId"] = .string(deviceId) }
        if let keys { object["keys"] = .object(["p256dh": .string(keys.p256dh), "auth": .string(keys.auth)]) }
        return .object(object)
    }

    /// A device of a reply; nil for one this SDK does not know.
    init?(json: JSONValue) {
        guard let object = json.objectValue, let name = object["provider"]?.stringValue,
            let provider = IMPushProvider(rawValue: name), let token = object["token"]?.stringValue
        else { return nil }
        var keys: IMPushSubscriptionKeys?
        if let k = object["keys"]?.objectValue, let p256dh = k["p256dh"]?.stringValue, let auth = k["auth"]?.stringValue {
            keys = IMPushSubscriptionKeys(p256dh: p256dh, auth: auth)
        }
        self.init(provider: provider, token: token, deviceId: object["deviceId"]?.stringValue, keys: keys)
        createdAt = object["createdAt"]?.intValue.map { Date(timeIntervalSince1970: Double($0) / 1000) }
        updatedAt = object["updatedAt"]?.intValue.map { Date(timeIntervalSince1970: Double($0) / 1000) }
    }
}

/// The server's codes for a device it refuses (`IMError.code`; `IMError.pushDeviceCode`).
public enum IMPushDeviceErrorCode: Int, Sendable, CaseIterable {
    /// A token or endpoint of the wrong shape, or an endpoint the server will not post to (a private address).
    case invalidToken = 4701
    /// Web Push keys missing or malformed (`p256dh` not a P-256 point, `auth` not 16 bytes).
    case invalidKeys = 4702
    /// A provider the server does not know.
    case unknownProvider = 4706
}

extension IMError {
    /// The push-device refusal this error is, if it is one.
    public var pushDeviceCode: IMPushDeviceErrorCode? { IMPushDeviceErrorCode(rawValue: code) }
}

/// Push devices (`device add` / `remove` / `query`; docs/PUSH.md, "From the Swift SDK"). A token can also be
/// registered at login: `IMClientOptions.deviceToken`.
extension IMClient {
    /// Registers `device` for this client (taking it from any other client that held it) and answers it as the
    /// server stored it. Throws `IMError` 4701/4702/4706 (`pushDeviceCode`) for a device the server refuses.
    @discardableResult
    public func registerDevice(_ device: IMPushDevice) async throws(IMError) -> IMPushDevice {
        var add = Command(cmd: .device, op: .add)
        add.device = device.jsonValue
        let reply = try await request(add)
        guard let stored = reply.device.flatMap(IMPushDevice.init(json:)) else {
            throw IMError(.unexpectedReply, "device added without a device")
        }
        return stored
    }

    /// This client's devices, most recently registered first.
    public func devices() async throws(IMError) -> [IMPushDevice] {
        let reply = try await request(Command(cmd: .device, op: .query))
        guard let list = reply.devices?.arrayValue else { throw IMError(.unexpectedReply, "device results without devices") }
        return list.compactMap(IMPushDevice.init(json:))
    }

    /// Removes this client's device with `token` (of `provider`, when given); answers how many were removed.
    @discardableResult
    public func removeDevice(token: String, provider: IMPushProvider? = nil) async throws(IMError) -> Int {
        guard !token.isEmpty else { throw IMError(.invalidArgument, "removeDevice needs a token") }
        var device: [String: JSONValue] = ["token": .string(token)]
        if let provider { device["provider"] = .string(provider.rawValue) }
        return try await remove(device)
    }

    /// Removes this client's devices registered with `deviceId`; answers how many were removed.
    @discardableResult
    public func removeDevice(deviceId: String) async throws(IMError) -> Int {
        guard !deviceId.isEmpty else { throw IMError(.invalidArgument, "removeDevice needs a device id") }
        return try await remove(["deviceId": .string(deviceId)])
    }

    private func remove(_ device: [String: JSONValue]) async throws(IMError) -> Int {
        var remove = Command(cmd: .device, op: .remove)
        remove.device = .object(device)
        let reply = try await request(remove)
        return reply.count ?? 0
    }
}
