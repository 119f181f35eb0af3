import CLua
import Foundation
import IMCore
import Logging

/// What a message's table needs besides the message: its type's name and its stored file. A value, so that
/// passing `{ argument.push($0, message) }` to `dispatch` allocates nothing (a closure returned from a function
/// would be a heap box per call). It does not hold the message: a copy of `HookMessage` (about 280 bytes, a
/// retain of each of its strings) per event was a measured share of a trivial call; the closure borrows it.
struct MessageArgument {
    var typeName: String?
    var file: FileLookup?

    func push(_ L: LuaRef, _ message: HookMessage) -> Int32 {
        luaPush(L, message: message, typeName: typeName, file: file)
        return 1
    }
}

/// What a chain of hook calls produced: the value that ended it (if any), the plugin that gave it, and
/// the actions and errors of every plugin called.
struct Dispatched<Value> {
    var value: Value?
    var decidedBy: String?
    var actions: [HookAction] = []
    var errors: [HookError] = []

    var result: HookResult { HookResult(actions: actions, errors: errors) }
}

/// How hooks are called: one dispatch primitive (Prosody's `fire_event`: plugins in priority order, the
/// first non-nil value wins), and the accounting every call shares.
extension PluginEngine {
    /// Runs `hook` on every enabled plugin that has it, in priority order. After each call, `read` turns
    /// what the plugin returned (on top of its Lua stack) into a value; the first non-nil value ends the
    /// chain. A `read` that throws means the plugin returned something invalid, a failure like any other;
    /// after a failure `onFailure` may end the chain too (moderation that fails closed).
    ///
    /// The five chains are this primitive used five ways: hooks every plugin runs read nothing;
    /// moderation and membership reviews read a verdict and stop at the first that is not "allow";
    /// translation stops at the first string; `before_send` is a waterfall whose `push` and `read` share
    /// the current message. With `until`, no hook runs past that instant.
    func dispatch<Value>(
        _ hook: HookName, cid: String?, messageID: String?, until: ContinuousClock.Instant? = nil,
        push: (LuaRef) -> Int32,
        read: (LuaPlugin, LuaRef) throws -> Value? = { (_: LuaPlugin, _: LuaRef) -> Value? in nil },
        onFailure: (LuaPlugin) -> Value? = { (_: LuaPlugin) -> Value? in nil }
    ) -> Dispatched<Value> {
        var out = Dispatched<Value>()
        // The message trace this work belongs to, if the host traces it (MessageTrace.swift).
        let trace = MessageTrace.current
        for plugin in ordered where !plugin.disabled && plugin.has(hook) {
            let limit = timeout(until: until)
            var value: Value?
            var failed = false
            let started = trace == nil ? 0 : PluginUsage.now()
            let result = call(plugin, cid: cid, messageID: messageID, budget: limit) { plugin in
                if let error = plugin.invoke(hook, timeout: limit, push) {
                    failed = true
                    return error
                }
                guard let L = plugin.L else { return nil }
                do {
                    value = try read(plugin, L)
                    return nil
                } catch {
                    failed = true
                    return invalidResult(plugin, hook, "\(error)")
                }
            }
            // Most calls ask for nothing and fail in nothing: appending an empty array still went through
            // Array's append path (a measured share of a trivial call).
            if !result.actions.isEmpty { out.actions += result.actions }
            if !result.errors.isEmpty { out.errors += result.errors }
            if failed, let verdict = onFailure(plugin) { value = verdict }
            trace?.hook(
                plugin.name, hook.luaName, nanos: PluginUsage.now() &- started,
                outcome: value.flatMap { MessageTrace.describe($0, hook: hook) }, actions: result.actions, error: result.errors.first)
            if let value {
                out.value = value
                out.decidedBy = plugin.name
                return out
            }
        }
        return out
    }

