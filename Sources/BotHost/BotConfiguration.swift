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
    /// SQLite file of plugin state and the translation cache.
    public var statePath = "hookbot-state.sqlite"
    /// `[plugins]`: where the plugins are, hot reload, their limits and state quota, and `[plugins.<name>]`.
    public var plugins = PluginsSettings()
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
    /// `[server]`: the embedded server (used when no `--server` is given).
    public var server = ServerSettings()
    /// The browser console and its admin API (`[console]`).
    public var console = ConsoleSettings()
    /// The file this configuration was read from (to locate keys in errors found later), if any.
    public var file: ConfigFile?
    /// Plugin settings changed in the console (`hookbot.overrides.toml`), already applied to `plugins.config`
    /// by `load(path:)`; its `path` is where the console's config editor writes.
    public var overrides = ConfigOverrides()
    /// The prefix of chat commands (`[bot] command_prefix`) and the roles of `[roles]`.
    public var commands = ChatCommandSettings()
    /// `[webhooks]`: plugin name → the secret its webhook (`POST /hooks/<plugin>/…`) requires.
    public var webhooks = PluginWebhookSettings()
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
        let deadline = server.interceptionDeadlineMillis
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
        if server.interceptionDeadlineMillis < Self.minimumInterceptionDeadlineMillis {
            throw ConfigurationError(
                message: """
                    server.interception_deadline_ms is \(server.interceptionDeadlineMillis); it must be at least \
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
        let overrides = config.console.overrides.map { SettingValues.path($0, relativeTo: base) }
        config.overrides = try ConfigOverrides.read(
            path: (overrides ?? base.appendingPathComponent(ConfigOverrides.defaultFileName)).path)
        config.plugins.config = config.overrides.applied(to: config.plugins.config)
        return config
    }

    /// Parses TOML text; `fileName` is how errors name the file.
    public static func parse(
        _ text: String, relativeTo base: URL = URL(fileURLWithPath: "."),
        fileName: String = "hookbot.toml"
    ) throws -> BotConfiguration {
        let file = try ConfigFile(text: text, name: fileName)
        var config = BotConfiguration()
        config.file = file
        var reader = ConfigTableReader(root: file.root, path: "", file: file, base: base)
        // Each section is read by its own type (or, for `[bot]`, this one), with a reader that knows the
        // section's path: errors name the file, line and key, and unknown keys are refused.
        func section(_ name: String) throws -> ConfigTableReader? {
            try reader.table(name).map { ConfigTableReader(root: $0, path: name, file: file, base: base) }
        }
        if var r = try section("bot") { try config.read(bot: &r) }
        if var r = try section("plugins") { config.plugins = try PluginsSettings(reading: &r) }
        if var r = try section("translate") { try config.read(translate: &r) }
        if var r = try section("server") { config.server = try ServerSettings(reading: &r) }
        if let http = try reader.table("http") {
            for (plugin, table) in http.sorted(by: { $0.key < $1.key }) {
                guard let settings = table.objectValue else { throw file.error("http.\(plugin)", "must be a table") }
                var r = ConfigTableReader(root: settings, path: "http.\(plugin)", file: file, base: base)
                config.httpPolicies[plugin] = try HTTPPolicy(reading: &r)
            }
        }
        if let push = try reader.table("push") {
            config.push = try PushSettings.parse(push, file: file, base: base)
        }
        if var r = try section("webhooks") { config.webhooks = try PluginWebhookSettings(reading: &r) }
        if var r = try section("roles") { try config.read(roles: &r) }
        if var r = try section("console") { config.console = try ConsoleSettings(reading: &r) }
        try reader.finish()
        return config
    }

    /// Reads `[translate]`: conversation id (or name) → the language its messages are translated to.
    private mutating func read(translate r: inout ConfigTableReader) throws {
        for (conversation, language) in r.remaining() {
            guard let language = language.stringValue else { throw r.error(conversation, "must be a language code") }
            translateTo[conversation] = language
        }
    }

    /// Reads `[roles]`: role → the client ids that have it (for chat commands that need a role).
    private mutating func read(roles r: inout ConfigTableReader) throws {
        for (role, members) in r.remaining() {
            guard let list = members.arrayValue?.compactMap(\.stringValue), list.count == members.arrayValue?.count else {
                throw r.error(role, "must be a list of client ids")
            }
            commands.roles[role] = list
        }
    }

    /// Reads `[bot]`: the bot's own settings.
    private mutating func read(bot r: inout ConfigTableReader) throws {
        clientID = try r.string("client_id") ?? clientID
        tag = try r.string("tag") ?? tag
        acceptInvitations = try r.bool("accept_invitations") ?? acceptInvitations
        statePath = try r.path("state") ?? statePath
        replyLimit = try r.int("reply_limit") ?? replyLimit
        globalReplyLimit = try r.int("global_reply_limit") ?? globalReplyLimit
        sendsPerEvent = try r.int("sends_per_event") ?? sendsPerEvent
        replyWindow = try r.double("reply_window_seconds") ?? replyWindow
        maxHops = try r.int("max_hops") ?? maxHops
        interceptorSecret = try r.secret("interceptor_secret") ?? interceptorSecret
        appID = try r.string("app_id") ?? appID
        masterKey = try r.secret("master_key") ?? masterKey
        appKey = try r.secret("app_key") ?? appKey
        adminSocketPath = try r.string("admin_socket") ?? adminSocketPath
        if let locale = try r.string("locale") {
            guard let tag = LocaleTag.normalise(locale) else {
                throw r.error("locale", "'\(locale)' is not a locale tag (en, zh-CN, zh-Hant …)")
            }
            self.locale = tag
        }
        if let prefix = try r.string("command_prefix") {
            guard !prefix.isEmpty, prefix.count <= 4, !prefix.contains(where: \.isWhitespace) else {
                throw r.error("command_prefix", "must be 1–4 characters without spaces")
            }
            commands.prefix = prefix
        }
        try r.finish()
    }
}
