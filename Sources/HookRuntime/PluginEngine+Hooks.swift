import CLua
import Foundation
import IMCore
import Logging

/// The hook chains: moderation, membership review, `before_send`, translation, and the hooks every
/// plugin runs (`on_receive`, `on_cmd`, `on_transient`, conversation events).
extension PluginEngine {
    /// `moderation(msg, ctx)` chain: the first non-allow verdict wins. With `until`, no hook of the chain
    /// runs past that instant (each gets the smaller of its own deadline and the time left).
    public func moderate(_ message: HookMessage, until: ContinuousClock.Instant? = nil) -> ModerationOutcome {
        let locale = enterLocale(user: message.from, messageLocale: message.declaredLocale)
        defer { leaveLocale(locale) }
        return moderating(message, until: until)
    }

    /// The moderation chain in the current event's locale (`incoming` has entered it already).
    private func moderating(_ message: HookMessage, until: ContinuousClock.Instant?) -> ModerationOutcome {
        let argument = pushMessage(message, until: until)
        let run = dispatch(
            .moderation, cid: message.cid, messageID: message.id, until: until, push: { argument.push($0, message) },
            read: { plugin, L -> ModerationVerdict? in
                let (verdict, actions) = try readModeration(L, message: message)
                plugin.pending += actions.map { HookAction(plugin: plugin.name, kind: $0) }
                return verdict == .allow ? nil : verdict
            },
            onFailure: { plugin -> ModerationVerdict? in
                limits.moderationFailClosed
                    ? .block(reason: "moderation failed (\(plugin.name))", code: nil, silent: false) : nil
            })
        return ModerationOutcome(verdict: run.value ?? .allow, decidedBy: run.decidedBy, actions: run.actions, errors: run.errors)
    }

    private func readModeration(_ L: LuaRef, message: HookMessage) throws -> (ModerationVerdict, [HookAction.Kind]) {
        let t = lua_gettop(L)
        switch lua_type(L, t) {
        case LUA_TNIL, LUA_TNONE: return (.allow, [])
        case LUA_TSTRING:
            if luaString(L, t) == "allow" { return (.allow, []) }
            if luaString(L, t) == "block" { return (.block(reason: nil, code: nil, silent: false), []) }
            throw LuaConversionError("moderation must return nil, a verdict table or \"allow\"/\"block\"")
        case LUA_TTABLE: break
        default: throw LuaConversionError("moderation must return nil or a verdict table, got \(luaTypeName(L, t))")
        }
        let v = try luaToJSON(L, t, path: "verdict")
        guard case .object(let o) = v else { throw LuaConversionError("verdict must be a table with string keys") }
        let kind = o["verdict"]?.stringValue ?? "allow"
        var actions: [HookAction.Kind] = []
        if let a = o["actions"], a != .null {
            guard case .object(let acts) = a else { throw LuaConversionError("verdict.actions must be a table") }
            let reason = o["reason"]?.stringValue
            for (k, v) in acts.sorted(by: { $0.key < $1.key }) {
                switch k {
                case "warn":
                    actions.append(.warn(cid: message.cid, user: message.from, reason: v.stringValue ?? reason))
                case "mute":
                    actions.append(.mute(cid: message.cid, user: message.from, seconds: v.intValue, reason: reason))
                case "kick":
                    if v != .bool(false) { actions.append(.kick(cid: message.cid, user: message.from, reason: v.stringValue ?? reason)) }
                default: throw LuaConversionError("unknown moderation action '\(k)' (warn, mute, kick)")
                }
            }
        }
        switch kind {
        case "allow": return (.allow, actions)
        case "block":
            return (
                .block(
                    reason: o["reason"]?.stringValue, code: o["code"]?.intValue,
                    silent: o["silent"]?.boolValue ?? false), actions
            )
        case "replace":
            guard let text = o["text"]?.stringValue else { throw LuaConversionError("replace verdict needs text") }
            return (.replace(text: text), actions)
        default:
            throw LuaConversionError("unknown verdict '\(kind)' (allow, block, replace)")
        }
    }

    /// `membership(ev, ctx)` chain for a proposed membership change (`ev = {cid, by, members, action}` with
    /// action `join`, `invite`, `kick` or `quit`): `nil`/`ctx.allow()` lets it happen, `ctx.block(reason,
    /// {code = n})` refuses it; the first block wins. Moderation actions in the verdict are not used here.
    public func reviewMembership(
        cid: String, by: String, members: [String], action: String,
        until: ContinuousClock.Instant? = nil
    ) -> ModerationOutcome {
        let locale = enterLocale(user: by)
        defer { leaveLocale(locale) }
        let event: JSONValue = .object([
            "cid": .string(cid), "by": .string(by), "members": .array(members.map { .string($0) }), "action": .string(action),
        ])
        let run = dispatch(
            .membership, cid: cid, messageID: nil, until: until, push: pushJSON(event),
            read: { _, L -> ModerationVerdict? in
                let verdict = try readModeration(L, message: HookMessage(cid: cid, from: by)).0
                if case .block = verdict { return verdict }
                return nil
            })
        return ModerationOutcome(verdict: run.value ?? .allow, decidedBy: run.decidedBy, actions: run.actions, errors: run.errors)
    }

