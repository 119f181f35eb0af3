import BotRouting
import Foundation
import HookRuntime
@_exported import HookbotConfig
import IMCore

/// Settings of a bot host, usually read from `hookbot.toml`.
public struct BotConfiguration: Sendable {
    /// The client id the bot logs in as (tag `bot`, forced).
    public var clientID = "modbot"
    /// `[bot] locale`: the plugins' language (`ctx.t`) for members and conversations that chose none.
    public var locale = "en"
    public var tag = "bot"
    /// Stay in conversations the bot is invited to; when false the bot quits them.
    public var acceptInvitations = true
    public var pluginsDirectory = URL(fileURLWithPath: "plugins")
    /// SQLite file of plugin state and the translation cache.
    public var statePath = "hookbot-state.sqlite"
    /// Per-plugin configuration (plugin name → table), visible to plugins as `ctx.config`.
    public var pluginConfig: [String: JSONValue] = [:]
    /// Target language per conversation id (or name); messages there are translated before `on_receive`.
    public var translateTo: [String: String] = [:]
    /// At most this many bot messages per conversation per `replyWindow` seconds (loop guard).
    public var replyLimit = 30
    public var replyWindow: Double = 10
    /// At most this many bot messages in all conversations together per `replyWindow` seconds.
    public var globalReplyLimit = 3000
    /// At most this many messages (and cmd messages) the plugins may send in answer to one event.
    public var sendsPerEvent = 10
    /// Messages carrying a hop count of at least this many bot replies are not answered (loop guard).
    public var maxHops = 3
    /// Poll the plugins directory this often for hot reload (seconds); 0 disables watching.
    public var watchInterval: Double = 1
    public var limits = HookLimits.default
    /// How much persistent state each plugin may keep.
    public var stateQuota = HookStateStore.Quota()
    /// The secret the bot signs its login with when it is the server's interceptor.
    public var interceptorSecret: String?
    /// The app id and master key of a server that requires signatures: the bot signs its conversation
    /// actions with the key, and the embedded server (`hookbot run` without `--server`) requires
    /// signatures from every client.
    public var appID: String?
    public var masterKey: String?
    /// `[bot] app_key`: LeanCloud's app key, which the embedded server's storage API (`/1.1/fileTokens`) accepts.
    public var appKey: String?
    /// Unix socket for `hookbot reload` and `hookbot plugins`; nil disables it.
    public var adminSocketPath: String? = ".hookbot-admin.sock"
    /// Embedded server settings (used when no `--server` is given).
    public var serverHost = "127.0.0.1"
    public var serverPort = 8080
    public var serverDatabase = "hookbot.sqlite"
    /// `[server] database`: a PostgreSQL URL the embedded server keeps its state in instead of SQLite.
    public var serverDatabaseURL: String?
    /// `[server] media`: the directory of uploaded files (relative to the file); nil: `media` beside `db`.
    public var serverMedia: String?
    /// `[server] max_upload_mb`: largest uploaded file in MiB (100 by default).
    public var serverMaxUploadMB = 100
    /// The other media settings of `[server]`: quota, thumbnail limits and cache, public URL, signed URLs.
    public var serverMediaSettings = ServerMediaSettings()
    /// `[server] tls_cert` / `tls_key`: the embedded server speaks TLS with this certificate chain and key
    /// (PEM files, reloaded when they change); nil: plain `ws://`.
    public var serverTLSCertificate: String?
    public var serverTLSKey: String?
    /// `[server] synchronous = "full" | "normal"`: SQLite `synchronous=FULL` for the embedded server
    /// (false: `NORMAL`, which can lose the last transactions on a power loss, not on a process crash).
    public var serverSynchronousFull = true
    public var interceptionDeadlineMillis = 200
    public var failClosed = false
    /// Name of the conversation the embedded server creates for trying the bot.
    public var lobbyName = "lobby"
    /// How the bot reaches the embedded server.
    public var attachment = BotAttachment.inProcess
    /// The browser console and its admin API (`[console]`).
    public var console = ConsoleSettings()
    /// The file this configuration was read from (to locate keys in errors found later), if any.
    public var file: ConfigFile?
    /// Plugin settings changed in the console (`hookbot.overrides.toml`), already applied to `pluginConfig`
    /// by `load(path:)`; its `path` is where the console's config editor writes.
    public var overrides = ConfigOverrides()
    /// The prefix of chat commands (`[bot] command_prefix`) and the roles of `[roles]`.
    public var commands = CommandSettings()
    /// Plugin name → the secret its webhook (`POST /hooks/<plugin>/…`) requires (`[webhooks]`).
    public var webhookSecrets: [String: String] = [:]
    /// Largest webhook body accepted, in bytes (larger: 413).
    public var webhookMaxBytes = 1 << 20
    /// What each plugin may reach with `ctx.http` (`[http.<plugin>]`); unlisted plugins reach nothing.
    public var httpPolicies: [String: HTTPPolicy] = [:]
    /// Offline push (`[push]`, `[push.<provider>]`): the embedded server's providers, templates and queue.
    public var push = PushSettings()

