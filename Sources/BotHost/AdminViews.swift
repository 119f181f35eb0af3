import HookRuntime

// The admin answers the console's HTTP API (docs/CONSOLE.md, "Admin API") and the admin socket (`hookbot
// plugins`, `hookbot reload`, `hookbot plugins --stats`; AdminSocket.swift) both give, written once.

extension BotHost {
    /// `GET /api/plugins` and the admin socket's `plugins`.
    public func pluginViews() async -> [PluginView] { await runtime.plugins.map(PluginView.init) }

    /// `POST /api/plugins/reload` and the admin socket's `reload`: every plugin reloaded.
    public func reloadView() async -> ReloadView { ReloadView(await reload()) }
}

/// A plugin as `GET /api/plugins` and `hookbot plugins` show it.
public struct PluginView: Encodable, Sendable {
    public struct ErrorView: Encodable, Sendable {
        var hook: String
        var source: String?
        var line: Int?
        var reason: String
        var description: String

        public init(_ error: HookError) {
            hook = error.hook
            source = error.source
            line = error.line
            reason = error.message
            description = error.description
        }
    }

    var name: String
    var path: String
    var state: String
    var disabledBy: String?
    var priority: Int
    var generation: Int
    var timers: Int
    var memoryBytes: Int
    var consecutiveFailures: Int
    var totalFailures: Int
    var breakerTrips: Int
    /// `ctx.http` calls: started, failed, refused by the policy, in flight.
    var http: [String: Int]
    var lastError: ErrorView?
    /// Every hook the plugin defines, with its usage (zero when never called).
    var hooks: [HookUsage]

    public init(_ status: PluginStatus) {
        name = status.name
        path = status.path
        state = status.state.rawValue
        disabledBy = status.disabledBy?.rawValue
        priority = status.priority
        generation = status.generation
        timers = status.timers
        memoryBytes = status.memoryBytes
        consecutiveFailures = status.consecutiveFailures
        totalFailures = status.totalFailures
        breakerTrips = status.breakerTrips
        http = [
            "started": status.http.started, "failed": status.http.failed, "refused": status.http.refused,
            "inFlight": status.http.inFlight,
        ]
        lastError = status.lastError.map(ErrorView.init)
        let used = Dictionary(status.usage.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let names = status.hooks + status.usage.map(\.name).filter { !status.hooks.contains($0) }
        hooks = names.map { used[$0] ?? HookUsage(name: $0) }
    }
}

/// What a reload did, as `POST /api/plugins/reload` and `hookbot reload` show it.
public struct ReloadView: Encodable, Sendable {
    var loaded: [String]
    var reloaded: [String]
    var unloaded: [String]
    var errors: [PluginView.ErrorView]

    public init(_ report: ReloadReport) {
        loaded = report.loaded
        reloaded = report.reloaded
        unloaded = report.unloaded
        errors = report.errors.map(PluginView.ErrorView.init)
    }
}
