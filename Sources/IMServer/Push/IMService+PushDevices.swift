import Foundation
import IMCore
import PushProviders

/// Push devices (docs/PUSH.md, "Devices"): LeanCloud's `deviceToken` at login, `session close` removing it,
/// and Hookbot's `device add` / `remove` / `query`.
extension IMService {
    private var pushDeviceStore: any PushDeviceStore {
        get throws {
            guard let store = store as? any PushDeviceStore else {
                throw IMError(.internalError, "this store keeps no push devices")
            }
            return store
        }
    }

    /// Registers the `deviceToken` of `session open` for `clientID` (an APNs token when it is 64 hex digits,
    /// else FCM), taking it from any client that held it; answers the token, or nil when there is none or no
    /// provider takes it (the login goes on; the token is not stored).
    func registerLoginDevice(_ command: Command, clientID: String) async throws -> String? {
        guard let token = command.deviceToken, !token.isEmpty else { return nil }
        let device = PushDevice(provider: PushDevices.provider(ofLoginToken: token), token: token)
        do {
            try device.validate()
        } catch let error as PushError {
            logger.warning("login device token refused", metadata: ["client": "\(clientID)", "error": "\(error)"])
            return nil
        }
        let now = PushDevices.stamp()
        let record = PushDeviceRecord(
            clientID: clientID, device: device, deviceID: command.deviceId ?? "",
            createdAt: now, updatedAt: now)
        try await register(record)
        return token
    }

    /// `session close`: the SDKs' logout, after which this device gets no pushes for the client.
    func removeLoginDevice(of identity: Connection.Identity) async throws {
        guard identity.deviceToken != nil || identity.deviceID != nil else { return }
        _ = try await pushDeviceStore.removePushDevices(
            of: identity.clientID, provider: nil, token: identity.deviceToken, deviceID: identity.deviceID)
    }

    /// `device add` / `remove` / `query`.
    func handleDevice(_ command: Command, by identity: Connection.Identity, on connection: Connection) async throws {
        let clientID = identity.clientID
        switch command.op {
        case .add?:
            let (device, deviceID) = try Self.device(in: command, requireToken: true)
            do {
                try device.validate(endpointPolicy: configuration.push.endpointPolicy(for: device.provider))
            } catch let error as PushError {
                throw PushDevices.imError(error)
            }
            let now = PushDevices.stamp()
            let record = PushDeviceRecord(
                clientID: clientID, device: device, deviceID: deviceID,
                createdAt: now, updatedAt: now)
            try await register(record)
            var reply = Command(cmd: .device, op: .added, i: command.i)
            reply.device = record.jsonValue
            connection.send(reply)
        case .remove?:
            let (device, deviceID) = try Self.device(in: command, requireToken: false)
            guard !device.token.isEmpty || !deviceID.isEmpty else {
                throw IMError(.invalidField, "'device' needs a 'token' or a 'deviceId' to remove")
            }
            let removed = try await pushDeviceStore.removePushDevices(
                of: clientID, provider: device.provider.isEmpty ? nil : device.provider,
                token: device.token.isEmpty ? nil : device.token, deviceID: deviceID.isEmpty ? nil : deviceID)
            var reply = Command(cmd: .device, op: .removed, i: command.i)
            reply.count = removed
            connection.send(reply)
        case .query?:
            var reply = Command(cmd: .device, op: .results, i: command.i)
            reply.devices = .array(try await pushDeviceStore.pushDevices(of: clientID).map(\.jsonValue))
            connection.send(reply)
        default:
            throw IMError(.unknownCommand, "device commands are add, remove and query")
        }
    }

    private func register(_ record: PushDeviceRecord) async throws {
        let result = try await pushDeviceStore.registerPushDevice(record, cap: PushDevices.maxPerClient)
        if let previous = result.movedFrom {
            logger.info(
                "push device moved", metadata: ["provider": "\(record.provider)", "from": "\(previous)", "to": "\(record.clientID)"])
        }
        for dropped in result.dropped {
            logger.info("push device dropped (cap)", metadata: ["client": "\(record.clientID)", "provider": "\(dropped.provider)"])
        }
    }

    /// The `device` object of a request: `provider`, `token`, `deviceId`, `keys {p256dh, auth}`.
    private static func device(in command: Command, requireToken: Bool) throws -> (PushDevice, String) {
        guard let object = command.device?.objectValue else {
            throw IMError(.invalidField, "'device' must be an object with 'provider' and 'token'")
        }
        func string(_ key: String, max: Int) throws -> String {
            guard let value = object[key] else { return "" }
            guard let text = value.stringValue else { throw IMError(.invalidField, "'device.\(key)' must be a string") }
            guard text.utf8.count <= max else { throw IMError(.invalidField, "'device.\(key)' is over \(max) bytes") }
            return text
        }
        let provider = try string("provider", max: 32)
        let token = try string("token", max: 4096)
        let deviceID = try string("deviceId", max: 256)
        if requireToken, provider.isEmpty || token.isEmpty {
            throw IMError(.invalidField, "'device' needs 'provider' (\(PushDevice.providers.joined(separator: ", "))) and 'token'")
        }
        var keys: PushSubscriptionKeys?
        if let value = object["keys"], value != .null {
            guard let keyObject = value.objectValue, let p256dh = keyObject["p256dh"]?.stringValue,
                let auth = keyObject["auth"]?.stringValue
            else {
                throw PushDevices.imError(.invalidSubscriptionKeys("'device.keys' must be {\"p256dh\": string, \"auth\": string}"))
            }
            keys = PushSubscriptionKeys(p256dh: p256dh, auth: auth)
        }
        return (PushDevice(provider: provider, token: token, keys: keys), deviceID)
    }
}