    public init() {}

    /// The smallest interception deadline the bot host accepts: below it, no review could answer in time.
    public static let minimumInterceptionDeadlineMillis = 50

    /// How long one interception review (moderation and `before_send`) may run: the interception deadline
    /// less a margin of 20% (at least 20 ms) for queueing and the way back, so a verdict reaches the server
    /// before the server applies its failure policy. Hooks in a review get the smaller of their own
    /// deadline and the time left of this budget.
    public var reviewBudget: Duration {
        let deadline = interceptionDeadlineMillis
        let margin = max(20, deadline / 5)
        return .milliseconds(max(deadline - margin, 1))
    }

    /// What the routing core needs of these settings.
    public var routing: RoutingSettings {
        var settings = RoutingSettings(
            botID: clientID, intercepting: interceptorSecret != nil, maxHops: maxHops, replyLimit: replyLimit,
            globalReplyLimit: globalReplyLimit, replyWindow: replyWindow, sendsPerEvent: sendsPerEvent,
            translateTo: translateTo)
        // The server keeps and enforces mutes (ClientOutlet mutes there).
        settings.mutesOnServer = true
        return settings
    }

    /// Checks settings that only make sense together; throws a `ConfigurationError` naming the setting.
    public func validate() throws {
        if interceptionDeadlineMillis < Self.minimumInterceptionDeadlineMillis {
            throw ConfigurationError(
                message: """
                    server.interception_deadline_ms is \(interceptionDeadlineMillis); it must be at least \
                    \(Self.minimumInterceptionDeadlineMillis) so that moderation can answer before the failure policy applies
                    """)
        }
    }

