import Foundation
import HookRuntime
import IMCore

/// The `offline` step of a scenario (docs/PLUGINS.md, "on_offline"): `message` (as a message step),
/// `receivers` (ids, or `{ id = …, mentioned = true }`), optional `mentions` (ids the message mentions, or
/// `true` for everyone) and `notification` (merged over the default the server would make: title the
/// conversation, body `"{from}: {text}"`, sound `default`, data `{cid, id, from}`).
enum OfflineStep {
    static func receivers(_ message: HookMessage, _ step: [String: JSONValue]) throws -> [OfflineReceiver] {
        var notification: [String: JSONValue] = [
            "title": .string(message.cid), "body": .string("\(message.from): \(message.text ?? "")"), "sound": "default",
            "data": .object(["cid": .string(message.cid), "id": .string(message.id), "from": .string(message.from)]),
        ]
        if let given = step["notification"] {
            guard let fields = Scenario.objectOrEmpty(given) else { throw ScenarioError("offline.notification must be a table") }
            notification.merge(fields) { $1 }
        }
        let everyone = step["mentions"] == .bool(true)
        let mentions = Set((step["mentions"]?.arrayValue ?? []).compactMap(\.stringValue))
        guard let list = step["receivers"]?.arrayValue, !list.isEmpty else {
            throw ScenarioError("offline.receivers must be a non-empty list of ids or { id = …, mentioned = … }")
        }
        let receivers = try list.map { item -> OfflineReceiver in
            if let id = item.stringValue {
                return OfflineReceiver(id: id, mentioned: everyone || mentions.contains(id), notification: notification)
            }
            guard let o = Scenario.objectOrEmpty(item), let id = o["id"]?.stringValue else {
                throw ScenarioError("offline.receivers: each is an id or { id = …, mentioned = … }")
            }
            try Scenario.checkKeys(o, allowed: ["id", "mentioned"], at: "offline.receivers")
            return OfflineReceiver(
                id: id, mentioned: o["mentioned"]?.boolValue ?? (everyone || mentions.contains(id)), notification: notification)
        }
        return receivers
    }

    /// What each receiver gets: its notification, or false.
    static func pushes(_ outcome: OfflineOutcome) -> JSONValue {
        .object(
            Dictionary(
                outcome.receivers.map { ($0.id, $0.notification.map(JSONValue.object) ?? .bool(false)) }, uniquingKeysWith: { $1 }))
    }
}
