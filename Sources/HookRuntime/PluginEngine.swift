import CLua
import CoreMetrics
import Foundation
import Logging

/// What a load / reload / directory sync did.
public struct ReloadReport: Sendable, Hashable {
    /// Plugins loaded for the first time.
    public var loaded: [String] = []
    /// Plugins whose new version replaced the old one.
    public var reloaded: [String] = []
    /// Plugins removed (file deleted or explicit unload).
    public var unloaded: [String] = []
    /// Failures; for a plugin that was running, the old version keeps running.
    public var errors: [HookError] = []
    /// Actions produced by `on_load` / `on_unload`.
    public var actions: [HookAction] = []

    public var isEmpty: Bool { loaded.isEmpty && reloaded.isEmpty && unloaded.isEmpty && errors.isEmpty }

    mutating func merge(_ o: ReloadReport) {
        loaded += o.loaded; reloaded += o.reloaded; unloaded += o.unloaded; errors += o.errors; actions += o.actions
    }
}

/// Hosts the Lua plugins of one plugins directory, synchronously.
///
/// An engine is owned by one thread at a time and does no locking: a running bot uses it through
/// `PluginRuntime`, which keeps it on a dedicated Lua thread; `hookbot test` and unit tests, which run
/// one thing at a time, call it directly. A reload compiles and `on_load`s the new version before it
/// replaces the old one, so an event always runs entirely on one version of each plugin.
public final class PluginEngine {
    public let directory: URL
    public let store: HookStateStore
    public let limits: HookLimits
    public let clock: HookClock
    let env: PluginEnvironment
    let logger: Logger

    /// Live plugins in dispatch order (priority desc, name asc).
    private var ordered: [LuaPlugin] = []
    private var byKey: [String: LuaPlugin] = [:]
    private var config: [String: JSONValue]
    private var failedSources: [String: (path: String, error: HookError)] = [:]
    private var fingerprints: [String: String] = [:]
    private var libFingerprint: String = ""
    private var generations: [String: Int] = [:]
    /// Usage per plugin name, kept across reloads.
    private var usage: [String: PluginUsage] = [:]
    /// Keys of plugins an admin disabled: they stay disabled through reloads until enabled.
    private var disabledByAdmin: Set<String> = []
    private let metrics: any MetricsFactory

    /// - Parameters:
    ///   - directory: the plugins directory (`*.lua` files, `name/init.lua` folders, `lib/` modules).
    ///   - store: state and translation cache.
    ///   - config: per-plugin configuration (plugin name → JSON object), visible as `ctx.config`.
    ///   - clock: "now" for timers and state TTLs.
    ///   - botID: the bot's client id, visible to plugins as `ctx.bot`.
    ///   - reach: the conversations actions may aim at besides the current event's (nil: any).
    public init(directory: URL, store: HookStateStore, config: [String: JSONValue] = [:],
                limits: HookLimits = .default, clock: HookClock = .system,
                logger: Logger = Logger(label: "hookbot.plugins"), botID: String? = nil, reach: ConversationReach? = nil,
                metrics: any MetricsFactory = NOOPMetricsHandler.instance, configLocator: ConfigLocator? = nil,
                commands: CommandSettings = .init(), httpPolicies: [String: HTTPPolicy] = [:]) {
        self.metrics = metrics
        self.directory = directory.standardizedFileURL
        self.store = store
        self.limits = limits
        self.clock = clock
        self.logger = logger
        self.config = config
        self.env = PluginEnvironment(store: store, clock: clock, logger: logger, limits: limits, directory: self.directory,
                                     botID: botID, reach: reach, configLocator: configLocator, commandSettings: commands,
                                     httpPolicies: httpPolicies)
    }

    /// Same, with a `Logger(label: "hookbot.plugins")` at `logLevel`.
    public convenience init(directory: URL, store: HookStateStore, config: [String: JSONValue] = [:],
                            limits: HookLimits = .default, clock: HookClock = .system, logLevel: HookLogLevel) {
        var logger = Logger(label: "hookbot.plugins")
        logger.logLevel = logLevel.swiftLog
        self.init(directory: directory, store: store, config: config, limits: limits, clock: clock, logger: logger)
    }

    // MARK: - status

    /// Status of every known plugin (loaded, disabled, or failed to load).
    public var plugins: [PluginStatus] {
        var out = ordered.map { p in
            PluginStatus(name: p.name, path: p.path, priority: p.priority, state: p.disabled ? .disabled : .loaded,
                         disabledBy: p.disabled ? (disabledByAdmin.contains(p.key) ? .admin : .breaker) : nil,
                         consecutiveFailures: p.consecutiveFailures, totalFailures: p.totalFailures,
                         lastError: p.lastError, generation: p.generation,
                         hooks: HookName.allCases.filter { p.has($0) }.map(\.luaName),
                         timers: p.timers.count, memoryBytes: p.memoryUsed,
                         breakerTrips: p.usage?.breakerTrips ?? 0, usage: p.usage?.hooks ?? [], http: p.usage?.http ?? .init())
        }
        let live = Set(byKey.keys)
        for (key, f) in failedSources.sorted(by: { $0.key < $1.key }) where !live.contains(key) {
            let used = usage[f.error.plugin]
            out.append(PluginStatus(name: f.error.plugin, path: f.path, priority: 0, state: .failed, disabledBy: nil,
                                    consecutiveFailures: 0, totalFailures: 0, lastError: f.error,
                                    generation: generations[key] ?? 0, hooks: [], timers: 0, memoryBytes: 0,
                                    breakerTrips: used?.breakerTrips ?? 0, usage: used?.hooks ?? []))
        }
        return out
    }

