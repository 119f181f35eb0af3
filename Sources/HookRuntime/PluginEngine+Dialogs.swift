import CLua
import Foundation
import IMCore
import Logging
import LuaSandbox
import Synchronization

// Dialogs: `ctx.ask(prompt, opts)` suspends the hook's coroutine until the member answers in the same
// conversation (or the timeout, a cancel word, a reload). Hooks that may ask (`on_receive`, `on_cmd`,
// `on_member_joined`, commands) run as coroutines on threads of the plugin's state (lua_newthread, kept for
// reuse); each resumed step gets the instruction budget and the deadline afresh (hb_limited_resume), the
// memory cap is the state's. A coroutine cannot be saved, so each open dialog is recorded in the state
// store only to be ended cleanly, with the member told, after a restart.

/// How many dialogs one plugin may hold open at once.
let maxDialogsPerPlugin = 1000
/// The longest a dialog may wait for its answer (seconds).
let maxDialogSeconds = 86_400.0
/// Spare coroutine threads kept per plugin.
private let maxSpareThreads = 4
/// The state-store namespace of open dialogs (keys "plugin|cid|member").
let dialogStoreNamespace = "hookbot.dialogs"
let defaultCancelWords = ["cancel", "取消"]
/// How long past its deadline a dialog's record is kept for the next start to end (then it expires quietly).
let dialogRecordGrace = 3600.0

/// Who may be asked in the current call: the event's conversation and member (nil: the hook must say).
struct DialogTarget {
    var cid: String
    var member: String?
}

struct DialogKey: Hashable {
    var cid: String
    var member: String
}

/// A question a step asked (`ctx.ask`), read by the host once the step has yielded.
struct AskRequest {
    var key: DialogKey
    var prompt: String
    var seconds: Double
    var cancelWords: [String]
}

/// One suspended coroutine waiting for its answer.
struct OpenDialog {
    var key: DialogKey
    var ref: Int32
    var thread: OpaquePointer
    var prompt: String
    var deadline: Double
    var opened: Double
    var cancelWords: [String]
    /// Opening order within the process (the newest dialog gets an answer several plugins wait for).
    var sequence: Int
    /// The hook (or command) that opened it, for errors, and its usage slot.
    var hook: String
    var slot: Int
}

/// A plugin's dialogs and the coroutine running now.
struct DialogState {
    /// The hook being called (nil for commands, timers, HTTP callbacks).
    var hook: HookName?
    /// The coroutine of the current step, and who it may ask.
    var running: OpaquePointer?
    var target: DialogTarget?
    /// The current step may ask whom the event names (`PluginEnvironment.askTarget`, read only when it asks:
    /// copying it into `target` for every hook call was two retains and two releases per call).
    var targetIsEvent = false
    var request: AskRequest?
    /// Set while a dialog is resumed to end it: it may not ask again.
    var ending: String?
    var open: [DialogKey: OpenDialog] = [:]
    var spare: [(ref: Int32, thread: OpaquePointer)] = []
}

private let dialogCounter = Mutex(0)

extension HookName {
    /// Hooks that run as coroutines (when the engine says whom they may ask) and so may wait in `ctx.ask`.
    var mayAsk: Bool { self == .onReceive || self == .onCmd || self == .onMemberJoined }
    /// Hooks that decide about a message or change before it happens: they may never wait.
    var isReview: Bool {
        self == .moderation || self == .membership || self == .beforeSend || self == .translate || self == .onOffline
    }
}

// MARK: - ctx.ask

@inline(__always) private func askFail(_ L: LuaRef, _ msg: String) -> Int32 {
    luaPush(L, luaWhere(L) + msg)
    return -1
}

