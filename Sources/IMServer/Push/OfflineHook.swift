import Foundation
import IMCore

/// The `on_offline` exchange with the interceptor (docs/PUSH.md, "on_offline"; LeanCloud's
/// `_receiversOffline`): a hook request of kind `offline` names a stored message, its offline receivers and
/// the default notification; the `hook verdict` answer keeps, changes or drops each receiver's push.
enum OfflineHook {
    /// The request: the stored message (`cid`, `mid`, sender, `timestamp`, mentions, content), the receivers,
    /// the default notification and the `deadline` (ms) the server waits.
    static func request(for record: MessageRecord, receivers: [String], content: PushContent, deadlineMillis: Int) -> HookRequest {
        .offline(
            cid: record.cid, messageID: record.id, from: record.from, timestamp: record.t, mentionPids: record.mentionPids,
            mentionAll: record.mentionAll, content: InterceptorHub.content(record.data, binary: record.binary), receivers: receivers,
            notification: content.notificationFields, deadlineMillis: deadlineMillis)
    }

    /// What an answer does to the held pushes.
    enum Answer: Sendable, Equatable {
        /// `allow`: every receiver gets the default.
        case defaults
        /// `drop`: nobody gets a push for this message.
        case dropAll
        /// Receiver id → its push withheld or changed; `rest` for the receivers not named.
        case decide([String: HookVerdict.PushDecision], rest: HookVerdict.PushDecision?)
        /// `unhooked`: the interceptor has no `on_offline` hook; the defaults go, and it is not asked for a while.
        case unhooked

        /// What `verdict` does; nil when it does not answer an `offline` request (the defaults go, as for no
        /// answer).
        init?(_ verdict: HookVerdict) {
            switch verdict {
            case .allow: self = .defaults
            case .drop: self = .dropAll
            case .unhooked: self = .unhooked
            case .pushes(let decisions, let others): self = .decide(decisions, rest: others)
            case .modify, .declined: return nil
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

    /// This content with `fields` (checked by `HookVerdict.validNotificationChanges`) merged over it; title and body cut to
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