    /// Custom message types registered by plugins.
    public var messageTypes: [CustomMessageType] { env.registry.all }

    /// The type name of a message type number (built-in or custom).
    public func typeName(of type: Int) -> String? { env.registry.name(of: type) }

    /// Validates a message against its registered custom type (nil when valid).
    public func validate(_ message: HookMessage) -> String? { env.registry.validate(message) }

    /// Replaces the per-plugin config; takes effect on the next (re)load.
    public func setConfig(_ config: [String: JSONValue]) {
        self.config = config
    }

    // MARK: - loading

    struct Source {
        var key: String
        var path: String
        var chunkName: String
        var fingerprint: String
    }

    private func readFingerprint(_ path: String) -> String {
        guard let d = FileManager.default.contents(atPath: path) else { return "" }
        return String(decoding: d, as: UTF8.self)
    }

    private func folderFingerprint(_ dir: URL) -> String {
        let fm = FileManager.default
        guard let en = fm.enumerator(at: dir, includingPropertiesForKeys: nil) else { return "" }
        var parts: [(String, String)] = []
        for case let u as URL in en where u.pathExtension == "lua" {
            parts.append((u.path, readFingerprint(u.path)))
        }
        return parts.sorted { $0.0 < $1.0 }.map { "\($0.0)\n\($0.1)" }.joined(separator: "\u{0}")
    }

    /// Plugins present in the directory.
    func discover() -> [String: Source] {
        let fm = FileManager.default
        var out: [String: Source] = [:]
        guard let names = try? fm.contentsOfDirectory(atPath: directory.path) else { return out }
        for n in names.sorted() where !n.hasPrefix(".") {
            let url = directory.appendingPathComponent(n)
            var isDir: ObjCBool = false
            guard fm.fileExists(atPath: url.path, isDirectory: &isDir) else { continue }
            if isDir.boolValue {
                guard n != "lib", isValidPluginName(n) else { continue }
                let initURL = url.appendingPathComponent("init.lua")
                guard fm.fileExists(atPath: initURL.path) else { continue }
                out[n] = Source(key: n, path: initURL.path, chunkName: "@\(n)/init.lua", fingerprint: folderFingerprint(url))
            } else if n.hasSuffix(".lua") {
                let key = String(n.dropLast(4))
                guard isValidPluginName(key), out[key] == nil else { continue }
                out[key] = Source(key: key, path: url.path, chunkName: "@\(n)", fingerprint: readFingerprint(url.path))
            }
        }
        return out
    }

    /// Loads every plugin of the directory (same as `sync()` on a fresh runtime).
    @discardableResult
    public func loadAll() -> ReloadReport { sync() }

    /// Brings the loaded plugins in line with the directory: new files load,
    /// changed files reload, deleted files unload. Hot reload calls this.
    @discardableResult
    public func sync() -> ReloadReport {
        let found = discover()
        var report = ReloadReport()
        let liveKeys = Set(byKey.keys)
        let known = liveKeys.union(failedSources.keys)
        let fps = fingerprints
        for key in known.sorted() where found[key] == nil {
            report.merge(unload(key: key))
        }
        let libFP = folderFingerprint(directory.appendingPathComponent("lib"))
        let libChanged = libFP != libFingerprint
        libFingerprint = libFP
        for key in found.keys.sorted() {
            let src = found[key]!
            if fps[key] != src.fingerprint || libChanged || !known.contains(key) {
                report.merge(load(src))
            }
        }
        logReport(report)
        return report
    }

    /// Reloads one plugin (by plugin name or file name) even if unchanged;
    /// re-enables it if the circuit breaker had disabled it. A plugin whose
    /// file is gone is unloaded.
    @discardableResult
    public func reload(name: String) -> ReloadReport {
        let key = byKey.values.first(where: { $0.name == name })?.key ?? name
        disabledByAdmin.remove(key)
        let found = discover()
        var report = ReloadReport()
        if let src = found[key] {
            report = load(src)
        } else {
            report = unload(key: key)
            if report.unloaded.isEmpty {
                report.errors.append(HookError(plugin: name, hook: "load", reason: .io("no plugin named \(name) in \(directory.path)")))
            }
        }
        logReport(report)
        return report
    }