/// `hb.ask(prompt, opts)`: checks that this call may wait and records the question; the prelude's
/// `ctx.ask` then sends the prompt and yields.
let cbAsk: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    let state = plugin.dialogs
    if let reason = state.ending {
        return askFail(L, "ctx.ask: the dialog has ended (\(reason)); it cannot ask again")
    }
    guard let running = state.running, let target = state.target ?? (state.targetIsEvent ? plugin.env.askTarget : nil) else {
        if let hook = state.hook, hook.isReview {
            return askFail(
                L,
                "ctx.ask: not allowed while reviewing a message (\(hook.luaName)): a review cannot wait for an answer; ask from on_receive or a command"
            )
        }
        let place = state.hook.map { "in \($0.luaName)" } ?? "in a timer or HTTP callback"
        return askFail(L, "ctx.ask: only on_receive, on_cmd, on_member_joined and commands can wait for an answer (not \(place))")
    }
    guard running == L else {
        return askFail(L, "ctx.ask: call it from the hook itself, not from inside a coroutine of the plugin")
    }
    var member = target.member
    var seconds = 60.0
    var cancel = defaultCancelWords
    switch lua_type(L, 2) {
    case LUA_TNIL, LUA_TNONE: break
    case LUA_TTABLE:
        let opts: JSONValue
        do { opts = try luaToJSON(L, 2, path: "opts") } catch { return askFail(L, "ctx.ask: \(error)") }
        if case .array(let list) = opts, !list.isEmpty {
            return askFail(L, "ctx.ask: options must be named: {timeout = seconds, member = uid, cancel = {...}}")
        }
        for (key, value) in opts.objectValue ?? [:] {
            switch key {
            case "timeout":
                guard let n = value.doubleValue, n >= 1, n <= maxDialogSeconds else {
                    return askFail(L, "ctx.ask: timeout must be a number of seconds from 1 to \(Int(maxDialogSeconds))")
                }
                seconds = n
            case "member":
                guard let m = value.stringValue, !m.isEmpty, m.utf8.count <= 256 else {
                    return askFail(L, "ctx.ask: member must be a client id (a non-empty string)")
                }
                member = m
            case "cancel":
                switch value {
                case .bool(false): cancel = []
                case .string(let w): cancel = [w]
                case .array(let ws) where ws.count <= 10 && ws.allSatisfy({ $0.stringValue != nil }):
                    cancel = ws.compactMap(\.stringValue)
                default: return askFail(L, "ctx.ask: cancel must be a word, a list of at most 10 words, or false")
                }
                if cancel.contains(where: { $0.isEmpty || $0.utf8.count > 64 }) {
                    return askFail(L, "ctx.ask: a cancel word must have 1 to 64 bytes")
                }
            default:
                return askFail(L, "ctx.ask: unknown option '\(key)' (timeout, member, cancel)")
            }
        }
    default:
        return askFail(L, "ctx.ask: options must be a table {timeout = seconds, member = uid, cancel = {...}}")
    }
    guard let member else {
        return askFail(L, "ctx.ask: several members joined: say who answers with {member = uid}")
    }
    let key = DialogKey(cid: target.cid, member: member)
    if state.open[key] == nil, state.open.count >= maxDialogsPerPlugin {
        return askFail(L, "ctx.ask: the plugin has \(maxDialogsPerPlugin) open dialogs, the most it may hold")
    }
    var prompt = ""
    switch lua_type(L, 1) {
    case LUA_TNIL, LUA_TNONE: break
    case LUA_TSTRING: prompt = luaString(L, 1) ?? ""
    case LUA_TTABLE:
        luaPush(L, "text")
        if lua_rawget(L, 1) == LUA_TSTRING { prompt = luaString(L, -1) ?? "" }
        lua_settop(L, 2)
    default: return askFail(L, "ctx.ask: the prompt must be a text, a message table or nil")
    }
    plugin.dialogs.request = AskRequest(
        key: key, prompt: StoredText.cut(prompt, to: 200), seconds: seconds, cancelWords: cancel)
    return 0
}

// MARK: - coroutines