    /// One call into one plugin: sets the event's conversation and message, runs `body` (which returns the
    /// call's error), clears the Lua stack, records the outcome for the circuit breaker (a deadline that came
    /// from the caller's `budget`, not the hook's own, is not held against the plugin), and collects the
    /// actions the plugin asked for.
    func call(
        _ plugin: LuaPlugin, cid: String?, messageID: String?, budget: Double? = nil, _ body: (LuaPlugin) -> HookError?
    ) -> HookResult {
        plugin.currentCid = cid
        plugin.currentMessageID = messageID
        let error = body(plugin)
        if let L = plugin.L { lua_settop(L, 0) }
        var result = HookResult()
        account(plugin, error, into: &result.errors, cutByBudget: isBudgetCut(error, timeout: budget))
        result.actions = plugin.takeActions()
        return result
    }

    /// The error for a hook whose return value the host cannot use.
    func invalidResult(_ plugin: LuaPlugin, _ hook: HookName, _ problem: String) -> HookError {
        HookError(
            plugin: plugin.name, hook: hook.luaName, source: plugin.chunkLabel, line: plugin.hookLines[hook.rawValue],
            reason: .invalidResult(problem))
    }

    /// Records the outcome of one hook call for the circuit breaker.
    /// A hook stopped by the caller's time budget (`until`) rather than by its own deadline is reported
    /// but not held against the plugin: the circuit breaker must not disable moderation because the host
    /// was busy.
    func account(_ plugin: LuaPlugin, _ error: HookError?, into errors: inout [HookError], cutByBudget: Bool = false) {
        guard let error else {
            if plugin.consecutiveFailures != 0 { plugin.consecutiveFailures = 0 }
            return
        }
        errors.append(error)
        if cutByBudget { return }
        plugin.consecutiveFailures += 1
        plugin.totalFailures += 1
        plugin.lastError = error
        logger.error("\(error)", metadata: ["plugin": "\(plugin.name)", "hook": "\(error.hook)"])
        if limits.breakerThreshold > 0 && plugin.consecutiveFailures >= limits.breakerThreshold && !plugin.disabled {
            plugin.disabled = true
            plugin.usage?.breakerTripped()
            logger.error(
                "plugin disabled after \(plugin.consecutiveFailures) consecutive failures; reload to re-enable",
                metadata: ["plugin": "\(plugin.name)"])
        }
    }

    /// What a message as a hook's one argument needs (`push` it with the message). A message with a file
    /// gets its stored record looked up first (once: records are cached), waiting at most
    /// `HookMedia.lookupWait` and half the time left before `until`.
    func pushMessage(_ message: HookMessage, until: ContinuousClock.Instant? = nil) -> MessageArgument {
        // Most messages have no file: test that in place rather than copy the optional `FileInfo` out.
        let file = message.file == nil ? nil : env.media.lookup(message.file, until: until)
        return MessageArgument(typeName: env.registry.name(of: message.type), file: file)
    }

    /// Pushes JSON data as a hook's one argument (an empty table if it cannot be pushed).
    func pushJSON(_ value: JSONValue) -> (LuaRef) -> Int32 {
        { L in
            if !luaPush(L, json: value) { lua_createtable(L, 0, 0) }
            return 1
        }
    }

    /// Whether `error` is a deadline that came from a budget shorter than the hook's own deadline.
    private func isBudgetCut(_ error: HookError?, timeout: Double?) -> Bool {
        guard let error, error.reason == .deadline, let timeout else { return false }
        return limits.deadline <= 0 || timeout < limits.deadline
    }

    /// The per-call timeout for a hook that must finish by `until`.
    private func timeout(until: ContinuousClock.Instant?) -> Double? {
        guard let until else { return nil }
        let left = ContinuousClock.now.duration(to: until)
        let seconds = Double(left.components.seconds) + Double(left.components.attoseconds) * 1e-18
        return min(limits.deadline > 0 ? limits.deadline : .infinity, max(seconds, 0.001))
    }
}