    /// Stops calling a plugin's hooks and timers until `enable(name:)`, across reloads. False when no
    /// plugin of that name is loaded.
    @discardableResult
    public func disable(name: String) -> Bool {
        guard let plugin = byKey.values.first(where: { $0.name == name }) else { return false }
        disabledByAdmin.insert(plugin.key)
        plugin.disabled = true
        logger.notice("plugin disabled by an admin", metadata: ["plugin": "\(name)"])
        return true
    }

    /// Calls a disabled plugin again (whoever disabled it) and resets its consecutive failures. False
    /// when no plugin of that name is loaded.
    @discardableResult
    public func enable(name: String) -> Bool {
        guard let plugin = byKey.values.first(where: { $0.name == name }) else { return false }
        disabledByAdmin.remove(plugin.key)
        plugin.disabled = false
        plugin.consecutiveFailures = 0
        logger.notice("plugin enabled", metadata: ["plugin": "\(name)"])
        return true
    }

    /// Reloads every plugin (and picks up new and deleted files).
    @discardableResult
    public func reloadAll() -> ReloadReport {
        let found = discover()
        var report = ReloadReport()
        let liveKeys = Set(byKey.keys)
        let known = liveKeys.union(failedSources.keys)
        for key in known.sorted() where found[key] == nil { report.merge(unload(key: key)) }
        libFingerprint = folderFingerprint(directory.appendingPathComponent("lib"))
        for key in found.keys.sorted() { report.merge(load(found[key]!)) }
        logReport(report)
        return report
    }

    /// Unloads one plugin (`on_unload`, timers cancelled, types unregistered).
    @discardableResult
    public func unload(name: String) -> ReloadReport {
        let key = byKey.values.first(where: { $0.name == name })?.key ?? name
        return unload(key: key)
    }

    /// Unloads every plugin.
    @discardableResult
    public func shutdown() -> ReloadReport {
        let keys = ordered.map(\.key)
        var report = ReloadReport()
        for k in keys { report.merge(unload(key: k)) }
        logReport(report)
        return report
    }

    private func logReport(_ r: ReloadReport) {
        for n in r.loaded { logger.info("plugin loaded", metadata: ["plugin": "\(n)"]) }
        for n in r.reloaded { logger.info("plugin reloaded", metadata: ["plugin": "\(n)"]) }
        for n in r.unloaded { logger.info("plugin unloaded", metadata: ["plugin": "\(n)"]) }
        for e in r.errors { logger.error("plugin load failed: \(e)", metadata: ["plugin": "\(e.plugin)"]) }
    }

    /// Compiles and `on_load`s a new instance, then swaps it in for the old one.
    private func load(_ src: Source) -> ReloadReport {
        var report = ReloadReport()
        let gen = (generations[src.key] ?? 0) + 1
        generations[src.key] = gen
        let cfgAll = config

        guard let data = FileManager.default.contents(atPath: src.path) else {
            let e = HookError(plugin: src.key, hook: "load", reason: .io("cannot read \(src.path)"))
            recordFailure(src, e)
            report.errors.append(e)
            return report
        }
        let source = String(decoding: data, as: UTF8.self)
        let plugin: LuaPlugin
        do {
            // the config is looked up by plugin name once the name is known;
            // the file name is used as a first guess
            plugin = try LuaPlugin(env: env, key: src.key, path: src.path, chunkName: src.chunkName, source: source,
                                   generation: gen, hostConfig: { name in cfgAll[name] ?? cfgAll[src.key] })
        } catch let e as HookError {
            recordFailure(src, e)
            report.errors.append(e)
            return report
        } catch {
            let e = HookError(plugin: src.key, hook: "load", reason: .invalidPlugin("\(error)"))
            recordFailure(src, e)
            report.errors.append(e)
            return report
        }
        plugin.usage = usage(of: plugin.name)
        // unique names
        let clash = byKey.values.first(where: { $0.name == plugin.name && $0.key != src.key })
        if let clash {
            let e = HookError(plugin: plugin.name, hook: "load",
                              reason: .invalidPlugin("name \(plugin.name) is already used by \(clash.path)"))
            plugin.close()
            recordFailure(src, e)
            report.errors.append(e)
            return report
        }
        // on_load in the fresh state; the old version keeps serving events meanwhile
        if plugin.has(.onLoad) {
            // The new version's registrations replace the running version's; a failed load puts them back.
            let registered = env.registry.snapshot()
            let commands = env.commands.snapshot()
            if let e = plugin.invoke(.onLoad, timeout: limits.loadDeadline, { _ in 0 }) {
                env.registry.restore(registered)
                env.commands.restore(commands)
                plugin.close()
                recordFailure(src, e)
                report.errors.append(e)
                return report
            }
            if let L = plugin.L { lua_settop(L, 0) }
            report.actions += plugin.takeActions()
        }
        // swap
        let old = byKey[src.key]
        byKey[src.key] = plugin
        if let old, let i = ordered.firstIndex(where: { $0 === old }) { ordered.remove(at: i) }
        ordered.append(plugin)
        ordered.sort { $0.priority != $1.priority ? $0.priority > $1.priority : $0.name < $1.name }
        if let old {
            report.actions += finishUnload(old)
        }
        failedSources[src.key] = nil
        fingerprints[src.key] = src.fingerprint
        plugin.disabled = disabledByAdmin.contains(src.key)
        plugin.usage?.loaded(ok: true)
        if old != nil { report.reloaded.append(plugin.name) } else { report.loaded.append(plugin.name) }
        return report
    }