extension LuaPlugin {
    /// Runs a call as a coroutine: `push` pushes the function and its arguments on the thread and returns
    /// the count of the arguments. On return the call's first result is on top of `L` (nil when
    /// it waits in `ctx.ask`). It may ask whom the event names (`PluginEnvironment.askTarget`).
    func runAsCoroutine(
        hook: String, slot: Int, fallbackLine: Int?, timeout: Double, _ push: (LuaRef) -> Int32
    ) -> HookError? {
        guard let L else { return HookError(plugin: name, hook: hook, reason: .runtime("plugin is closed")) }
        let (ref, co) = takeThread(L)
        let n = push(co)
        return step(co, ref: ref, nargs: n, hook: hook, slot: slot, fallbackLine: fallbackLine, timeout: timeout, target: nil)
    }

    private func takeThread(_ L: LuaRef) -> (Int32, OpaquePointer) {
        if let spare = dialogs.spare.popLast() { return spare }
        let co = lua_newthread(L)!
        return (hb_ref(L), co)
    }

    private func drop(_ ref: Int32) {
        if let L { hb_unref(L, ref) }
    }

    /// One step of `co` (with `nargs` arguments on it): a call that returns leaves its first result on `L`
    /// and its thread for reuse; one that asked opens a dialog; a failure is returned. It may ask `target`,
    /// or without one whom the event names.
    private func step(
        _ co: OpaquePointer, ref: Int32, nargs: Int32, hook: String, slot: Int, fallbackLine: Int?, timeout: Double,
        target: DialogTarget?
    ) -> HookError? {
        guard let L else { return HookError(plugin: name, hook: hook, reason: .runtime("plugin is closed")) }
        dialogs.running = co
        if target == nil { dialogs.targetIsEvent = true } else { dialogs.target = target }
        dialogs.request = nil
        var results: Int32 = 0
        let status = hb_limited_resume(co, L, nargs, &results, timeout, Int64(env.limits.instructionBudget))
        dialogs.running = nil
        if target == nil { dialogs.targetIsEvent = false } else { dialogs.target = nil }
        let request = dialogs.request.take()
        usage?.record(slot: slot, nanos: limits.pointee.last_nanos, failed: status != LUA_OK && status != LUA_YIELD)
        switch status {
        case LUA_OK:
            if results > 0 {
                lua_pushvalue(co, lua_gettop(co) - results + 1)
                lua_xmove(co, L, 1)
            } else {
                lua_pushnil(L)
            }
            lua_settop(co, 0)
            if dialogs.spare.count < maxSpareThreads { dialogs.spare.append((ref, co)) } else { drop(ref) }
            return nil
        case LUA_YIELD:
            lua_settop(co, 0)
            guard let request else {
                drop(ref)
                luaPush(L, "coroutine.yield outside a coroutine of the plugin (ctx.ask is how a hook waits)")
                return makeError(status: LUA_ERRRUN, hook: hook, fallbackLine: fallbackLine)
            }
            open(request, ref: ref, thread: co, hook: hook, slot: slot)
            lua_pushnil(L)
            return nil
        default:
            lua_xmove(co, L, 1)
            drop(ref)
            return makeError(status: status, hook: hook, fallbackLine: fallbackLine)
        }
    }

    private func open(_ request: AskRequest, ref: Int32, thread: OpaquePointer, hook: String, slot: Int) {
        let now = env.clock.now()
        let sequence = dialogCounter.withLock { n in
            n += 1
            return n
        }
        let dialog = OpenDialog(
            key: request.key, ref: ref, thread: thread, prompt: request.prompt, deadline: now + request.seconds,
            opened: now, cancelWords: request.cancelWords, sequence: sequence, hook: hook, slot: slot)
        let replaced = dialogs.open.updateValue(dialog, forKey: request.key)
        do {
            try env.store.set(
                plugin: dialogStoreNamespace, key: dialogStoreKey(request.key),
                value: .object([
                    "plugin": .string(name), "cid": .string(request.key.cid), "member": .string(request.key.member),
                    "prompt": .string(request.prompt), "deadline": .double(dialog.deadline), "opened": .double(now),
                ]), ttl: request.seconds + dialogRecordGrace, now: now)
        } catch {
            env.logger.warning("dialog not recorded: \(error)", metadata: ["plugin": "\(name)"])
        }
        if let replaced {
            // The newer question replaces the older one; the older coroutine ends now.
            if let error = resume(replaced, answer: nil, reason: "replaced", keepRecord: true) {
                env.logger.error("\(error)", metadata: ["plugin": "\(name)"])
            }
        }
    }