    /// Reads a TOML configuration (see README, "Configuration"). Unknown keys are errors, so typos surface.
    public static func load(path: String) throws -> BotConfiguration {
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw ConfigurationError(message: "cannot read \(path): \(error.localizedDescription)")
        }
        let base = URL(fileURLWithPath: path).deletingLastPathComponent()
        var config = try parse(text, relativeTo: base, fileName: path)
        // The console's overrides, on top of the file (docs/CONSOLE.md, "Config editor").
        let overrides = config.console.overrides.map { Self.resolve($0, against: base) }
        config.overrides = try ConfigOverrides.read(
            path: (overrides ?? base.appendingPathComponent(ConfigOverrides.defaultFileName)).path)
        config.pluginConfig = config.overrides.applied(to: config.pluginConfig)
        return config
    }

    /// A secret from the configuration file: `env:NAME` reads the environment variable `NAME` (so the file
    /// itself need not hold the secret).
    static func expandingEnvironment(_ value: String) throws -> String {
        guard value.hasPrefix("env:") else { return value }
        let name = String(value.dropFirst(4))
        guard let secret = ProcessInfo.processInfo.environment[name], !secret.isEmpty else {
            throw ConfigurationError(message: "environment variable \(name) is not set")
        }
        return secret
    }

    /// A path from the configuration file: absolute as written, relative to the file's folder otherwise.
    static func resolve(_ path: String, against base: URL) -> URL {
        path.hasPrefix("/") ? URL(fileURLWithPath: path) : base.appendingPathComponent(path)
    }

    /// Parses TOML text; `fileName` is how errors name the file.
    public static func parse(
        _ text: String, relativeTo base: URL = URL(fileURLWithPath: "."),
        fileName: String = "hookbot.toml"
    ) throws -> BotConfiguration {
        let file = try ConfigFile(text: text, name: fileName)
        var config = BotConfiguration()
        config.file = file
        var reader = ConfigReader(root: file.root, path: "", file: file)
        if let bot = try reader.table("bot") {
            var r = ConfigReader(root: bot, path: "bot", file: file)
            config.clientID = try r.string("client_id") ?? config.clientID
            config.tag = try r.string("tag") ?? config.tag
            config.acceptInvitations = try r.bool("accept_invitations") ?? config.acceptInvitations
            config.statePath = try r.string("state").map { Self.resolve($0, against: base).path } ?? config.statePath
            config.replyLimit = try r.int("reply_limit") ?? config.replyLimit
            config.globalReplyLimit = try r.int("global_reply_limit") ?? config.globalReplyLimit
            config.sendsPerEvent = try r.int("sends_per_event") ?? config.sendsPerEvent
            config.replyWindow = try r.double("reply_window_seconds") ?? config.replyWindow
            config.maxHops = try r.int("max_hops") ?? config.maxHops
            config.interceptorSecret = try r.string("interceptor_secret").map(Self.expandingEnvironment) ?? config.interceptorSecret
            config.appID = try r.string("app_id") ?? config.appID
            config.masterKey = try r.string("master_key").map(Self.expandingEnvironment) ?? config.masterKey
            config.appKey = try r.string("app_key").map(Self.expandingEnvironment) ?? config.appKey
            config.adminSocketPath = try r.string("admin_socket") ?? config.adminSocketPath
            if let locale = try r.string("locale") {
                guard let tag = LocaleTag.normalise(locale) else {
                    throw file.error("bot.locale", "'\(locale)' is not a locale tag (en, zh-CN, zh-Hant …)")
                }
                config.locale = tag
            }
            if let prefix = try r.string("command_prefix") {
                guard !prefix.isEmpty, prefix.count <= 4, !prefix.contains(where: \.isWhitespace) else {
                    throw file.error("bot.command_prefix", "must be 1–4 characters without spaces")
                }
                config.commands.prefix = prefix
            }
            try r.finish()
        }
        if let plugins = try reader.table("plugins") {
            var r = ConfigReader(root: plugins, path: "plugins", file: file)
            config.pluginsDirectory = try r.string("directory").map { Self.resolve($0, against: base) } ?? config.pluginsDirectory
            config.watchInterval = try r.double("watch_interval_seconds") ?? config.watchInterval
            if let budget = try r.int("instruction_budget") { config.limits.instructionBudget = budget }
            if let deadline = try r.double("deadline_ms") { config.limits.deadline = deadline / 1000 }
            if let memory = try r.int("memory_mb") { config.limits.memoryBytes = memory * 1024 * 1024 }
            if let closed = try r.bool("moderation_fail_closed") { config.limits.moderationFailClosed = closed }
            if let share = try r.double("timer_share") {
                guard share >= 0, share <= 1 else { throw file.error("plugins.timer_share", "must be between 0 and 1") }
                config.limits.timerShare = share
            }
            if let keys = try r.int("state_max_keys") {
                guard keys >= 1 else { throw file.error("plugins.state_max_keys", "must be at least 1") }
                config.stateQuota.keys = keys
            }
            if let megabytes = try r.int("state_max_mb") {
                guard megabytes >= 1 else { throw file.error("plugins.state_max_mb", "must be at least 1") }
                config.stateQuota.bytes = megabytes << 20
            }
            // The text matcher's caps (ctx.matcher, ctx.text), range-checked by TextMatcherLimits.
            for setting in TextMatcherLimits.settings {
                guard let value = try r.int(setting.key) else { continue }
                if let problem = config.limits.matcher.set(setting.key, value) {
                    throw file.error("plugins.\(setting.key)", problem)
                }
            }
            for (name, value) in r.remaining() {
                guard value.objectValue != nil else { throw file.error("plugins.\(name)", "must be a table") }
                config.pluginConfig[name] = value
            }
        }
        if let translate = try reader.table("translate") {
            for (conversation, language) in translate {
                guard let language = language.stringValue else {
                    throw file.error("translate.\(conversation)", "must be a language code")
                }
                config.translateTo[conversation] = language
            }
        }
        if let server = try reader.table("server") {
            var r = ConfigReader(root: server, path: "server", file: file)
            config.serverHost = try r.string("host") ?? config.serverHost
            config.serverPort = try r.int("port") ?? config.serverPort
            config.serverDatabase = try r.string("db").map { Self.resolve($0, against: base).path } ?? config.serverDatabase
            if let url = try r.string("database") {
                let resolved = try Self.expandingEnvironment(url)
                guard resolved.hasPrefix("postgres://") || resolved.hasPrefix("postgresql://") else {
                    throw file.error("server.database", "must be a postgres:// URL (server.db names a SQLite file)")
                }
                config.serverDatabaseURL = resolved
            }
            config.serverMedia = try r.string("media").map { Self.resolve($0, against: base).path } ?? config.serverMedia
            if let megabytes = try r.int("max_upload_mb") {
                guard megabytes >= 1 else { throw file.error("server.max_upload_mb", "must be at least 1") }
                config.serverMaxUploadMB = megabytes
            }
            try config.serverMediaSettings.read(&r, file: file)
            config.serverTLSCertificate = try r.string("tls_cert").map { Self.resolve($0, against: base).path }
            config.serverTLSKey = try r.string("tls_key").map { Self.resolve($0, against: base).path }
            if (config.serverTLSCertificate == nil) != (config.serverTLSKey == nil) {
                throw file.error(config.serverTLSKey == nil ? "server.tls_cert" : "server.tls_key", "tls_cert and tls_key go together")
            }
            config.interceptionDeadlineMillis = try r.int("interception_deadline_ms") ?? config.interceptionDeadlineMillis
            if let policy = try r.string("interception_policy") {
                guard ["open", "closed"].contains(policy) else {
                    throw file.error("server.interception_policy", "must be \"open\" or \"closed\"")
                }
                config.failClosed = policy == "closed"
            }
            config.lobbyName = try r.string("lobby") ?? config.lobbyName
            if let level = try r.string("synchronous") {
                guard ["full", "normal"].contains(level.lowercased()) else {
                    throw file.error("server.synchronous", "must be \"full\" or \"normal\"")
                }
                config.serverSynchronousFull = level.lowercased() == "full"
            }
            if let attachment = try r.string("bot_attachment") {
                guard let value = BotAttachment(rawValue: attachment) else {
                    throw file.error("server.bot_attachment", "must be \"in-process\" or \"websocket\"")
                }
                config.attachment = value
            }
            try r.finish()
        }
        if let http = try reader.table("http") {
            for (plugin, table) in http.sorted(by: { $0.key < $1.key }) {
                guard let settings = table.objectValue else { throw file.error("http.\(plugin)", "must be a table") }
                var r = ConfigReader(root: settings, path: "http.\(plugin)", file: file)
                var policy = HTTPPolicy()
                if let hosts = r.value("hosts") {
                    guard let list = hosts.arrayValue?.compactMap(\.stringValue), list.count == hosts.arrayValue?.count else {
                        throw file.error("http.\(plugin).hosts", "must be a list of hosts (\"api.example.org\" or \"host:port\")")
                    }
                    policy.hosts = Set(list.map { $0.lowercased() })
                }
                if let timeout = try r.int("timeout_ms") {
                    guard timeout > 0 else { throw file.error("http.\(plugin).timeout_ms", "must be positive") }
                    policy.timeoutCap = Double(timeout) / 1000
                }
                if let kilobytes = try r.int("max_kb") {
                    guard kilobytes > 0 else { throw file.error("http.\(plugin).max_kb", "must be positive") }
                    policy.maxBytes = kilobytes << 10
                }
                if let concurrency = try r.int("concurrency") {
                    guard concurrency > 0 else { throw file.error("http.\(plugin).concurrency", "must be positive") }
                    policy.concurrency = concurrency
                }
                try r.finish()
                config.httpPolicies[plugin] = policy
            }
        }
        if let push = try reader.table("push") {
            config.push = try PushSettings.parse(push, file: file, base: base)
        }
        if let webhooks = try reader.table("webhooks") {
            for (plugin, secret) in webhooks.sorted(by: { $0.key < $1.key }) {
                guard let text = secret.stringValue else { throw file.error("webhooks.\(plugin)", "must be a secret (a string)") }
                let expanded = try Self.expandingEnvironment(text)
                guard expanded.utf8.count >= 16 else { throw file.error("webhooks.\(plugin)", "must be at least 16 characters") }
                config.webhookSecrets[plugin] = expanded
            }
        }
        if let roles = try reader.table("roles") {
            for (role, members) in roles.sorted(by: { $0.key < $1.key }) {
                guard let list = members.arrayValue?.compactMap(\.stringValue), list.count == members.arrayValue?.count else {
                    throw file.error("roles.\(role)", "must be a list of client ids")
                }
                config.commands.roles[role] = list
            }
        }
        if let console = try reader.table("console") {
            var r = ConfigReader(root: console, path: "console", file: file)
            config.console.enabled = try r.bool("enabled") ?? config.console.enabled
            if let token = try r.string("token").map(Self.expandingEnvironment) {
                guard token.utf8.count >= 16 else {
                    throw file.error("console.token", "must be at least 16 characters")
                }
                config.console.token = token
            }
            config.console.host = try r.string("host") ?? config.console.host
            config.console.port = try r.int("port") ?? config.console.port
            config.console.overrides = try r.string("overrides") ?? config.console.overrides
            try r.finish()
        }
        try reader.finish()
        return config
    }
}

