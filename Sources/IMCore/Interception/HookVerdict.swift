/// An interceptor's answer to a `HookRequest`.
///
/// Like the request, it crosses in-process attachments as a value and is encoded only on a connection
/// that carries commands, as a `hook verdict` command (HookWire.swift).
public enum HookVerdict: Sendable, Equatable {
    /// Go ahead (for an `offline` request: every receiver gets the default notification).
    case allow
    /// Refuse: the sender gets 4402 (a membership change 4305, an edit 4406) with `reason` and `appCode`,
    /// or, when `silent`, a normal-looking ack. For an `offline` request: nobody gets a push.
    case drop(reason: String? = nil, appCode: Int? = nil, silent: Bool = false)
    /// Replace the content (`body`, a typed message's JSON or plain text) and/or restrict the recipients;
    /// at least one of the two is given.
    case modify(body: String?, recipients: [String]?)
    /// The answer to an `offline` request that changes or withholds some receivers' pushes: receiver id →
    /// decision; `others` for the receivers not named (nil: they get the default).
    case pushes([String: PushDecision], others: PushDecision?)
    /// The interceptor could not review in time (overloaded): the server's failure policy decides.
    case declined(reason: String?)
    /// The interceptor has no `on_offline` hook: the defaults go, and the server does not ask it for a while.
    case unhooked

    /// What happens to one offline receiver's push.
    public enum PushDecision: Sendable, Equatable {
        /// No push.
        case drop
        /// Fields merged over the default notification (`title`, `body`, `sound`, `badge`, `collapse_id`,
        /// `data` merged key by key; `null` removes one). Only those fields, of those types
        /// (`validNotificationChanges`).
        case change([String: JSONValue])
    }

    /// The reason a drop or a declined review gives.
    public var reason: String? {
        switch self {
        case .drop(let reason, _, _), .declined(let reason): reason
        case .allow, .modify, .pushes, .unhooked: nil
        }
    }

    /// Whether `fields` holds only notification fields of the right types: strings for `title`, `body`,
    /// `sound`, `collapse_id`; a non-negative integer `badge`; an object `data`; `null` for any of them.
    public static func validNotificationChanges(_ fields: [String: JSONValue]) -> Bool {
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
