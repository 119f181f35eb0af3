import CLua
import CoreMetrics
import Foundation
import IMCore
import Logging

// What is where in HookRuntime (docs/PLUGINS.md is the plugin author's side):
// - `PluginRuntime` (PluginRuntime.swift): what a host uses, an actor whose executor is one dedicated Lua
//   thread; it owns a `PluginEngine` and runs every call on that thread, one at a time.
// - `PluginEngine` (this file and PluginEngine+*.swift): all plugins of one plugins directory and the dispatch
//   of hooks to them, synchronous (hookbot test and unit tests call it directly): loading and hot reload
//   (+Loading), hooks (+Hooks, +Dispatch), chat commands (+ChatCommands), ctx.ask dialogs (+Dialogs), timers
//   and schedules (+Timers, +Schedules), HTTP callbacks (+HTTP), on_offline (+Offline).
// - `LuaPlugin` (LuaPlugin.swift): one plugin's sandboxed Lua state (limits in Sources/LuaSandbox), its hook
//   references (the hooks by name: HookName.swift) and the actions it asked for; `PluginEnvironment` what all
//   plugins of an engine share.
// - The Lua side: Resources/prelude.lua builds each plugin's sandbox and `ctx` on top of the Swift functions
//   in `hb` (Callbacks.swift, CardCallbacks.swift, LocaleLua.swift, TextMatcherLua.swift, MediaAccess.swift).
// - "Command" here is a chat command (`!name args`, ChatCommands.swift: `ChatCommand`, `ChatCommandRegistry`);
//   a command *message* (`on_cmd`) is a `HookCommand`; the wire's `Command` is IMCore's.

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

    mutating func merge(_ other: ReloadReport) {
        loaded += other.loaded
        reloaded += other.reloaded
        unloaded += other.unloaded
        errors += other.errors
        actions += other.actions
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
    @exclusivity(unchecked) var ordered: [LuaPlugin] = []
    var byKey: [String: LuaPlugin] = [:]
    var config: [String: JSONValue]
    var failedSources: [String: (path: String, error: HookError)] = [:]
    var fingerprints: [String: String] = [:]
    var libFingerprint: String = ""
    var generations: [String: Int] = [:]
    /// Usage per plugin name, kept across reloads.
    var usage: [String: PluginUsage] = [:]
    /// Keys of plugins an admin disabled: they stay disabled through reloads until enabled.
    var disabledByAdmin: Set<String> = []
    let metrics: any MetricsFactory

    /// - Parameters:
    ///   - directory: the plugins directory (`*.lua` files, `name/init.lua` folders, `lib/` modules).
    ///   - store: state and translation cache.
    ///   - config: per-plugin configuration (plugin name → JSON object), visible as `ctx.config`.
    ///   - clock: "now" for timers and state TTLs.
    ///   - botID: the bot's client id, visible to plugins as `ctx.bot`.
    ///   - reach: the conversations actions may aim at besides the current event's (nil: any).
    public init(
        directory: URL, store: HookStateStore, config: [String: JSONValue] = [:],
        limits: HookLimits = .default, clock: HookClock = .system,
        logger: Logger = Logger(label: "hookbot.plugins"), botID: String? = nil, reach: ConversationReach? = nil,
        members: ConversationMembers = ConversationMembers(),
        metrics: any MetricsFactory = NOOPMetricsHandler.instance, configLocator: ConfigLocator? = nil,
        commands: ChatCommandSettings = .init(), httpPolicies: [String: HTTPPolicy] = [:]
    ) {
        self.metrics = metrics
        self.directory = directory.standardizedFileURL
        self.store = store
        self.limits = limits
        self.clock = clock
        self.logger = logger
        self.config = config
        self.env = PluginEnvironment(
            store: store, clock: clock, logger: logger, limits: limits, directory: self.directory,
            botID: botID, reach: reach, members: members, configLocator: configLocator, commandSettings: commands,
            httpPolicies: httpPolicies)
    }

    /// Same, with a `Logger(label: "hookbot.plugins")` at `logLevel`.
    public convenience init(
        directory: URL, store: HookStateStore, config: [String: JSONValue] = [:],
        limits: HookLimits = .default, clock: HookClock = .system, logLevel: HookLogLevel
    ) {
        var logger = Logger(label: "hookbot.plugins")
        logger.logLevel = logLevel.swiftLog
        self.init(directory: directory, store: store, config: config, limits: limits, clock: clock, logger: logger)
    }

    // MARK: - status

    /// Status of every known plugin (loaded, disabled, or failed to load).
    public var plugins: [PluginStatus] {
        var out = ordered.map { p in
            PluginStatus(
                name: p.name, path: p.path, priority: p.priority, state: p.disabled ? .disabled : .loaded,
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
            out.append(
                PluginStatus(
                    name: f.error.plugin, path: f.path, priority: 0, state: .failed, disabledBy: nil,
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

    /// Where `msg.file` records and `ctx.media` look for stored files (nil: nowhere; files then show
    /// `stored = false`).
    public func setMedia(_ source: (any HookMediaSource)?) {
        env.media.box.source.withLock { $0 = source }
    }
}
