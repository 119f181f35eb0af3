import Foundation
import HookRuntime

/// Everything one step made the bot do, as data for expectations.
struct StepOutcome {
    var verdict: String?
    var reason: String?
    var code: Int?
    var silent: Bool?
    /// The text `on_receive` saw (after a replace verdict or a `before_send` change).
    var text: String?
    /// The message passed moderation but the bot did not answer it (loop guard hop limit).
    var ignored = false
    var translation: String?
    var replies: [JSONValue] = []
    var transients: [JSONValue] = []
    var commands: [JSONValue] = []
    var actions: [JSONValue] = []
    /// The bot's own messages stopped by `before_send`, moderation or the reply rate limit.
    var dropped: [JSONValue] = []
    var logs: [JSONValue] = []
    var errors: [JSONValue] = []

    var json: [String: JSONValue] {
        var o: [String: JSONValue] = [
            "replies": .array(replies), "transients": .array(transients), "commands": .array(commands),
            "actions": .array(actions), "dropped": .array(dropped), "logs": .array(logs), "errors": .array(errors),
            "ignored": .bool(ignored),
        ]
        if let verdict { o["verdict"] = .string(verdict) }
        if let reason { o["reason"] = .string(reason) }
        if let code { o["code"] = .int(code) }
        if let silent { o["silent"] = .bool(silent) }
        if let text { o["text"] = .string(text) }
        if let translation { o["translation"] = .string(translation) }
        return o
    }

    /// Only what happened: no empty lists, no `ignored = false`.
    var summary: [String: JSONValue] {
        json.filter { key, v in v != .array([]) && !(key == "ignored" && v == .bool(false)) }
    }
}

/// Mirrors `BotHost` routing in process, on a `PluginEngine` with a manual clock: moderation and
/// `before_send` (interceptor mode) → translation → `on_receive`; cmd → `on_cmd`; transient →
/// `on_transient`; events → their hooks. Actions are recorded instead of sent; a kick or add is
/// followed by the members-left / members-joined event the server would send, and mutes are enforced
/// in interceptor mode.
final class SimulatedHost {
    let runtime: PluginEngine
    let clock: ManualClock
    let scenario: Scenario
    let translateTo: [String: String]
    let mode: Scenario.Mode
    private var mutedUntil: [String: Double] = [:]
    private var sentTimes: [String: [Double]] = [:]
    private var nextID = 0
    private var out = StepOutcome()
    private var pendingEvents: [HookEvent] = []

    static let hopKey = "hookbot.hop"

    init(runtime: PluginEngine, clock: ManualClock, scenario: Scenario, testCase: Scenario.TestCase) {
        self.runtime = runtime
        self.clock = clock
        self.scenario = scenario
        translateTo = testCase.translateTo
        mode = testCase.mode
    }

    /// Runs `body` and returns what it made the bot do, including follow-up membership events.
    func record(_ body: () throws -> Void) rethrows -> StepOutcome {
        out = StepOutcome()
        try body()
        var guardCount = 0
        while !pendingEvents.isEmpty && guardCount < 100 {
            let event = pendingEvents.removeFirst()
            finish(runtime.handle(event), hops: 1)
            guardCount += 1
        }
        return out
    }

    func newMessageID() -> String {
        nextID += 1
        return "m\(nextID)"
    }

    // MARK: Routing