    /// `on_receive(msg, ctx)` on every plugin.
    public func receive(_ message: HookMessage) -> HookResult {
        let locale = enterLocale(user: message.from, messageLocale: message.declaredLocale)
        defer { leaveLocale(locale) }
        return onReceive(message)
    }

    /// A message for `on_receive` in the current event's locale: the answer to an open dialog (`ctx.ask`)
    /// goes to the waiting hook, a command to its `run`, anything else to every plugin's `on_receive`.
    private func onReceive(_ message: HookMessage) -> HookResult {
        let command = invocation(message)
        if let answered = answerDialog(message, command) { return answered }
        // `asking` without its closure: a closure over the message copied it (measured).
        let saved = env.askTarget
        env.askTarget = DialogTarget(cid: message.cid, member: message.from)
        defer { env.askTarget = saved }
        if let handled = runCommand(message, command) { return handled }
        let argument = pushMessage(message)
        return answeringUnknownCommand(
            message, command, runAll(.onReceive, cid: message.cid, messageID: message.id) { argument.push($0, message) })
    }

    /// Runs `hook` on every enabled plugin that has it, in order.
    func runAll(_ hook: HookName, cid: String?, messageID: String?, _ push: (LuaRef) -> Int32) -> HookResult {
        dispatch(hook, cid: cid, messageID: messageID, push: push, read: { _, _ -> Never? in nil }).result
    }

    /// The incoming pipeline: moderation, then (unless blocked) `on_receive`
    /// with the possibly replaced text, as one call, so a reload
    /// cannot split an event between two versions.
    public func incoming(_ message: HookMessage) -> IncomingOutcome {
        let locale = enterLocale(user: message.from, messageLocale: message.declaredLocale)
        defer { leaveLocale(locale) }
        let mod = moderating(message, until: nil)
        var delivered: HookMessage? = message
        switch mod.verdict {
        case .block: delivered = nil
        case .replace(let text): delivered?.text = text
        case .allow: break
        }
        var actions = mod.actions
        var errors = mod.errors
        if let d = delivered {
            let r = onReceive(d)
            actions += r.actions
            errors += r.errors
        }
        return IncomingOutcome(moderation: mod, delivered: delivered, actions: actions, errors: errors)
    }

    /// `before_send(msg, ctx)` chain: each plugin may return a modified
    /// message (seen by the next plugin) or `ctx.drop(reason)`.
    public func beforeSend(_ message: HookMessage, until: ContinuousClock.Instant? = nil) -> BeforeSendOutcome {
        let locale = enterLocale(user: nil)
        defer { leaveLocale(locale) }
        var current = message
        // Looked up before the chain, so the hooks' time is not spent on it (again only when a plugin
        // changes the file).
        let original = pushMessage(message, until: until)
        // A waterfall: each plugin gets the message as the previous one left it; a drop ends the chain.
        let run = dispatch(
            .beforeSend, cid: message.cid, messageID: message.id, until: until,
            push: { L in current == message ? original.push(L, message) : pushMessage(current, until: until).push(L, current) },
            read: { _, L -> String?? in
                let t = lua_gettop(L)
                switch lua_type(L, t) {
                case LUA_TNIL, LUA_TNONE: return nil
                case LUA_TTABLE: break
                default:
                    throw LuaConversionError(
                        "before_send must return nil, a message table or ctx.drop(reason), got \(luaTypeName(L, t))")
                }
                luaPushStatic(L, "verdict")
                let kind = lua_rawget(L, t)
                let verdict = kind == LUA_TSTRING ? luaString(L, -1) : nil
                lua_settop(L, t)
                guard kind == LUA_TNIL else {
                    switch verdict {
                    case "drop":
                        luaPushStatic(L, "reason")
                        _ = lua_rawget(L, t)
                        return .some(luaString(L, -1))
                    case "allow": return nil
                    default: throw LuaConversionError("before_send verdict must be \"drop\" or \"allow\"")
                    }
                }
                let changed = try luaToMessage(L, t, base: current)
                if let problem = env.registry.validate(changed) { throw LuaConversionError(problem) }
                current = changed
                return nil
            })
        guard let drop = run.value else {
            return BeforeSendOutcome(message: current, droppedBy: nil, dropReason: nil, actions: run.actions, errors: run.errors)
        }
        return BeforeSendOutcome(message: nil, droppedBy: run.decidedBy, dropReason: drop, actions: run.actions, errors: run.errors)
    }

