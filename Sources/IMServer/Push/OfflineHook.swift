import Foundation
import IMCore

/// The `on_offline` exchange with the interceptor (docs/PUSH.md, "on_offline"; LeanCloud's
/// `_receiversOffline`): a hook request of kind `offline` names a stored message, its offline receivers and
/// the default notification; the `hook verdict` answer keeps, changes or drops each receiver's push.
enum OfflineHook {
    static let kind = "offline"

    /// The request: `cid`, `mid`, `fromPeerId`, `timestamp`, `mentionPids`/`mentionAll`, the content (`msg` or
    /// `binaryMsg`), the receivers
    /// (`m`), and in `attr` the default `notification` and the `deadline` (ms) the server waits.
    static func request(for record: MessageRecord, receivers: [String], content: PushContent, deadlineMillis: Int) -> Command {
        var request = Command(cmd: .hook, op: .request)
        request.kind = kind
        request.cid = record.cid
        request.mid = record.id
        request.fromPeerId = record.from
        request.timestamp = record.t
        request.mentionPids = record.mentionPids
        request.mentionAll = record.mentionAll ? true : nil
        if record.binary { request.binaryMsg = record.data } else { request.msg = record.data }
        request.m = receivers
        request.attr = .object(["notification": .object(content.notificationFields), "deadline": .int(deadlineMillis)])
        return request
    }

    /// What happens to one receiver's push.
    enum Decision: Sendable, Equatable {
        case drop
        /// Fields merged over the default notification (`title`, `body`, `sound`, `badge`, `collapse_id`; `null`
        /// removes one), `data` merged key by key.
        case change([String: JSONValue])
    }

    /// An answer, read from a `hook verdict` command.
    enum Answer: Sendable, Equatable {
        /// `allow`: every receiver gets the default.
        case defaults
        /// `drop`: nobody gets a push for this message.
        case dropAll
        /// `modify` with `msg` a JSON object: receiver id → a notification table or `false`; `"*"` for the rest.
        case decide([String: Decision], rest: Decision?)
        /// `unhooked`: the interceptor has no `on_offline` hook; the defaults go, and it is not asked for a while.
        case unhooked
    }

    /// The answer `command` gives, or nil when it is not one (the defaults go, as for no answer).
    static func answer(_ command: Command) -> Answer? {
        switch command.verdict {
        case "allow": return .defaults
        case "drop": return .dropAll
        case "unhooked": return .unhooked
        case "modify":
            guard let text = command.msg, let object = JSONValue.parse(text)?.objectValue else { return nil }
            var decisions: [String: Decision] = [:]
            var rest: Decision?
            for (receiver, value) in object {
                let decision: Decision
                switch value {
                case .bool(false): decision = .drop
                case .object(let fields):
                    guard valid(fields) else { return nil }
                    decision = .change(fields)
                default: return nil
                }
                if receiver == "*" { rest = decision } else { decisions[receiver] = decision }
            }
            return .decide(decisions, rest: rest)
        default: return nil
        }
    }

    /// Whether a notification table has only known fields of the right types.
    static func valid(_ fields: [String: JSONValue]) -> Bool {
        fields.allSatisfy { key, value in
            switch (key, value) {
            case (_, .null): return ["title", "body", "sound", "badge", "collapse_id", "data"].contains(key)
            case ("title", .string), ("body", .string), ("sound", .string), ("collapse_id", .string): return true
            case ("badge", _): return value.intValue.map { $0 >= 0 } ?? false
            case ("data", .object): return true
            default: return false
            }
        }
    }
}

extension PushContent {
    /// The notification as the hook sees it: `title`, `body`, `sound`, `badge` (absent: the receiver's
    /// unread count when it is sent), `data`, `collapse_id`.
    var notificationFields: [String: JSONValue] {
        var object: [String: JSONValue] = ["data": .object(data)]
        if let title { object["title"] = .string(title) }
        if let body { object["body"] = .string(body) }
        if let sound { object["sound"] = .string(sound) }
        if let badge { object["badge"] = .int(badge) }
        if let collapseID { object["collapse_id"] = .string(collapseID) }
        return object
    }

    /// This content with `fields` (checked by `OfflineHook.valid`) merged over it; title and body cut to
    /// `maxCharacters` like a template's.
    func merging(_ fields: [String: JSONValue], maxCharacters: Int) -> PushContent {
        var content = self
        for (key, value) in fields {
            switch key {
            case "title": content.title = value.stringValue.map { Self.truncated($0, to: maxCharacters) }
            case "body": content.body = value.stringValue.map { Self.truncated($0, to: maxCharacters) }
            case "sound": content.sound = value.stringValue
            case "badge": content.badge = value.intValue
            case "collapse_id": content.collapseID = value.stringValue
            case "data":
                if case .object(let entries) = value {
                    for (name, entry) in entries { content.data[name] = entry == .null ? nil : entry }
                } else {
                    content.data = [:]
                }
            default: continue
            }
        }
        return content
    }
}