    func message(_ m: HookMessage) {
        guard m.from != scenario.bot else { out.verdict = "ignored"; out.ignored = true; return }
        let hops = m.attrs[Self.hopKey]?.intValue ?? 0
        var delivered = m
        if mode == .interceptor {
            if let until = mutedUntil[muteKey(m.cid, m.from)], until > clock.now {
                out.verdict = "muted"
                out.reason = "muted until \(Int(until))"
                return
            }
            let moderation = runtime.moderate(m)
            finish(HookResult(actions: moderation.actions, errors: moderation.errors), hops: 1)
            if !apply(moderation, to: &delivered) { return }
            let screened = runtime.beforeSend(delivered)
            finish(HookResult(actions: screened.actions, errors: screened.errors), hops: 1)
            guard let approved = screened.message else {
                out.verdict = "drop"
                out.reason = screened.dropReason ?? "dropped by \(screened.droppedBy ?? "before_send")"
                return
            }
            if approved != delivered && out.verdict == "allow" { out.verdict = "modify" }
            delivered = approved
            guard hops < scenario.maxHops else { out.ignored = true; return }
        } else {
            guard hops < scenario.maxHops else { out.verdict = "ignored"; out.ignored = true; return }
            let moderation = runtime.moderate(m)
            finish(HookResult(actions: moderation.actions, errors: moderation.errors), hops: 1)
            if !apply(moderation, to: &delivered) { return }
        }
        out.text = delivered.text
        if let language = delivered.attrs["translate"]?.stringValue ?? translateTo[delivered.cid], let text = delivered.text {
            let t = runtime.translate(text: text, from: nil, to: language, messageID: delivered.id)
            finish(HookResult(actions: t.actions, errors: t.errors), hops: 1)
            if let translated = t.text {
                out.translation = translated
                delivered.attrs["translation"] = .object(["to": .string(language), "text": .string(translated)])
            }
        }
        finish(runtime.receive(delivered), hops: hops + 1)
    }

    /// Records the verdict; false when the message was blocked.
    private func apply(_ moderation: ModerationOutcome, to message: inout HookMessage) -> Bool {
        switch moderation.verdict {
        case .allow:
            out.verdict = "allow"
            return true
        case .replace(let text):
            out.verdict = "replace"
            message.text = text
            return true
        case .block(let reason, let code, let silent):
            out.verdict = "block"
            out.reason = reason
            out.code = code
            out.silent = silent
            return false
        }
    }

    func transient(_ m: HookMessage) {
        guard m.from != scenario.bot else { return }
        finish(runtime.transient(m), hops: 1)
    }

    func command(_ c: HookCommand) {
        guard c.from != scenario.bot else { return }
        finish(runtime.command(c), hops: 1)
    }

    func event(_ e: HookEvent) { finish(runtime.handle(e), hops: 1) }

    func advance(_ seconds: Double) {
        clock.advance(by: seconds)
        finish(runtime.fireDueTimers(now: clock.now), hops: 1)
    }

    func translate(text: String, from: String?, to: String, messageID: String?) {
        let t = runtime.translate(text: text, from: from, to: to, messageID: messageID)
        out.translation = t.text
        finish(HookResult(actions: t.actions, errors: t.errors), hops: 1)
    }

    func reload() {
        let report = runtime.reloadAll()
        for e in report.errors { out.errors.append(.string(e.description)) }
        finish(HookResult(actions: report.actions), hops: 1)
    }

    // MARK: Actions

    func finish(_ result: HookResult, hops: Int) {
        for e in result.errors { out.errors.append(.string(e.description)) }
        for action in result.actions { execute(action, hops: hops) }
    }