    /// `translate(text, from, to, ctx)` provider chain: the first non-nil
    /// string wins. With a `messageID` the result is cached per (message id,
    /// target language) in the store and later calls do not run Lua.
    public func translate(text: String, from: String?, to: String, messageID: String? = nil) -> TranslationOutcome {
        if let messageID, let hit = try? store.cachedTranslation(messageID: messageID, lang: to) {
            return TranslationOutcome(text: hit.text, plugin: hit.plugin, cached: true, actions: [], errors: [])
        }
        let run = dispatch(
            .translate, cid: nil, messageID: messageID,
            push: { L in
                luaPush(L, text)
                if let from { luaPush(L, from) } else { lua_pushnil(L) }
                luaPush(L, to)
                return 3
            },
            read: { _, L -> String? in
                switch lua_type(L, -1) {
                case LUA_TNIL, LUA_TNONE: return nil
                case LUA_TSTRING: return luaString(L, -1)
                default: throw LuaConversionError("translate must return a string or nil, got \(luaTypeName(L, -1))")
                }
            })
        let out = TranslationOutcome(text: run.value, plugin: run.decidedBy, cached: false, actions: run.actions, errors: run.errors)
        if let messageID, let t = out.text {
            do {
                try store.cacheTranslation(messageID: messageID, lang: to, text: t, plugin: out.plugin, now: clock.now())
            } catch {
                logger.warning("translation cache write failed: \(error)")
            }
        }
        return out
    }

    /// `on_cmd(cmd, ctx)` on every plugin.
    public func command(_ cmd: HookCommand) -> HookResult {
        let locale = enterLocale(user: cmd.from)
        defer { leaveLocale(locale) }
        // A click on a card goes to on_action of the plugin that sent it, once checked (CardClicks.swift).
        if cmd.action == HookCards.clickAction { return cardClick(cmd) }
        return asking(DialogTarget(cid: cmd.cid, member: cmd.from)) { onCmd(cmd) }
    }

    private func onCmd(_ cmd: HookCommand) -> HookResult {
        runAll(.onCmd, cid: cmd.cid, messageID: nil) { L in
            lua_createtable(L, 0, 4)
            luaSetField(L, "action", cmd.action)
            if !luaPush(L, json: .object(cmd.ext)) { lua_createtable(L, 0, 0) }
            luaSetFieldTop(L, "ext")
            luaSetField(L, "cid", cmd.cid)
            luaSetField(L, "from", cmd.from)
            return 1
        }
    }

    /// `on_transient(msg, ctx)` on every plugin.
    public func transient(_ message: HookMessage) -> HookResult {
        let locale = enterLocale(user: message.from, messageLocale: message.declaredLocale)
        defer { leaveLocale(locale) }
        var m = message
        m.transient = true
        let argument = pushMessage(m)
        return runAll(.onTransient, cid: m.cid, messageID: m.id) { argument.push($0, m) }
    }

    /// Conversation events: `on_member_joined`, `on_member_left`, `on_invited`,
    /// `on_kicked`, `on_conversation_updated`, `on_recall`.
    public func handle(_ event: HookEvent) -> HookResult {
        let locale = enterLocale(user: event.localeUser)
        defer { leaveLocale(locale) }
        let table = event.table
        // on_member_joined may ask the member who joined (several joined: the hook names one).
        var target: DialogTarget?
        if case .membersJoined(let cid, let members, _, _) = event {
            target = DialogTarget(cid: cid, member: members.count == 1 ? members[0] : nil)
        }
        return asking(target) { runAll(HookName.forEvent(event), cid: event.cid, messageID: nil, pushJSON(table)) }
    }

    public func memberJoined(cid: String, members: [String], by: String? = nil) -> HookResult {
        handle(.membersJoined(cid: cid, members: members, by: by))
    }
    public func memberLeft(cid: String, members: [String], by: String? = nil) -> HookResult {
        handle(.membersLeft(cid: cid, members: members, by: by))
    }
    public func invited(cid: String, by: String? = nil) -> HookResult { handle(.invited(cid: cid, by: by)) }
    public func kicked(cid: String, by: String? = nil) -> HookResult { handle(.kicked(cid: cid, by: by)) }
    public func conversationUpdated(cid: String, attrs: [String: JSONValue], by: String? = nil) -> HookResult {
        handle(.conversationUpdated(cid: cid, attrs: attrs, by: by))
    }
    public func recalled(cid: String, messageID: String, by: String? = nil, timestamp: Int64 = 0) -> HookResult {
        handle(.recalled(cid: cid, messageID: messageID, by: by, timestamp: timestamp))
    }
    /// A message was edited: `on_edit` with its new version.
    public func edited(_ message: HookMessage, editedAt: Int64) -> HookResult {
        handle(.edited(message, editedAt: editedAt))
    }
}