    private func usage(of name: String) -> PluginUsage {
        if let known = usage[name] { return known }
        let created = PluginUsage(plugin: name, factory: metrics)
        usage[name] = created
        return created
    }

    private func recordFailure(_ src: Source, _ e: HookError) {
        usage(of: e.plugin).loaded(ok: false)
        fingerprints[src.key] = src.fingerprint  // do not retry an unchanged broken file
        failedSources[src.key] = (src.path, e)
    }

    /// Runs `on_unload` and disposes of everything the instance owns.
    private func finishUnload(_ old: LuaPlugin) -> [HookAction] {
        var actions: [HookAction] = []
        if old.has(.onUnload) {
            if let e = old.invoke(.onUnload, timeout: limits.loadDeadline, { _ in 0 }) {
                logger.error("\(e)", metadata: ["plugin": "\(old.name)"])
            }
            actions = old.takeActions()
        }
        env.registry.removeAll(owner: old.instanceID)
        env.commands.removeAll(owner: old.instanceID)
        old.close()
        return actions
    }

    private func unload(key: String) -> ReloadReport {
        var report = ReloadReport()
        if let old = byKey.removeValue(forKey: key) {
            ordered.removeAll { $0 === old }
            report.actions += finishUnload(old)
            report.unloaded.append(old.name)
        }
        failedSources[key] = nil
        fingerprints[key] = nil
        return report
    }

    // MARK: - dispatch helpers

    /// Records the outcome of one hook call for the circuit breaker.
    /// A hook stopped by the caller's time budget (`until`) rather than by its own deadline is reported
    /// but not held against the plugin: the circuit breaker must not disable moderation because the host
    /// was busy.
    private func account(_ p: LuaPlugin, _ error: HookError?, into errors: inout [HookError], cutByBudget: Bool = false) {
        guard let error else {
            if p.consecutiveFailures != 0 { p.consecutiveFailures = 0 }
            return
        }
        if cutByBudget {
            errors.append(error)
            return
        }
        p.consecutiveFailures += 1
        p.totalFailures += 1
        p.lastError = error
        errors.append(error)
        logger.error("\(error)", metadata: ["plugin": "\(p.name)", "hook": "\(error.hook)"])
        if limits.breakerThreshold > 0 && p.consecutiveFailures >= limits.breakerThreshold && !p.disabled {
            p.disabled = true
            p.usage?.breakerTripped()
            logger.error("plugin disabled after \(p.consecutiveFailures) consecutive failures; reload to re-enable",
                         metadata: ["plugin": "\(p.name)"])
        }
    }

    @inline(__always) private func begin(_ p: LuaPlugin, cid: String?, messageID: String?) {
        p.currentCid = cid
        p.currentMessageID = messageID
    }

    /// Runs `hook` on every enabled plugin that has it, in order.
    private func runAll(_ hook: HookName, cid: String?, messageID: String?, _ push: (LuaRef) -> Int32) -> HookResult {
        var result = HookResult()
        for p in ordered where !p.disabled && p.has(hook) {
            begin(p, cid: cid, messageID: messageID)
            let e = p.invoke(hook, push)
            if let L = p.L { lua_settop(L, 0) }
            account(p, e, into: &result.errors)
            result.actions += p.takeActions()
        }
        return result
    }

    private func pushMessage(_ m: HookMessage) -> (LuaRef) -> Int32 {
        let name = env.registry.name(of: m.type)
        return { L in luaPush(L, message: m, typeName: name); return 1 }
    }

    // MARK: - events

