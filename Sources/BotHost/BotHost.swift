import CoreMetrics
import Foundation
import HookRuntime
import IMClient
import IMCore
import Logging
import Synchronization

/// Counters of a running bot host.
public struct BotStats: Sendable, Equatable, Encodable {
    public var messages = 0
    public var blocked = 0
    public var commands = 0
    public var transients = 0
    public var events = 0
    public var sent = 0
    public var dropped = 0
    public var rateLimited = 0
    public var verdicts = 0
    /// Interception requests answered with `none` because the review could not finish in time.
    public var undecided = 0
    public var actionErrors = 0
}

/// The bot host: logs in as a client id, routes everything that arrives to the plugins, executes the
/// actions they return through the SDK, and answers the server's interception requests.
///
/// Routing: typed and common messages → moderation → translation (when a target language is configured
/// for the conversation or requested in `attrs.translate`) → `on_receive`; cmd messages → `on_cmd`;
/// transient messages → `on_transient`; membership events, conversation updates and recalls → their hooks.
/// When the bot is the server's interceptor, moderation already ran before delivery, so delivered
/// messages go straight to translation and `on_receive`.
public actor BotHost {
    public nonisolated let configuration: BotConfiguration
    public nonisolated let client: IMClient
    public nonisolated let runtime: PluginRuntime
    let logger: Logger
    var loopGuard: LoopGuard
    /// Counters; a mutex rather than actor state so interception answers never wait for the actor.
    nonisolated let counters = Mutex(BotStats())
    /// Active mutes ("mute:<cid>:<user>" → until, seconds since 1970); see `mute(_:in:for:reason:)`.
    nonisolated let mutes = Mutex<[String: Double]>([:])
    /// How long one interception review may run: the server's deadline less a safety margin.
    nonisolated let reviewBudget: Duration
    nonisolated let metrics: BotMetrics
    private var eventTask: Task<Void, Never>?
    private var routingTask: Task<Void, Never>?
    private var timerTask: Task<Void, Never>?
    /// Interception requests being answered over the WebSocket, so `stop()` can let them finish.
    private var interceptions: [Int: Task<Void, Never>] = [:]
    private var nextInterception = 0

    /// Whether interception requests arrive as direct calls (in-process attachment) rather than as events.
    private let reviewsInProcess: Bool

    public init(configuration: BotConfiguration, client: IMClient, runtime: PluginRuntime,
                logger: Logger = Logger(label: "hookbot.bot"), metrics: any MetricsFactory = NOOPMetricsHandler.instance) {
        self.init(configuration: configuration, client: client, runtime: runtime, logger: logger, metrics: metrics,
                  reviewsInProcess: false)
    }

    init(configuration: BotConfiguration, client: IMClient, runtime: PluginRuntime, logger: Logger,
         metrics: any MetricsFactory, reviewsInProcess: Bool) {
        self.reviewsInProcess = reviewsInProcess
        self.metrics = BotMetrics(factory: metrics)
        self.configuration = configuration
        self.client = client
        self.runtime = runtime
        self.logger = logger
        reviewBudget = configuration.reviewBudget
        loopGuard = LoopGuard(limit: configuration.replyLimit, globalLimit: configuration.globalReplyLimit,
                              window: configuration.replyWindow, maxHops: configuration.maxHops)
    }

    /// A bot host for the server at `serverURL` (a WebSocket) with the client and runtime its configuration
    /// describes; it records its and its plugins' metrics into `metrics`.
    public static func make(configuration: BotConfiguration, serverURL: String,
                            logger: Logger = Logger(label: "hookbot.bot"),
                            metrics: any MetricsFactory = NOOPMetricsHandler.instance) throws -> BotHost {
        try make(configuration: configuration, options: IMClientOptions(url: serverURL), logger: logger, metrics: metrics)
    }

    /// A bot host attached to a server in the same process: commands and interception requests cross as
    /// values and direct calls, with no socket and no encoding.
    public static func make(configuration: BotConfiguration, local endpoint: any LocalEndpoint,
                            logger: Logger = Logger(label: "hookbot.bot"),
                            metrics: any MetricsFactory = NOOPMetricsHandler.instance) throws -> BotHost {
        try make(configuration: configuration, options: IMClientOptions(local: endpoint), logger: logger, metrics: metrics)
    }

    private static func make(configuration: BotConfiguration, options: IMClientOptions, logger: Logger,
                             metrics: any MetricsFactory) throws -> BotHost {
        try configuration.validate()
        var options = options
        if let secret = configuration.interceptorSecret {
            options.signatureProvider = SecretSignatureProvider(
                secret: secret, appID: configuration.appID ?? "hookbot", masterKey: configuration.masterKey)
        }
        let reviewer = Reviewer()
        let reviewsInProcess = options.localEndpoint != nil && configuration.interceptorSecret != nil
        if reviewsInProcess {
            options.interceptionHandler = { request in await reviewer.answer(request) }
        }
        let client = IMClient(clientId: configuration.clientID, tag: configuration.tag,
                              deviceId: "hookbot-\(configuration.clientID)", options: options, logger: logger)
        let store = try HookStateStore(path: configuration.statePath, quota: configuration.stateQuota)
        var pluginLogger = logger
        pluginLogger[metadataKey: "component"] = "plugins"
        let runtime = PluginRuntime(directory: configuration.pluginsDirectory, store: store,
                                    config: configuration.pluginConfig, limits: configuration.limits, logger: pluginLogger,
                                    botID: configuration.clientID, reach: ConversationReach(), metrics: metrics,
                                    configLocator: configuration.configLocator, commands: configuration.commands,
                                    http: AsyncHTTPTransport(), httpPolicies: configuration.httpPolicies)
        let host = BotHost(configuration: configuration, client: client, runtime: runtime, logger: logger,
                           metrics: metrics, reviewsInProcess: reviewsInProcess)
        reviewer.host.withLock { $0.host = host }
        return host
    }

    /// The live counters.
    public var statistics: BotStats { counters.withLock { $0 } }

    /// Loads the plugins, logs in (forced, so a restarted bot takes over its tag), and starts routing,
    /// hot reload and timers.
    public func start() async throws {
        loadMutes()
        let report = await runtime.loadAll()
        // A setting no plugin takes would be silently ignored: refuse to start instead.
        let problems = configuration.problems(after: report, plugins: await runtime.plugins)
        if !problems.isEmpty {
            await runtime.shutdown()
            throw ConfigurationProblems(errors: problems)
        }
        await execute(report.actions)
        await runtime.onAsyncResults { [weak self] result in await self?.finish(result, hook: "http") }
        let events = client.events()
        if reviewsInProcess {
            // Interception requests are direct calls that never enter the event stream: route in order.
            eventTask = Task { [weak self] in
                for await event in events {
                    guard let self else { return }
                    await self.route(event)
                }
            }
        } else {
            // Interception requests are answered as they arrive; everything else is routed in order, on a
            // task of its own, so that a slow hook never holds up a verdict.
            let (routed, routing) = AsyncStream<IMEvent>.makeStream()
            eventTask = Task { [weak self] in
                for await event in events {
                    guard let self else { break }
                    if case .unhandled(let command) = event, command.cmd == .hook, command.op == .request {
                        await self.answerRemotely(command)
                    } else {
                        routing.yield(event)
                    }
                }
                routing.finish()
            }
            routingTask = Task { [weak self] in
                for await event in routed {
                    guard let self else { return }
                    await self.route(event)
                }
            }
        }
        try await client.open(force: true)
        await refreshReach()
        if configuration.watchInterval > 0 {
            await runtime.startWatching(interval: configuration.watchInterval) { [weak self] report in
                await self?.afterReload(report)
            }
        }
        timerTask = runtime.startTimerDriver { [weak self] result in
            await self?.finish(result, hook: "timer")
        }
        let pluginCount = await runtime.plugins.count
        logger.info("bot running", metadata: ["client": "\(configuration.clientID)", "plugins": "\(pluginCount)"])
    }

    /// Lists the conversations the bot is a member of, where its plugins may act (see `ConversationReach`).
    public func refreshReach() async {
        guard let reach = runtime.reach else { return }
        var conversations = Set<String>()
        do {
            while true {
                let page = try await client.conversations(
                    matching: IMConversationQuery().whereMember(configuration.clientID).limit(1000).skip(conversations.count))
                conversations.formUnion(page.map(\.id))
                if page.count < 1000 { break }
            }
            reach.replace(with: conversations)
        } catch {
            logger.error("could not list the bot's conversations", metadata: ["error": "\(error)"])
        }
    }

    /// Stops taking events, lets hooks in flight finish, unloads the plugins (`on_unload`) and logs out.
    public func stop() async {
        await runtime.stopWatching()
        timerTask?.cancel()
        for task in interceptions.values { await task.value }
        await client.close()
        eventTask?.cancel()
        await eventTask?.value
        await routingTask?.value
        await runtime.shutdown()
        logger.info("bot stopped")
    }

    /// Reloads every plugin now (what `hookbot reload` does).
    public func reload() async -> ReloadReport {
        let report = await runtime.reloadAll()
        await afterReload(report)
        return report
    }

    /// Runs a plugin's webhook (`on_http`) and executes the actions it asked for; nil when the plugin has
    /// no `on_http` (or is not loaded or disabled).
    public func webhook(plugin: String, _ request: HookHTTPRequest) async -> HookHTTPResponse? {
        guard let (response, result) = await runtime.http(plugin: plugin, request) else { return nil }
        await finish(result, hook: "on_http")
        return response
    }

    /// Reloads one plugin (re-enabling it if it was disabled) and executes what its `on_load` returned.
    public func reload(plugin name: String) async -> ReloadReport {
        let report = await runtime.reload(name: name)
        await afterReload(report)
        return report
    }

    private func afterReload(_ report: ReloadReport) async {
        await execute(report.actions)
    }

    /// Answers an interception request that came over the WebSocket.
    private func answerRemotely(_ request: Command) {
        nextInterception += 1
        let id = nextInterception
        interceptions[id] = Task {
            let verdict = await self.verdict(for: request)
            do { try await self.client.sendWithoutReply(verdict) } catch {
                self.logger.warning("could not answer an interception request", metadata: ["error": "\(error)"])
            }
            self.interceptions[id] = nil
        }
    }

    // MARK: Routing

    func route(_ event: IMEvent) async {
        logger.debug("event", metadata: ["event": "\(event)"])
        switch event {
        case .message(let message):
            await receive(message)
        case .cmd(let cmd):
            guard cmd.from != configuration.clientID else { return }
            count { $0.commands += 1 }
            await finish(await runtime.command(HookMapping.hookCommand(cmd)), hook: "on_cmd")
        case .recalled(let message):
            await dispatch(.recalled(cid: message.conversationId, messageID: message.id, by: message.from, timestamp: message.timestamp))
        case .membersJoined(let cid, let members, let by):
            if members.contains(configuration.clientID) { runtime.reach?.insert(cid) }
            await dispatch(.membersJoined(cid: cid, members: members, by: by))
        case .membersLeft(let cid, let members, let by):
            if members.contains(configuration.clientID) { runtime.reach?.remove(cid) }
            await dispatch(.membersLeft(cid: cid, members: members, by: by))
        case .invited(let cid, let by):
            if configuration.acceptInvitations { runtime.reach?.insert(cid) }
            await dispatch(.invited(cid: cid, by: by))
            if !configuration.acceptInvitations { await run("quit", cid) { try await self.client.conversation(cid).quit() } }
        case .joined(let cid, _):
            runtime.reach?.insert(cid)
        case .kicked(let cid, let by):
            runtime.reach?.remove(cid)
            await dispatch(.kicked(cid: cid, by: by))
        case .conversationUpdated(let cid, let patch, let by, _):
            await dispatch(.conversationUpdated(cid: cid, attrs: HookMapping.hook(patch), by: by))
        case .kickedOffline(let error):
            logger.error("logged out by the server", metadata: ["error": "\(error)"])
        case .paused(let error):
            logger.warning("connection lost; reconnecting", metadata: ["error": "\(error.map { "\($0)" } ?? "")"])
        case .resumed:
            logger.info("reconnected")
            await refreshReach()
        default:
            break
        }
    }

    private func dispatch(_ event: HookEvent) async {
        count { $0.events += 1 }
        await finish(await runtime.handle(event), hook: "event")
    }

    private func receive(_ message: IMMessage) async {
        guard message.from != configuration.clientID else { return }
        let incoming = HookMapping.hookMessage(message)
        if message.isTransient {
            count { $0.transients += 1 }
            return await finish(await runtime.transient(incoming), hook: "on_transient")
        }
        count { $0.messages += 1 }
        let hops = incoming.attrs[LoopGuard.hopKey]?.intValue ?? 0
        guard loopGuard.mayAnswer(hops: hops) else {
            logger.debug("not answering: hop limit", metadata: ["cid": "\(message.conversationId)", "hops": "\(hops)"])
            return
        }
        let language = targetLanguage(for: incoming)
        if configuration.interceptorSecret == nil, language == nil {
            // Moderation and on_receive as one unit, so a reload cannot fall between them.
            let outcome = await runtime.incoming(incoming)
            if case .block = outcome.moderation.verdict { count { $0.blocked += 1 } }
            return await finish(HookResult(actions: outcome.actions, errors: outcome.errors), hook: "incoming", replyingTo: hops)
        }
        var delivered = incoming
        if configuration.interceptorSecret == nil {
            let moderation = await runtime.moderate(incoming)
            await finish(HookResult(actions: moderation.actions, errors: moderation.errors), hook: "moderation")
            switch moderation.verdict {
            case .block:
                count { $0.blocked += 1 }
                return
            case .replace(let text):
                delivered.text = text
            case .allow:
                break
            }
        }
        if let language, let text = delivered.text {
            let translation = await runtime.translate(text: text, from: nil, to: language, messageID: delivered.id)
            await finish(HookResult(actions: translation.actions, errors: translation.errors), hook: "translate")
            if let translated = translation.text {
                delivered.attrs["translation"] = .object(["to": .string(language), "text": .string(translated)])
            }
        }
        let (result, screenings) = await runtime.receiveAndScreen(delivered, as: configuration.clientID)
        await finish(result, hook: "on_receive", replyingTo: hops, screenings: screenings)
    }

    private func targetLanguage(for message: HookMessage) -> String? {
        if let requested = message.attrs["translate"]?.stringValue { return requested }
        return configuration.translateTo[message.cid]
    }

    /// Logs hook errors with the plugin's name and line, and executes the actions.
    func finish(_ result: HookResult, hook: String, replyingTo hops: Int = 0,
                screenings: [Int: PluginRuntime.Screening] = [:]) async {
        // The plugin runtime has logged each error already (with plugin, hook, script and line).
        await execute(result.actions, hops: hops + 1, screenings: screenings)
    }

    func run(_ what: String, _ cid: String, plugin: String? = nil, _ body: () async throws -> Void) async {
        metrics.executed(what)
        do { try await body() } catch { actionFailed(what, cid, plugin: plugin, error) }
    }

    /// Updates the counters.
    nonisolated func count(_ update: (inout BotStats) -> Void) {
        counters.withLock { update(&$0) }
    }

    /// Counts a failed action and logs it with the plugin that asked for it.
    nonisolated func actionFailed(_ what: String, _ cid: String, plugin: String?, _ error: any Error) {
        count { $0.actionErrors += 1 }
        metrics.failed(what)
        logger.warning("action failed", metadata: ["action": "\(what)", "cid": "\(cid)", "plugin": "\(plugin ?? "host")", "error": "\(error)"])
    }
}