    func dialogStoreKey(_ key: DialogKey) -> String { "\(name)|\(key.cid)|\(key.member)" }

    /// Resumes an open dialog with the answer (a message), or with nil and why it ended ("timeout",
    /// "cancelled", "replaced", "ended"). Its record is removed (unless the dialog was replaced by a newer
    /// one under the same key).
    func resume(_ dialog: OpenDialog, answer: HookMessage?, reason: String?, keepRecord: Bool = false) -> HookError? {
        guard let L else { return nil }
        if dialogs.open[dialog.key]?.ref == dialog.ref { dialogs.open[dialog.key] = nil }
        if !keepRecord {
            do {
                try env.store.delete(plugin: dialogStoreNamespace, key: dialogStoreKey(dialog.key))
            } catch {
                env.logger.warning("dialog record not removed: \(error)", metadata: ["plugin": "\(name)"])
            }
        }
        let top = lua_gettop(L)
        let co = dialog.thread
        let nargs: Int32
        if let answer {
            luaPush(co, message: answer, typeName: env.registry.name(of: answer.type))
            nargs = 1
        } else {
            lua_pushnil(co)
            luaPush(co, reason ?? "ended")
            nargs = 2
        }
        let saved = dialogs.ending
        if answer == nil, let reason, reason != "timeout", reason != "cancelled" { dialogs.ending = reason }
        defer { dialogs.ending = saved }
        let error = step(
            co, ref: dialog.ref, nargs: nargs, hook: dialog.hook, slot: dialog.slot, fallbackLine: nil,
            timeout: env.limits.deadline, target: DialogTarget(cid: dialog.key.cid, member: dialog.key.member))
        lua_settop(L, top)
        return error
    }
}

// MARK: - routing answers, timeouts, reloads and restarts

extension PluginEngine {
    /// Runs `body` with `target` as whom hooks that may wait can ask.
    func asking<T>(_ target: DialogTarget?, _ body: () -> T) -> T {
        let saved = env.askTarget
        env.askTarget = target
        defer { env.askTarget = saved }
        return body()
    }

    /// Whether any plugin waits for an answer.
    var hasOpenDialogs: Bool { ordered.contains { !$0.dialogs.open.isEmpty } }

    /// Open dialogs over all plugins.
    public var openDialogCount: Int { ordered.reduce(0) { $0 + $1.dialogs.open.count } }

    /// When `message` answers an open dialog, the dialog's step: the answer is consumed (no `on_receive`,
    /// no command). A message that invokes a declared command is not an answer (the command runs; the
    /// dialog keeps waiting). When several plugins wait for this member here, the newest dialog gets it.
    func answerDialog(_ message: HookMessage, _ invocation: ChatInvocation?) -> HookResult? {
        guard hasOpenDialogs, !message.from.isEmpty else { return nil }
        let key = DialogKey(cid: message.cid, member: message.from)
        var found: (plugin: LuaPlugin, dialog: OpenDialog)?
        for plugin in ordered where !plugin.disabled {
            if let d = plugin.dialogs.open[key], d.sequence > (found?.dialog.sequence ?? 0) { found = (plugin, d) }
        }
        guard let (plugin, dialog) = found else { return nil }
        if let (name, _) = invocation, name == "help" || env.commands.command(name) != nil { return nil }
        let cancelled = isCancelWord(message.text, dialog.cancelWords)
        return call(plugin, cid: message.cid, messageID: message.id) { plugin in
            plugin.resume(dialog, answer: cancelled ? nil : message, reason: cancelled ? "cancelled" : nil)
        }
    }