    private func execute(_ action: HookAction, hops: Int) {
        let plugin = JSONValue.string(action.plugin)
        switch action.kind {
        case .send(let cid, let message, let replyTo):
            send(message, to: cid, hops: hops, plugin: action.plugin, transient: false, replyTo: replyTo)
        case .sendTransient(let cid, let message):
            send(message, to: cid, hops: hops, plugin: action.plugin, transient: true, replyTo: nil)
        case .sendCommand(let cid, let command):
            guard allowSend(in: cid, what: .object(["cid": .string(cid), "action": .string(command.action)]), plugin: action.plugin) else { return }
            out.commands.append(.object(["cid": .string(cid), "action": .string(command.action), "ext": .object(command.ext), "plugin": plugin]))
        case .recall(let cid, let id):
            out.actions.append(.object(["kind": "recall", "cid": .string(cid), "id": .string(id), "plugin": plugin]))
        case .kick(let cid, let user, let reason):
            out.actions.append(Self.object(["kind": "kick", "cid": .string(cid), "user": .string(user), "plugin": plugin],
                                           optional: ["reason": reason.map(JSONValue.string)]))
            pendingEvents.append(.membersLeft(cid: cid, members: [user], by: scenario.bot))
        case .add(let cid, let user):
            out.actions.append(.object(["kind": "add", "cid": .string(cid), "user": .string(user), "plugin": plugin]))
            pendingEvents.append(.membersJoined(cid: cid, members: [user], by: scenario.bot))
        case .mute(let cid, let user, let seconds, let reason):
            let duration = seconds ?? 600
            mutedUntil[muteKey(cid, user)] = clock.now + Double(duration)
            out.actions.append(Self.object(["kind": "mute", "cid": .string(cid), "user": .string(user),
                                            "seconds": .int(duration), "plugin": plugin],
                                           optional: ["reason": reason.map(JSONValue.string)]))
        case .warn(let cid, let user, let reason):
            out.actions.append(Self.object(["kind": "warn", "cid": .string(cid), "user": .string(user), "plugin": plugin],
                                           optional: ["reason": reason.map(JSONValue.string)]))
            let text = "@\(user) " + (reason ?? "please follow the conversation rules")
            send(HookMessage(cid: cid, type: HookMessageType.text, text: text), to: cid, hops: hops, plugin: action.plugin,
                 transient: false, replyTo: nil, mentions: [user])
        case .updateAttribute(let cid, let key, let value):
            out.actions.append(.object(["kind": "update_attr", "cid": .string(cid), "key": .string(key), "value": value, "plugin": plugin]))
        case .log(let level, let message):
            out.logs.append(.string("\(level.rawValue): \(message)"))
        }
    }

    private func send(_ message: HookMessage, to cid: String, hops: Int, plugin: String, transient: Bool,
                      replyTo: String?, mentions: [String] = []) {
        var outgoing = message
        outgoing.cid = cid
        outgoing.from = scenario.bot
        let screened = runtime.beforeSend(outgoing)
        finish(HookResult(actions: screened.actions, errors: screened.errors), hops: hops + 1)
        guard var approved = screened.message else {
            out.dropped.append(Self.object(["text": .string(outgoing.text ?? ""), "by": .string(screened.droppedBy ?? "")],
                                           optional: ["reason": screened.dropReason.map(JSONValue.string)]))
            return
        }
        let moderation = runtime.moderate(approved)
        switch moderation.verdict {
        case .block(let reason, _, _):
            out.dropped.append(Self.object(["text": .string(approved.text ?? ""), "by": .string(moderation.decidedBy ?? "")],
                                           optional: ["reason": reason.map(JSONValue.string)]))
            return
        case .replace(let text): approved.text = text
        case .allow: break
        }
        guard allowSend(in: cid, what: .string(approved.text ?? ""), plugin: plugin) else { return }
        var o: [String: JSONValue] = ["cid": .string(cid), "plugin": .string(plugin)]
        if let text = approved.text { o["text"] = .string(text) }
        if approved.type != HookMessageType.text {
            o["type"] = runtime.typeName(of: approved.type).map(JSONValue.string) ?? .int(approved.type)
        }
        if !approved.attrs.isEmpty { o["attrs"] = .object(approved.attrs) }
        if let replyTo, !replyTo.isEmpty { o["reply_to"] = .string(replyTo) }
        if !mentions.isEmpty { o["mentions"] = .array(mentions.map(JSONValue.string)) }
        if transient { out.transients.append(.object(o)) } else { out.replies.append(.object(o)) }
    }

    private func allowSend(in cid: String, what: JSONValue, plugin: String) -> Bool {
        let now = clock.now
        var times = sentTimes[cid, default: []].filter { now - $0 < scenario.replyWindow }
        guard times.count < scenario.replyLimit else {
            sentTimes[cid] = times
            out.dropped.append(.object(["text": what, "by": "rate limit"]))
            return false
        }
        times.append(now)
        sentTimes[cid] = times
        return true
    }

    private func muteKey(_ cid: String, _ user: String) -> String { cid + "\u{0}" + user }

    static func object(_ base: [String: JSONValue], optional: [String: JSONValue?]) -> JSONValue {
        var o = base
        for (k, v) in optional { if let v { o[k] = v } }
        return .object(o)
    }
}