/// Where and how `hookbot run` serves the browser console and its admin API (docs/CONSOLE.md).
public struct ConsoleSettings: Sendable {
    /// False: no console and no admin API (metrics and health stay).
    public var enabled = true
    /// The admin token; nil: a new one at every start.
    public var token: String?
    /// Where a bot of a remote server serves them (with the embedded server they share its host and port).
    public var host = "127.0.0.1"
    public var port = 8090
    /// Where the config editor keeps its changes (relative to the configuration file); nil:
    /// `hookbot.overrides.toml` beside it.
    public var overrides: String?

    public init() {}
}

/// How a bot host talks to a server in the same process.
public enum BotAttachment: String, Sendable, CaseIterable {
    /// Commands cross as values and interception requests as direct calls (the default).
    case inProcess = "in-process"
    /// A WebSocket on loopback with JSON frames, exactly as a bot on another machine.
    case webSocket = "websocket"
}

/// Reads typed values out of a TOML table and reports keys nobody read.
private struct ConfigReader {
    var root: [String: JSONValue]
    var path: String
    let file: ConfigFile
    var read: Set<String> = []

    init(root: [String: JSONValue], path: String, file: ConfigFile) {
        self.root = root
        self.path = path
        self.file = file
    }

    fileprivate func keyPath(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    mutating func value(_ key: String) -> JSONValue? {
        read.insert(key)
        return root[key]
    }

    private func error(_ key: String, _ expected: String) -> ConfigurationError {
        file.error(keyPath(key), "must be \(expected)")
    }

    mutating func string(_ key: String) throws -> String? {
        guard let v = value(key) else { return nil }
        guard let s = v.stringValue else { throw error(key, "a string") }
        return s
    }

    mutating func int(_ key: String) throws -> Int? {
        guard let v = value(key) else { return nil }
        guard let i = v.intValue else { throw error(key, "an integer") }
        return Int(i)
    }

    mutating func double(_ key: String) throws -> Double? {
        guard let v = value(key) else { return nil }
        guard let d = v.doubleValue else { throw error(key, "a number") }
        return d
    }

    mutating func bool(_ key: String) throws -> Bool? {
        guard let v = value(key) else { return nil }
        guard let b = v.boolValue else { throw error(key, "true or false") }
        return b
    }

    mutating func table(_ key: String) throws -> [String: JSONValue]? {
        guard let v = value(key) else { return nil }
        guard let o = v.objectValue else { throw error(key, "a table") }
        return o
    }

    mutating func remaining() -> [(String, JSONValue)] {
        let rest = root.filter { !read.contains($0.key) }.sorted { $0.key < $1.key }
        read.formUnion(rest.map(\.0))
        return rest
    }

    func finish() throws {
        let unknown = root.keys.filter { !read.contains($0) }.sorted()
        if let first = unknown.first {
            let known = read.sorted().joined(separator: ", ")
            throw file.error(keyPath(first), path.isEmpty ? "unknown section (known: \(known))" : "unknown key (known: \(known))")
        }
    }
}

extension ServerMediaSettings {
    /// Reads the media keys of `[server]` (docs/MEDIA.md, "Settings"), each checked with the file, line and key.
    fileprivate mutating func read(_ r: inout ConfigReader, file: ConfigFile) throws {
        if let quota = try r.size("media_quota", allowingNone: true) { quotaBytes = quota == 0 ? nil : quota }
        if let pixels = try r.int("thumbnail_max_pixels") {
            guard pixels >= 1 else { throw file.error("server.thumbnail_max_pixels", "must be at least 1") }
            thumbnailMaxPixels = pixels
        }
        if let jobs = try r.int("thumbnail_jobs") {
            guard (1...256).contains(jobs) else { throw file.error("server.thumbnail_jobs", "must be between 1 and 256") }
            thumbnailJobs = jobs
        }
        if let queue = try r.int("thumbnail_queue") {
            guard queue >= 0 else { throw file.error("server.thumbnail_queue", "must be 0 or more") }
            thumbnailQueue = queue
        }
        if let timeout = try r.int("thumbnail_timeout_ms") {
            guard timeout >= 1 else { throw file.error("server.thumbnail_timeout_ms", "must be at least 1") }
            thumbnailTimeoutMillis = timeout
        }
        if let cache = try r.size("thumbnail_cache") { thumbnailCacheBytes = cache }
        if let url = try r.string("public_url") {
            switch SettingValues.publicURL(url) {
            case .success(let normalised): publicURL = normalised
            case .failure(let problem): throw file.error("server.public_url", "\(problem)")
            }
        }
        signedURLs = try r.bool("signed_urls") ?? signedURLs
        if let ttl = try r.int("url_ttl") {
            guard ttl >= 1 else { throw file.error("server.url_ttl", "must be at least 1 (seconds)") }
            urlTTL = ttl
        }
        if let grace = try r.duration("media_grace") { retentionGrace = grace }
        if let interval = try r.duration("media_gc_interval") { retentionInterval = interval }
        contentInDirectory = try r.bool("media_in_directory") ?? contentInDirectory
    }
}

extension ConfigReader {
    /// A duration: seconds (an integer) or a string such as `"24h"` (`SettingValues.duration`).
    fileprivate mutating func duration(_ key: String) throws -> Duration? {
        guard let v = value(key) else { return nil }
        if let integer = v.intValue, integer >= 0 { return .seconds(integer) }
        if let text = v.stringValue, let duration = SettingValues.duration(text) { return duration }
        throw file.error(keyPath(key), "must be seconds (0 or more) or a string such as \"30m\", \"24h\" or \"7d\"")
    }

    /// A byte size: an integer (bytes) or a string such as `"100 MiB"` (`SettingValues.byteSize`); with
    /// `allowingNone`, `"none"` is 0.
    fileprivate mutating func size(_ key: String, allowingNone: Bool = false) throws -> Int64? {
        guard let v = value(key) else { return nil }
        if let integer = v.intValue {
            guard integer >= 0 else { throw file.error(keyPath(key), "must be 0 or more") }
            return Int64(integer)
        }
        if let text = v.stringValue {
            if allowingNone, text.lowercased() == "none" { return 0 }
            if let bytes = SettingValues.byteSize(text) { return bytes }
        }
        let none = allowingNone ? ", or \"none\"" : ""
        throw file.error(keyPath(key), "must be a size: bytes (an integer) or a string such as \"100 MiB\" or \"2 GB\"\(none)")
    }
}