    /// `moderation(msg, ctx)` chain: the first non-allow verdict wins. With `until`, no hook of the chain
    /// runs past that instant (each gets the smaller of its own deadline and the time left).
    public func moderate(_ message: HookMessage, until: ContinuousClock.Instant? = nil) -> ModerationOutcome {
        moderationChain(message, until: until)
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

    private func moderationChain(_ message: HookMessage, until: ContinuousClock.Instant? = nil) -> ModerationOutcome {
        var out = ModerationOutcome(verdict: .allow, decidedBy: nil, actions: [], errors: [])
        let push = pushMessage(message)
        for p in ordered where !p.disabled && p.has(.moderation) {
            begin(p, cid: message.cid, messageID: message.id)
            let limit = timeout(until: until)
            var err = p.invoke(.moderation, timeout: limit, push)
            var verdict: ModerationVerdict = .allow
            if err == nil, let L = p.L {
                do {
                    let (v, acts) = try readModeration(L, message: message)
                    verdict = v
                    p.pending += acts.map { HookAction(plugin: p.name, kind: $0) }
                } catch {
                    err = HookError(plugin: p.name, hook: "moderation", source: p.chunkLabel,
                                    line: p.hookLines[HookName.moderation.rawValue],
                                    reason: .invalidResult("\(error)"))
                }
                lua_settop(L, 0)
            }
            account(p, err, into: &out.errors, cutByBudget: isBudgetCut(err, timeout: limit))
            out.actions += p.takeActions()
            if err != nil && limits.moderationFailClosed {
                out.verdict = .block(reason: "moderation failed (\(p.name))", code: nil, silent: false)
                out.decidedBy = p.name
                return out
            }
            if verdict != .allow {
                out.verdict = verdict
                out.decidedBy = p.name
                return out
            }
        }
        return out
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
            return (.block(reason: o["reason"]?.stringValue, code: o["code"]?.intValue,
                           silent: o["silent"]?.boolValue ?? false), actions)
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
    public func reviewMembership(cid: String, by: String, members: [String], action: String,
                                 until: ContinuousClock.Instant? = nil) -> ModerationOutcome {
        var out = ModerationOutcome(verdict: .allow, decidedBy: nil, actions: [], errors: [])
        let event: JSONValue = .object([
            "cid": .string(cid), "by": .string(by), "members": .array(members.map { .string($0) }), "action": .string(action),
        ])
        for p in ordered where !p.disabled && p.has(.membership) {
            begin(p, cid: cid, messageID: nil)
            let limit = timeout(until: until)
            var err = p.invoke(.membership, timeout: limit) { L in
                if !luaPush(L, json: event) { lua_createtable(L, 0, 0) }
                return 1
            }
            var verdict: ModerationVerdict = .allow
            if err == nil, let L = p.L {
                do {
                    verdict = try readModeration(L, message: HookMessage(cid: cid, from: by)).0
                } catch {
                    err = HookError(plugin: p.name, hook: "membership", source: p.chunkLabel,
                                    line: p.hookLines[HookName.membership.rawValue], reason: .invalidResult("\(error)"))
                }
                lua_settop(L, 0)
            }
            account(p, err, into: &out.errors, cutByBudget: isBudgetCut(err, timeout: limit))
            out.actions += p.takeActions()
            if case .block = verdict {
                out.verdict = verdict
                out.decidedBy = p.name
                return out
            }
        }
        return out
    }

    /// `on_receive(msg, ctx)` on every plugin.
    public func receive(_ message: HookMessage) -> HookResult {
        if let handled = runCommand(message) { return handled }
        return answeringUnknownCommand(message, runAll(.onReceive, cid: message.cid, messageID: message.id, pushMessage(message)))
    }

    /// The incoming pipeline: moderation, then (unless blocked) `on_receive`
    /// with the possibly replaced text, as one call, so a reload
    /// cannot split an event between two versions.
    public func incoming(_ message: HookMessage) -> IncomingOutcome {
        let mod = moderationChain(message)
        var delivered: HookMessage? = message
        switch mod.verdict {
        case .block: delivered = nil
        case .replace(let text): delivered?.text = text
        case .allow: break
        }
        var actions = mod.actions
        var errors = mod.errors
        if let d = delivered {
            let r = runCommand(d) ?? answeringUnknownCommand(d, runAll(.onReceive, cid: d.cid, messageID: d.id, pushMessage(d)))
            actions += r.actions
            errors += r.errors
        }
        return IncomingOutcome(moderation: mod, delivered: delivered, actions: actions, errors: errors)
    }

    /// `before_send(msg, ctx)` chain: each plugin may return a modified
    /// message (seen by the next plugin) or `ctx.drop(reason)`.
    public func beforeSend(_ message: HookMessage, until: ContinuousClock.Instant? = nil) -> BeforeSendOutcome {
        var out = BeforeSendOutcome(message: message, droppedBy: nil, dropReason: nil, actions: [], errors: [])
        var current = message
        for p in ordered where !p.disabled && p.has(.beforeSend) {
            begin(p, cid: current.cid, messageID: current.id)
            let limit = timeout(until: until)
            var err = p.invoke(.beforeSend, timeout: limit, pushMessage(current))
            var drop: String?? = nil
            if err == nil, let L = p.L {
                let t = lua_gettop(L)
                do {
                    switch lua_type(L, t) {
                    case LUA_TNIL, LUA_TNONE: break
                    case LUA_TTABLE:
                        luaPushStatic(L, "verdict")
                        let vt = lua_rawget(L, t)
                        let verdict = vt == LUA_TSTRING ? luaString(L, -1) : nil
                        lua_settop(L, t)
                        if vt != LUA_TNIL {
                            switch verdict {
                            case "drop":
                                luaPushStatic(L, "reason")
                                _ = lua_rawget(L, t)
                                drop = .some(luaString(L, -1))
                            case "allow": break
                            default: throw LuaConversionError("before_send verdict must be \"drop\" or \"allow\"")
                            }
                        } else {
                            let m = try luaToMessage(L, t, base: current)
                            if let e = env.registry.validate(m) { throw LuaConversionError(e) }
                            current = m
                        }
                    default:
                        throw LuaConversionError("before_send must return nil, a message table or ctx.drop(reason), got \(luaTypeName(L, t))")
                    }
                } catch {
                    err = HookError(plugin: p.name, hook: "before_send", source: p.chunkLabel,
                                    line: p.hookLines[HookName.beforeSend.rawValue], reason: .invalidResult("\(error)"))
                }
                lua_settop(L, 0)
            }
            account(p, err, into: &out.errors, cutByBudget: isBudgetCut(err, timeout: limit))
            out.actions += p.takeActions()
            if let drop {
                out.message = nil
                out.droppedBy = p.name
                out.dropReason = drop
                return out
            }
        }
        out.message = current
        return out
    }

    /// `translate(text, from, to, ctx)` provider chain: the first non-nil
    /// string wins. With a `messageID` the result is cached per (message id,
    /// target language) in the store and later calls do not run Lua.
    public func translate(text: String, from: String?, to: String, messageID: String? = nil) -> TranslationOutcome {
        if let messageID, let hit = try? store.cachedTranslation(messageID: messageID, lang: to) {
            return TranslationOutcome(text: hit.text, plugin: hit.plugin, cached: true, actions: [], errors: [])
        }
        var out = TranslationOutcome(text: nil, plugin: nil, cached: false, actions: [], errors: [])
        for p in ordered where !p.disabled && p.has(.translate) {
            begin(p, cid: nil, messageID: messageID)
            var err = p.invoke(.translate) { L in
                luaPush(L, text)
                if let from { luaPush(L, from) } else { lua_pushnil(L) }
                luaPush(L, to)
                return 3
            }
            var result: String?
            if err == nil, let L = p.L {
                switch lua_type(L, -1) {
                case LUA_TNIL, LUA_TNONE: break
                case LUA_TSTRING: result = luaString(L, -1)
                default:
                    err = HookError(plugin: p.name, hook: "translate", source: p.chunkLabel,
                                    line: p.hookLines[HookName.translate.rawValue],
                                    reason: .invalidResult("translate must return a string or nil, got \(luaTypeName(L, -1))"))
                }
                lua_settop(L, 0)
            }
            account(p, err, into: &out.errors)
            out.actions += p.takeActions()
            if let result {
                out.text = result
                out.plugin = p.name
                break
            }
        }
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
        return runAll(.onCmd, cid: cmd.cid, messageID: nil) { L in
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
        var m = message
        m.transient = true
        return runAll(.onTransient, cid: m.cid, messageID: m.id, pushMessage(m))
    }

    /// Conversation events: `on_member_joined`, `on_member_left`, `on_invited`,
    /// `on_kicked`, `on_conversation_updated`, `on_recall`.
    public func handle(_ event: HookEvent) -> HookResult {
        let table = event.table
        return runAll(HookName.forEvent(event), cid: event.cid, messageID: nil) { L in
            if !luaPush(L, json: table) { lua_createtable(L, 0, 0) }
            return 1
        }
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

    // MARK: - timers

    /// The earliest due time of any timer (in clock seconds), if any.
    public var nextTimerDue: Double? {
        return ordered.filter { !$0.disabled }.flatMap { $0.timers.values.map(\.due) }.min()
    }

    /// Number of live timers over all plugins.
    public var timerCount: Int {
        return ordered.reduce(0) { $0 + $1.timers.count }
    }

    /// Fires every timer due at `now` (default: the clock's now), earliest
    /// first. A repeating timer fires at most once per call and is then
    /// rescheduled one interval after its due time (or after `now` if it fell
    /// further behind).
    public func fireDueTimers(now: Double? = nil) -> HookResult {
        let t = now ?? clock.now()
        var due: [(plugin: LuaPlugin, order: Int, timer: PluginTimer)] = []
        for (i, p) in ordered.enumerated() where !p.disabled {
            for timer in p.timers.values where timer.due <= t { due.append((p, i, timer)) }
        }
        due.sort { a, b in
            if a.timer.due != b.timer.due { return a.timer.due < b.timer.due }
            if a.order != b.order { return a.order < b.order }
            return a.timer.id < b.timer.id
        }
        var result = HookResult()
        for (p, _, timer) in due {
            guard !p.disabled, p.L != nil, let current = p.timers[timer.id] else { continue }
            if limits.timerShare > 0 {
                let now = Self.monotonicSeconds()
                if now - p.timerWindow.start >= 1 { p.timerWindow = (now, 0, false) }
                if p.timerWindow.spent >= limits.timerShare {
                    // Out of its share this second: the timer waits for the next window.
                    p.timers[timer.id]?.due = t + (1 - (now - p.timerWindow.start))
                    if !p.timerWindow.overrun {
                        p.timerWindow.overrun = true
                        account(p, HookError(plugin: p.name, hook: "timer", reason: .timerBudget), into: &result.errors)
                    }
                    continue
                }
            }
            let once = current.interval == nil
            if let iv = current.interval {
                var next = current.due + iv
                if next <= t { next = t + iv }
                p.timers[timer.id]?.due = next
            } else {
                p.timers[timer.id] = nil
            }
            begin(p, cid: nil, messageID: nil)
            let started = Self.monotonicSeconds()
            let e = p.fireTimer(id: timer.id, once: once)
            p.timerWindow.spent += Self.monotonicSeconds() - started
            account(p, e, into: &result.errors)
            result.actions += p.takeActions()
        }
        return result
    }

    private static func monotonicSeconds() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
}

// MARK: - commands

extension PluginEngine {
    /// The command a message invokes: its name, and the text after it.
    private func invocation(_ message: HookMessage) -> (name: String, rest: Substring)? {
        let prefix = env.commandSettings.prefix
        guard !prefix.isEmpty, let text = message.text, text.hasPrefix(prefix) else { return nil }
        let body = text.dropFirst(prefix.count)
        let end = body.firstIndex(where: \.isWhitespace) ?? body.endIndex
        let name = String(body[..<end])
        return name.isEmpty ? nil : (name, body[end...])
    }

    /// A reply from the host about a command (usage, permission, cooldown, help), as the command's plugin.
    private func hostReply(_ text: String, to message: HookMessage, plugin: String) -> HookResult {
        let reply = HookMessage(cid: message.cid, type: HookMessageType.text, text: text)
        return HookResult(actions: [HookAction(plugin: plugin, kind: .send(cid: message.cid, message: reply, replyTo: message.id))])
    }

    /// Runs the command a message invokes instead of `on_receive`: checks the roles, the cooldown and the
    /// arguments (answering the sender when one fails), then calls the command's `run`. Nil when the
    /// message invokes no declared command.
    func runCommand(_ message: HookMessage) -> HookResult? {
        guard let (name, rest) = invocation(message) else { return nil }
        let prefix = env.commandSettings.prefix
        if name == "help", !env.commands.isEmpty { return help(rest, message) }
        guard let (spec, owner) = env.commands.command(name),
              let plugin = ordered.first(where: { $0.instanceID == owner }) else { return nil }
        if plugin.disabled {
            return hostReply("\(prefix)\(name) is not available now (its plugin is disabled)", to: message, plugin: spec.plugin)
        }
        if !spec.roles.isEmpty, !spec.roles.contains(where: { hasRole(env, user: message.from, role: $0) }) {
            return hostReply("\(prefix)\(name) is only for \(spec.roles.joined(separator: " or "))", to: message, plugin: spec.plugin)
        }
        let arguments: [String: JSONValue]
        switch spec.parse(rest) {
        case .failure(let error):
            return hostReply("\(prefix)\(name): \(error) — usage: \(spec.usage(prefix: prefix))", to: message, plugin: spec.plugin)
        case .success(let parsed): arguments = parsed
        }
        if let left = env.commands.cooldownLeft(spec, user: message.from, now: clock.now()) {
            return hostReply("\(prefix)\(name): wait \(Int(left.rounded(.up))) s", to: message, plugin: spec.plugin)
        }
        begin(plugin, cid: message.cid, messageID: message.id)
        let error = plugin.runCommand(name, arguments: arguments, message: message, typeName: env.registry.name(of: message.type))
        if let L = plugin.L { lua_settop(L, 0) }
        var result = HookResult()
        account(plugin, error, into: &result.errors)
        result.actions = plugin.takeActions()
        return result
    }

    /// `on_receive`'s result, or, when nothing answered a message that looks like an unknown command
    /// while commands are declared, a reply saying so.
    func answeringUnknownCommand(_ message: HookMessage, _ result: HookResult) -> HookResult {
        guard result.actions.isEmpty, !env.commands.isEmpty, let (name, _) = invocation(message),
              env.commands.command(name) == nil else { return result }
        let prefix = env.commandSettings.prefix
        var answered = hostReply("unknown command \(prefix)\(name); \(prefix)help lists the commands", to: message, plugin: "hookbot")
        answered.errors = result.errors
        return answered
    }

    /// `!help` (every command) and `!help <command>` (one).
    private func help(_ rest: Substring, _ message: HookMessage) -> HookResult {
        let prefix = env.commandSettings.prefix
        let asked = rest.trimmingCharacters(in: .whitespaces)
        func line(_ spec: CommandSpec) -> String {
            var text = spec.usage(prefix: prefix)
            if let description = spec.description { text += " — \(description)" }
            if !spec.roles.isEmpty { text += " (\(spec.roles.joined(separator: " or ")))" }
            return text
        }
        guard !asked.isEmpty else {
            let lines = env.commands.all.map(line)
            return hostReply((["Commands:"] + lines + ["\(prefix)help <command> for one of them."]).joined(separator: "\n"),
                             to: message, plugin: "hookbot")
        }
        let name = asked.hasPrefix(prefix) ? String(asked.dropFirst(prefix.count)) : asked
        guard let (spec, _) = env.commands.command(name) else {
            return hostReply("unknown command \(prefix)\(name); \(prefix)help lists the commands", to: message, plugin: "hookbot")
        }
        var text = line(spec)
        if spec.cooldown > 0 { text += "; once every \(spec.cooldown.formatted()) s per member" }
        return hostReply(text, to: message, plugin: spec.plugin)
    }
}

// MARK: - webhooks

extension PluginEngine {
    /// `on_http(req, ctx)` of one plugin, for a request to its webhook. Nil when there is no such enabled
    /// plugin with `on_http`. A failing hook answers 500; the actions it asked for before failing stand.
    public func http(plugin name: String, _ request: HookHTTPRequest) -> (response: HookHTTPResponse, result: HookResult)? {
        guard let plugin = ordered.first(where: { $0.name == name }), !plugin.disabled, plugin.has(.onHttp) else { return nil }
        var fields: [String: JSONValue] = [
            "method": .string(request.method), "path": .string(request.path), "body": .string(request.body),
            "query": .object(request.query.mapValues(JSONValue.string)),
            "headers": .object(request.headers.mapValues(JSONValue.string)),
        ]
        if let json = try? JSONValue(jsonText: request.body) { fields["json"] = json }
        begin(plugin, cid: nil, messageID: nil)
        var result = HookResult()
        var response = HookHTTPResponse(status: 204)
        let error = plugin.invoke(.onHttp) { L in
            if !luaPush(L, json: .object(fields)) { lua_createtable(L, 0, 0) }
            return 1
        }
        if error == nil, let L = plugin.L {
            switch Self.httpResponse(L) {
            case .success(let answer): response = answer
            case .failure(let problem):
                response = HookHTTPResponse(status: 500, body: "on_http returned \(problem)")
                logger.error("on_http returned \(problem)", metadata: ["plugin": "\(name)"])
            }
        }
        if let L = plugin.L { lua_settop(L, 0) }
        account(plugin, error, into: &result.errors)
        if let error { response = HookHTTPResponse(status: 500, body: "the plugin failed: \(error.message)") }
        result.actions = plugin.takeActions()
        return (response, result)
    }

    /// The value `on_http` left on the stack, as a response.
    private static func httpResponse(_ L: LuaRef) -> Result<HookHTTPResponse, HTTPResponseProblem> {
        switch lua_type(L, -1) {
        case LUA_TNIL, LUA_TNONE: return .success(HookHTTPResponse(status: 204))
        case LUA_TSTRING: return .success(HookHTTPResponse(status: 200, body: luaString(L, -1) ?? ""))
        case LUA_TTABLE:
            guard let value = try? luaToJSON(L, -1, path: "response"), case .object(let fields) = value else {
                return .failure(HTTPResponseProblem("a table that is not {status, body, headers}"))
            }
            var response = HookHTTPResponse(status: 200)
            if let status = fields["status"] {
                guard let code = status.intValue, (200...599).contains(code) else {
                    return .failure(HTTPResponseProblem("a status that is not a number from 200 to 599"))
                }
                response.status = code
            }
            switch fields["body"] {
            case nil, .null?: break
            case .string(let text)?: response.body = text
            case let body?:
                response.body = body.jsonText
                response.headers["content-type"] = "application/json"
            }
            for (key, value) in fields["headers"]?.objectValue ?? [:] {
                guard let text = value.stringValue else { return .failure(HTTPResponseProblem("a header that is not a string")) }
                response.headers[key.lowercased()] = text
            }
            return .success(response)
        default:
            return .failure(HTTPResponseProblem("a \(luaTypeName(L, -1)), not a table, a string or nil"))
        }
    }
}

struct HTTPResponseProblem: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

// MARK: - HTTP calls

extension PluginEngine {
    /// How plugins' HTTP calls are started (`ctx.http`); without it they are refused.
    public func setHTTPStarter(_ start: (@Sendable (HookHTTPCall) -> Void)?) { env.startHTTP = start }

    /// Runs the callback of a finished HTTP call, with the ctx of the event that started it. A call whose
    /// plugin was reloaded, unloaded or disabled meanwhile has no callback to run.
    public func completeHTTP(_ call: HookHTTPCall, _ outcome: HookHTTPOutcome) -> HookResult {
        usage[call.plugin]?.httpFinished(failed: outcome.error != nil)
        guard let plugin = ordered.first(where: { $0.instanceID == call.instanceID }), !plugin.disabled else { return HookResult() }
        begin(plugin, cid: call.cid, messageID: call.messageID)
        let error = plugin.httpDone(call.id, outcome.lua)
        if let L = plugin.L { lua_settop(L, 0) }
        var result = HookResult()
        account(plugin, error, into: &result.errors)
        result.actions = plugin.takeActions()
        return result
    }
}
