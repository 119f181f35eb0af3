import Foundation
import HookRuntime
import HookbotConfig
import IMCore

/// The `[plugins]` section of hookbot.toml (README, "Configuration"): where the plugins are, hot reload, their
/// limits and state quota, and one `[plugins.<name>]` table per plugin (its `ctx.config`); what `PluginRuntime`
/// is given when the bot host starts. (The config editor's schema of one plugin's settings is
/// `HookRuntime.PluginSettings`.)
public struct PluginsSettings: Sendable {
    /// `directory`: where the plugins are (relative to the file).
    public var directory = URL(fileURLWithPath: "plugins")
    /// `watch_interval_seconds`: poll the directory this often for hot reload; 0 disables watching.
    public var watchInterval: Double = 1
    /// `instruction_budget`, `deadline_ms`, `memory_mb`, `moderation_fail_closed`, `timer_share` and the
    /// text matcher's caps (`matcher_*`).
    public var limits = HookLimits.default
    /// `state_max_keys`, `state_max_mb`: how much persistent state each plugin may keep.
    public var stateQuota = HookStateStore.Quota()
    /// `[plugins.<name>]`: plugin name → its table, visible to the plugin as `ctx.config`.
    public var config: [String: JSONValue] = [:]

    public init() {}

    /// Reads `[plugins]`; every problem names the file, line and key.
    public init(reading r: inout ConfigTableReader) throws {
        directory = try r.fileURL("directory") ?? directory
        watchInterval = try r.double("watch_interval_seconds") ?? watchInterval
        if let budget = try r.int("instruction_budget") { limits.instructionBudget = budget }
        if let deadline = try r.double("deadline_ms") { limits.deadline = deadline / 1000 }
        if let memory = try r.int("memory_mb") { limits.memoryBytes = memory * 1024 * 1024 }
        if let closed = try r.bool("moderation_fail_closed") { limits.moderationFailClosed = closed }
        if let share = try r.double("timer_share") {
            guard share >= 0, share <= 1 else { throw r.error("timer_share", "must be between 0 and 1") }
            limits.timerShare = share
        }
        if let keys = try r.int("state_max_keys") {
            guard keys >= 1 else { throw r.error("state_max_keys", "must be at least 1") }
            stateQuota.keys = keys
        }
        if let megabytes = try r.int("state_max_mb") {
            guard megabytes >= 1 else { throw r.error("state_max_mb", "must be at least 1") }
            stateQuota.bytes = megabytes << 20
        }
        // The text matcher's caps (ctx.matcher, ctx.text), range-checked by TextMatcherLimits.
        for setting in TextMatcherLimits.settings {
            guard let value = try r.int(setting.key) else { continue }
            if let problem = limits.matcher.set(setting.key, value) { throw r.error(setting.key, problem) }
        }
        for (name, value) in r.remaining() {
            guard value.objectValue != nil else { throw r.error(name, "must be a table") }
            config[name] = value
        }
    }
}

extension HTTPPolicy {
    /// Reads one `[http.<plugin>]` table: the hosts the plugin may call with `ctx.http`, and its caps.
    public init(reading r: inout ConfigTableReader) throws {
        self.init()
        if let list = r.value("hosts") {
            guard let hosts = list.arrayValue?.compactMap(\.stringValue), hosts.count == list.arrayValue?.count else {
                throw r.error("hosts", "must be a list of hosts (\"api.example.org\" or \"host:port\")")
            }
            self.hosts = Set(hosts.map { $0.lowercased() })
        }
        if let timeout = try r.int("timeout_ms") {
            guard timeout > 0 else { throw r.error("timeout_ms", "must be positive") }
            timeoutCap = Double(timeout) / 1000
        }
        if let kilobytes = try r.int("max_kb") {
            guard kilobytes > 0 else { throw r.error("max_kb", "must be positive") }
            maxBytes = kilobytes << 10
        }
        if let concurrency = try r.int("concurrency") {
            guard concurrency > 0 else { throw r.error("concurrency", "must be positive") }
            self.concurrency = concurrency
        }
        try r.finish()
    }
}
