/// The one place where hook requests and verdicts become `hook request` / `hook verdict` commands and back:
/// used by the server (WebSocket interceptors, cluster relays), the bot host (over a WebSocket) and the SDK
/// (a command-based `interceptionHandler`). In-process attachments pass the values without it.
extension HookRequest {
    /// The request a `hook request` command carries (its `id` is the caller's to read); nil when the command
    /// lacks a field its kind needs, or has an unknown kind or membership action.
    public init?(command: Command) {
        guard let kind = command.kind.flatMap(Kind.init(rawValue:)), let cid = command.cid else { return nil }
        let content = command.msg.map(Content.text) ?? command.binaryMsg.map { Content.binary(base64: $0) }
        switch kind {
        case .message:
            guard let from = command.fromPeerId, let content else { return nil }
            self = .message(cid: cid, from: from, content: content, priority: command.priority, mentionPids: command.mentionPids)
        case .edit:
            guard let messageID = command.mid, let from = command.fromPeerId, let content else { return nil }
            self = .edit(cid: cid, messageID: messageID, from: from, content: content, mentionPids: command.mentionPids)
        case .membership:
            guard let actor = command.initBy, let action = command.action.flatMap(MembershipAction.init(rawValue:)) else {
                return nil
            }
            self = .membership(cid: cid, actor: actor, members: command.m ?? [], action: action)
        case .offline:
            guard let from = command.fromPeerId else { return nil }
            self = .offline(
                cid: cid, messageID: command.mid ?? "", from: from, timestamp: command.timestamp, mentionPids: command.mentionPids,
                mentionAll: command.mentionAll == true, content: content ?? .text(""), receivers: command.m ?? [],
                notification: command.attr?["notification"]?.objectValue ?? [:], deadlineMillis: command.attr?["deadline"]?.intValue)
        }
    }

    /// The `hook request` command for this request, with `id` (what the verdict must name).
    public func command(id: String?) -> Command {
        var command = Command(cmd: .hook, op: .request)
        command.id = id
        command.kind = kind.rawValue
        command.cid = cid
        switch self {
        case .message(_, let from, let content, let priority, let mentionPids):
            command.fromPeerId = from
            command.setContent(content)
            command.priority = priority
            command.mentionPids = mentionPids
        case .edit(_, let messageID, let from, let content, let mentionPids):
            command.mid = messageID
            command.fromPeerId = from
            command.setContent(content)
            command.mentionPids = mentionPids
        case .membership(_, let actor, let members, let action):
            command.initBy = actor
            command.m = members
            command.action = action.rawValue
        case .offline(
            _, let messageID, let from, let timestamp, let mentionPids, let mentionAll, let content, let receivers, let notification,
            let deadline):
            command.mid = messageID
            command.fromPeerId = from
            command.timestamp = timestamp
            command.mentionPids = mentionPids
            command.mentionAll = mentionAll ? true : nil
            command.setContent(content)
            command.m = receivers
            var attr: [String: JSONValue] = ["notification": .object(notification)]
            if let deadline { attr["deadline"] = .int(deadline) }
            command.attr = .object(attr)
        }
        return command
    }
}

extension HookVerdict {
    /// The verdict a `hook verdict` command gives in answer to a request of `kind`; nil when it is not one
    /// (an unknown `verdict`, a `modify` with nothing to change, an `offline` `modify` whose `msg` is not a
    /// JSON object of receiver → notification changes or `false`).
    public init?(command: Command, answering kind: HookRequest.Kind) {
        switch command.verdict {
        case "allow":
            self = .allow
        case "drop":
            self = .drop(reason: command.reason ?? command.detail, appCode: command.appCode, silent: command.silent == true)
        case "modify" where kind == .offline:
            guard let text = command.msg, let object = JSONValue.parse(text)?.objectValue else { return nil }
            var decisions: [String: PushDecision] = [:]
            var others: PushDecision?
            for (receiver, value) in object {
                let decision: PushDecision
                switch value {
                case .bool(false): decision = .drop
                case .object(let fields) where Self.validNotificationChanges(fields): decision = .change(fields)
                default: return nil
                }
                if receiver == "*" { others = decision } else { decisions[receiver] = decision }
            }
            self = .pushes(decisions, others: others)
        case "modify":
            guard command.msg != nil || command.m != nil else { return nil }
            self = .modify(body: command.msg, recipients: command.m)
        case "none":
            self = .declined(reason: command.reason)
        case "unhooked":
            self = .unhooked
        default:
            return nil
        }
    }

    /// The verdict's word on the wire (the `verdict` field of a `hook verdict` command).
    public var name: String {
        switch self {
        case .allow: "allow"
        case .drop: "drop"
        case .modify, .pushes: "modify"
        case .declined: "none"
        case .unhooked: "unhooked"
        }
    }

    /// The `hook verdict` command for this verdict, answering the request `id`.
    public func command(id: String?) -> Command {
        var command = Command(cmd: .hook, op: .verdict)
        command.id = id
        command.verdict = name
        switch self {
        case .allow, .unhooked:
            break
        case .drop(let reason, let appCode, let silent):
            command.reason = reason
            command.appCode = appCode
            command.silent = silent ? true : nil
        case .modify(let body, let recipients):
            command.msg = body
            command.m = recipients
        case .pushes(let decisions, let others):
            var object: [String: JSONValue] = [:]
            for (receiver, decision) in decisions { object[receiver] = decision.json }
            if let others { object["*"] = others.json }
            command.msg = JSONValue.object(object).jsonString()
        case .declined(let reason):
            command.reason = reason
        }
        return command
    }
}

extension HookVerdict.PushDecision {
    fileprivate var json: JSONValue {
        switch self {
        case .drop: .bool(false)
        case .change(let fields): .object(fields)
        }
    }
}

extension Command {
    fileprivate mutating func setContent(_ content: HookRequest.Content) {
        switch content {
        case .text(let text): msg = text
        case .binary(let base64): binaryMsg = base64
        }
    }
}
