import CoreMetrics
import Foundation
import IMCore
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// The plugins of a running bot, on a thread of their own.
///
/// Every Lua call runs on one dedicated thread (a single-threaded NIO event loop serves as the actor's
/// executor), never on Swift's shared cooperative pool, so a slow hook delays only other Lua work and
/// callers simply `await` it. Calls run one at a time in the order they arrive; an event runs entirely
/// on one version of each plugin. The synchronous `PluginEngine` underneath does the work.
public actor PluginRuntime {
    public nonisolated let directory: URL
    public nonisolated let store: HookStateStore
    public nonisolated let limits: HookLimits
    public nonisolated let clock: HookClock
    private let engine: PluginEngine
    private let thread: LuaThread
    private var watcher: Task<Void, Never>?

    /// The conversations plugins may act in besides the current event's (kept by the host); nil: any.
    public nonisolated let reach: ConversationReach?
    /// The members of the bot's conversations, their join times, roles and message counts, and the
    /// conversations' locks, as the host knows them (`ctx.conv(cid).member`, `locked`).
    public nonisolated let members: ConversationMembers

    public nonisolated var unownedExecutor: UnownedSerialExecutor { thread.loop.executor.asUnownedSerialExecutor() }
    /// The serial executor every Lua call runs on (the Lua thread). The bot host and its SDK client run on it
    /// too, so that an event's way from the client through the routing to the hooks and the reply back into
    /// the client takes no hop.
    public nonisolated var executor: any SerialExecutor { thread.loop.executor }

    /// - Parameters:
    ///   - directory: the plugins directory (`*.lua` files, `name/init.lua` folders, `lib/` modules).
    ///   - store: state and translation cache.
    ///   - config: per-plugin configuration (plugin name → JSON object), visible as `ctx.config`.
    ///   - clock: "now" for timers and state TTLs.
    ///   - botID: the bot's client id, visible to plugins as `ctx.bot`.
    ///   - reach: the conversations actions may aim at besides the current event's (nil: any).
    ///   - metrics: where hook calls, failures, durations, breaker trips and loads are recorded.
    ///   - configLocator: where `config` was read from, so that configuration errors name file and line.
    ///   - commands: the command prefix and the roles of the host's configuration.
    ///   - http: performs the plugins' `ctx.http` calls (nil: they are refused); `httpPolicies` per plugin.
    ///   - media: where `msg.file` records and `ctx.media` look for stored files (also `setMedia`).
    public init(
        directory: URL, store: HookStateStore, config: [String: JSONValue] = [:],
        limits: HookLimits = .default, clock: HookClock = .system,
        logger: Logger = Logger(label: "hookbot.plugins"), botID: String? = nil, reach: ConversationReach? = nil,
        metrics: any MetricsFactory = NOOPMetricsHandler.instance, configLocator: ConfigLocator? = nil,
        commands: ChatCommandSettings = .init(), http: (any HookHTTPTransport)? = nil,
        httpPolicies: [String: HTTPPolicy] = [:], media: (any HookMediaSource)? = nil
    ) {
        let members = ConversationMembers()
        let engine = PluginEngine(
            directory: directory, store: store, config: config, limits: limits, clock: clock,
            logger: logger, botID: botID, reach: reach, members: members, metrics: metrics, configLocator: configLocator,
            commands: commands, httpPolicies: httpPolicies)
        self.reach = reach
        self.members = members
        self.engine = engine
        self.directory = engine.directory
        self.store = store
        self.limits = limits
        self.clock = clock
        thread = LuaThread()
        mediaSource = engine.env.media.box
        if let media { engine.setMedia(media) }
        if let http {
            // A call runs off the Lua thread; its callback comes back to it as one more call.
            let inFlight = httpInFlight
            engine.setHTTPStarter { [weak self] call in
                inFlight.started()
                Task {
                    let outcome = await http.perform(call)
                    await self?.finishHTTP(call, outcome)
                    inFlight.finished()
                }
            }
        }
    }

    /// Where `msg.file` records and `ctx.media` look for stored files.
    private nonisolated let mediaSource: MediaSourceBox

    /// Sets where `msg.file` records and `ctx.media` look for stored files (the server's media store in
    /// process, its HTTP API for a remote bot); nil: nowhere. Takes effect for the next hook call.
    public nonisolated func setMedia(_ source: (any HookMediaSource)?) {
        mediaSource.source.withLock { $0 = source }
    }

    private var asyncResults: (@Sendable (HookResult) async -> Void)?
    /// HTTP calls started and not yet finished (their callbacks and results included).
    private nonisolated let httpInFlight = InFlightCounter()

    /// Waits until every HTTP call started so far has finished, its callback has run and its result has
    /// been handed to `onAsyncResults` (what `hookbot test` does after each step).
    public nonisolated func waitForHTTPCalls() async { await httpInFlight.waitUntilNone() }

    /// Where the results of callbacks that run later (HTTP calls) go: the host executes their actions.
    public func onAsyncResults(_ handler: @escaping @Sendable (HookResult) async -> Void) { asyncResults = handler }

    private func finishHTTP(_ call: HookHTTPCall, _ outcome: HookHTTPOutcome) async {
        let result = engine.completeHTTP(call, outcome)
        if !result.actions.isEmpty || !result.errors.isEmpty { await asyncResults?(result) }
    }

    deinit {
        watcher?.cancel()
    }

    // MARK: Status

    /// Status of every known plugin (loaded, disabled, or failed to load).
    public var plugins: [PluginStatus] { engine.plugins }
    /// Custom message types registered by plugins.
    public var messageTypes: [CustomMessageType] { engine.messageTypes }
    /// The type name of a message type number (built-in or custom).
    public func typeName(of type: Int) -> String? { engine.typeName(of: type) }
    /// Replaces the per-plugin config; takes effect on the next (re)load.
    public func setConfig(_ config: [String: JSONValue]) { engine.setConfig(config) }
    /// Sets `[bot] locale`, the plugins' language (`ctx.t`) for members who chose none; false when not a tag.
    @discardableResult public func setDefaultLocale(_ tag: String) -> Bool { engine.setDefaultLocale(tag) }

    // MARK: Loading

    /// Loads every plugin of the directory.
    @discardableResult public func loadAll() -> ReloadReport { engine.loadAll() }
    /// Brings the loaded plugins in line with the directory (new, changed and deleted files).
    @discardableResult public func sync() -> ReloadReport { engine.sync() }
    /// Reloads one plugin even if unchanged (re-enabling it if the breaker had disabled it).
    @discardableResult public func reload(name: String) -> ReloadReport { engine.reload(name: name) }
    /// Reloads every plugin.
    @discardableResult public func reloadAll() -> ReloadReport { engine.reloadAll() }
    /// Unloads one plugin.
    @discardableResult public func unload(name: String) -> ReloadReport { engine.unload(name: name) }
    /// Stops calling a plugin until `enable(name:)` (also across reloads); false if it is not loaded.
    @discardableResult public func disable(name: String) -> Bool { engine.disable(name: name) }
    /// Calls a disabled plugin again; false if it is not loaded.
    @discardableResult public func enable(name: String) -> Bool { engine.enable(name: name) }

    /// Stops hot reload, unloads every plugin and lets go of the `onAsyncResults` handler.
    @discardableResult public func shutdown() -> ReloadReport {
        stopWatching()
        // The handler is the host's router, which holds this runtime: kept, the pair (and the host's client, its
        // Lua thread, its state files and, attached in process, the server) would never be freed.
        asyncResults = nil
        return engine.shutdown()
    }

    /// Polls the plugins directory every `interval` seconds and applies changes (`sync()`); `onChange`
    /// receives every non-empty report.
    public func startWatching(interval: Double = 1.0, onChange: (@Sendable (ReloadReport) async -> Void)? = nil) {
        watcher?.cancel()
        watcher = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(interval))
                guard !Task.isCancelled, let self else { return }
                let report = await self.sync()
                if !report.isEmpty { await onChange?(report) }
            }
        }
    }

    public func stopWatching() {
        watcher?.cancel()
        watcher = nil
    }

    // MARK: Hooks

    /// `moderation(msg, ctx)` chain; with `until`, no hook runs past that instant.
    public func moderate(_ message: HookMessage, until: ContinuousClock.Instant? = nil) -> ModerationOutcome {
        engine.moderate(message, until: until)
    }

    /// `membership(ev, ctx)` chain for a proposed membership change.
    public func reviewMembership(
        cid: String, by: String, members: [String], action: String,
        until: ContinuousClock.Instant? = nil
    ) -> ModerationOutcome {
        engine.reviewMembership(cid: cid, by: by, members: members, action: action, until: until)
    }

    /// `before_send(msg, ctx)` chain.
    public func beforeSend(_ message: HookMessage, until: ContinuousClock.Instant? = nil) -> BeforeSendOutcome {
        engine.beforeSend(message, until: until)
    }

    /// Moderation and, unless blocked, `before_send`, as one call (what an interception review runs).
    /// Nil when the review could not be done within `until`: it waited past it for the Lua thread, or a
    /// hook was cut off by it. Then nobody decided, and the caller should say so rather than guess.
    public func review(_ message: HookMessage, until: ContinuousClock.Instant? = nil)
        -> (moderation: ModerationOutcome, screened: BeforeSendOutcome?)?
    {
        func outOfTime(_ errors: [HookError]) -> Bool {
            guard let until, ContinuousClock.now >= until else { return false }
            return errors.contains { $0.reason == .deadline }
        }
        if let until, ContinuousClock.now >= until { return nil }
        let moderation = engine.moderate(message, until: until)
        if outOfTime(moderation.errors) { return nil }
        var current = message
        switch moderation.verdict {
        case .block: return (moderation, nil)
        case .replace(let text): current.text = text
        case .allow: break
        }
        let screened = engine.beforeSend(current, until: until)
        if outOfTime(screened.errors) { return nil }
        return (moderation, screened)
    }

    /// What `screen` decided about one of the bot's own messages.
    public struct Screening: Sendable {
        public var screened: BeforeSendOutcome
        public var moderation: ModerationOutcome?
    }

    /// `before_send` and, unless dropped, moderation, as one call (what the bot's own messages go through).
    public func screen(_ message: HookMessage) -> (screened: BeforeSendOutcome, moderation: ModerationOutcome?) {
        let screened = engine.beforeSend(message)
        guard let approved = screened.message else { return (screened, nil) }
        return (screened, engine.moderate(approved))
    }

    /// `on_receive(msg, ctx)` on every plugin.
    public func receive(_ message: HookMessage) -> HookResult { engine.receive(message) }
    /// The declared command `message` invokes, run alone (no `on_receive`); nil when it invokes none.
    public func runCommand(_ message: HookMessage) -> HookResult? { engine.consoleCommand(message) }
    /// A loaded plugin's settings: schema, defaults and what the host configures (the config editor's form).
    public func settings(of plugin: String) -> PluginSettings? { engine.settings(of: plugin) }

    /// `on_receive`, then `screen` for every message it asked to send (as `bot`), in the same call, so a
    /// reply costs one trip to the Lua thread. `screenings[i]` belongs to `result.actions[i]`.
    public func receiveAndScreen(_ message: HookMessage, as bot: String) -> (result: HookResult, screenings: [Int: Screening]) {
        let result = engine.receive(message)
        return (result, screenings(of: result.actions, as: bot))
    }

    /// `before_send` and moderation for each send action (what `screen` does), keyed by action index.
    private func screenings(of actions: [HookAction], as bot: String) -> [Int: Screening] {
        var screenings: [Int: Screening] = [:]
        for (index, action) in actions.enumerated() {
            let cid: String
            var outgoing: HookMessage
            switch action.kind {
            case .send(let to, let message, _), .sendTransient(let to, let message):
                cid = to
                outgoing = message
            default:
                continue
            }
            outgoing.cid = cid
            outgoing.from = bot
            let (screened, moderation) = screen(outgoing)
            screenings[index] = Screening(screened: screened, moderation: moderation)
        }
        return screenings
    }
    /// Moderation, then (unless blocked) `on_receive`, as one call.
    public func incoming(_ message: HookMessage) -> IncomingOutcome { engine.incoming(message) }
    /// `translate(text, from, to, ctx)` provider chain (cached per message id).
    public func translate(text: String, from: String?, to: String, messageID: String? = nil) -> TranslationOutcome {
        engine.translate(text: text, from: from, to: to, messageID: messageID)
    }
    /// `on_cmd(cmd, ctx)` on every plugin.
    public func command(_ cmd: HookCommand) -> HookResult { engine.command(cmd) }
    /// `on_transient(msg, ctx)` on every plugin.
    public func transient(_ message: HookMessage) -> HookResult { engine.transient(message) }
    /// Conversation events.
    public func handle(_ event: HookEvent) -> HookResult { engine.handle(event) }

    /// `on_offline(msg, receivers, ctx)` chain (docs/PLUGINS.md); with `until`, no hook runs past that instant.
    public func offline(_ message: HookMessage, receivers: [OfflineReceiver], until: ContinuousClock.Instant? = nil) -> OfflineOutcome {
        engine.offline(message, receivers: receivers, until: until)
    }
    /// `on_http` of one plugin (its webhook); nil when it has none.
    public func http(plugin: String, _ request: HookHTTPRequest) -> (response: HookHTTPResponse, result: HookResult)? {
        engine.http(plugin: plugin, request)
    }

    // MARK: Timers

    /// Number of live timers over all plugins.
    public var timerCount: Int { engine.timerCount }
    /// The earliest due time of any timer (in clock seconds).
    public var nextTimerDue: Double? { engine.nextTimerDue }
    /// Fires every timer due at `now` (default: the clock's now).
    public func fireDueTimers(now: Double? = nil) -> HookResult { engine.fireDueTimers(now: now) }
    /// The earliest time a `ctx.schedule` job of a running plugin is due.
    public var nextScheduleDue: Double? { engine.nextScheduleDue }
    /// Every plugin's `ctx.schedule` jobs (the console's list).
    public func schedules() -> [PluginSchedules] { engine.schedules() }
    /// Cancels a plugin's job; false when it has none with that id.
    public func cancelSchedule(plugin: String, id: String) throws -> Bool { try engine.cancelSchedule(plugin: plugin, id: id) }

    private func fireDueTimersAndPlan(maxInterval: Double) -> (HookResult, wait: Double) {
        let result = engine.fireDueTimers()
        var wait = maxInterval
        if let next = engine.nextTimerDue { wait = min(max(next - clock.now(), 0.001), maxInterval) }
        return (result, wait)
    }

    /// Fires due timers (checking at least every `maxInterval` seconds) and hands non-empty results to
    /// `handler`. Cancel the returned task to stop it.
    public nonisolated func startTimerDriver(
        maxInterval: Double = 0.25,
        handler: @escaping @Sendable (HookResult) async -> Void
    ) -> Task<Void, Never> {
        Task { [weak self] in
            while !Task.isCancelled {
                guard let self else { return }
                let (result, wait) = await self.fireDueTimersAndPlan(maxInterval: maxInterval)
                if !result.actions.isEmpty || !result.errors.isEmpty { await handler(result) }
                try? await Task.sleep(for: .seconds(wait))
            }
        }
    }
}

/// The one thread every Lua call runs on: a single-threaded NIO event loop, the serial executor of the runtime
/// (and of the bot host and its client). It is not offered as a task executor (`Task(executorPreference:)`):
/// default actors entered from such a task would run there, with the other tasks calling them, which then
/// stay on the Lua thread. Actors with it as their serial executor do not: a caller leaves it when the call
/// returns (Swift gives up a custom executor's thread only by hopping off it).
private final class LuaThread: Sendable {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let loop: any EventLoop

    init() { loop = group.next() }

    deinit { group.shutdownGracefully { _ in } }
}