    private func isCancelWord(_ text: String?, _ words: [String]) -> Bool {
        guard let text, !words.isEmpty else { return false }
        var said = text.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        let prefix = env.commandSettings.prefix
        if !prefix.isEmpty, said.hasPrefix(prefix) { said = String(said.dropFirst(prefix.count)) }
        return words.contains { $0.lowercased() == said }
    }

    /// The earliest deadline of an open dialog (clock seconds).
    var nextDialogDue: Double? {
        guard hasOpenDialogs else { return nil }
        return ordered.filter { !$0.disabled }.flatMap { $0.dialogs.open.values.map(\.deadline) }.min()
    }

    /// Ends every dialog whose deadline has passed: its coroutine continues with `nil, "timeout"`.
    func expireDialogs(now: Double) -> HookResult {
        var result = HookResult()
        guard hasOpenDialogs else { return result }
        for plugin in ordered where !plugin.disabled {
            let due = plugin.dialogs.open.values.filter { $0.deadline <= now }.sorted { $0.sequence < $1.sequence }
            for dialog in due where plugin.dialogs.open[dialog.key]?.ref == dialog.ref {
                let r = call(plugin, cid: dialog.key.cid, messageID: nil) { plugin in
                    plugin.resume(dialog, answer: nil, reason: "timeout")
                }
                result.actions += r.actions
                result.errors += r.errors
            }
        }
        return result
    }

    /// Ends the open dialogs of a plugin version going away (reload, unload): each coroutine continues with
    /// `nil, "ended"` and may not ask again; when it says nothing in the dialog's conversation, the host
    /// tells the member.
    func endDialogs(of plugin: LuaPlugin, why: String) -> [HookAction] {
        var actions: [HookAction] = []
        for dialog in plugin.dialogs.open.values.sorted(by: { $0.sequence < $1.sequence }) {
            let r = call(plugin, cid: dialog.key.cid, messageID: nil) { plugin in
                plugin.resume(dialog, answer: nil, reason: "ended")
            }
            actions += r.actions
            let spoke = r.actions.contains { action in
                if case .send(let cid, _, _) = action.kind { return cid == dialog.key.cid }
                return false
            }
            if !spoke {
                actions.append(dialogEndedNotice(plugin: plugin.name, key: dialog.key, prompt: dialog.prompt, why: why))
            }
        }
        return actions
    }

    /// Dialogs recorded by an earlier process (its coroutines are gone): each record is removed and the
    /// member told. Runs when a plugin is first loaded in this process.
    func endInterruptedDialogs(of plugin: LuaPlugin) -> [HookAction] {
        let now = clock.now()
        guard let keys = try? store.keys(plugin: dialogStoreNamespace, prefix: "\(plugin.name)|", now: now), !keys.isEmpty
        else { return [] }
        var actions: [HookAction] = []
        for key in keys {
            let record = (try? store.get(plugin: dialogStoreNamespace, key: key, now: now))?.objectValue ?? [:]
            try? store.delete(plugin: dialogStoreNamespace, key: key)
            guard let cid = record["cid"]?.stringValue, let member = record["member"]?.stringValue else { continue }
            actions.append(
                dialogEndedNotice(
                    plugin: plugin.name, key: DialogKey(cid: cid, member: member),
                    prompt: record["prompt"]?.stringValue ?? "", why: "the bot restarted"))
        }
        if !actions.isEmpty {
            logger.notice("ended \(actions.count) dialogs left open by the last run", metadata: ["plugin": "\(plugin.name)"])
        }
        return actions
    }

    private func dialogEndedNotice(plugin: String, key: DialogKey, prompt: String, why: String) -> HookAction {
        let question = prompt.isEmpty ? "" : " “\(StoredText.cut(prompt, to: 80))”"
        let text = "\(key.member): \(plugin) stopped waiting for your answer\(question) (\(why)); please start again."
        return HookAction(
            plugin: plugin,
            kind: .send(cid: key.cid, message: HookMessage(cid: key.cid, type: MessageType.text.rawValue, text: text), replyTo: nil))
    }
}
