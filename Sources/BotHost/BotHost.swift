import BotRouting
import CoreMetrics
import Foundation
import HookRuntime
import IMClient
import IMCore
import Logging
import NIOCore
import Synchronization

/// The bot host: logs in as a client id, hands everything that arrives to its routing core (`MessageRouter`,
/// shared with `hookbot test`), carries out the actions through the SDK, and answers the server's
/// interception requests.
public actor BotHost {
    public nonisolated let configuration: BotConfiguration
    public nonisolated let client: IMClient
    public nonisolated let runtime: PluginRuntime
    /// What the bot does with what arrives (moderation, translation, hooks, loop guard, rate limits, mutes).
    public nonisolated let router: MessageRouter
    let logger: Logger
    /// Counters; not actor state, so interception answers never wait for the actor.
    nonisolated let counters = BotCounters()
    /// How long one interception review may run: the server's deadline less a safety margin.
    nonisolated let reviewBudget: Duration
    /// The budget as the review's trace says it, formatted once (`Duration`'s description costs a tenth of a
    /// review on the Lua thread).
    nonisolated let reviewBudgetText: String
    nonisolated let metrics: BotMetrics
    /// The paths the last messages took (the console's trace view).
    public nonisolated let traces = MessageTraceStore.fromEnvironment()
    private var eventTask: Task<Void, Never>?
    /// In process: the client's events, routed by a task started per arrival (`routeArrivals`).
    private var eventQueue: IMEventQueue?
    private var routingArrivals = false
    private var routingTask: Task<Void, Never>?
    private var timerTask: Task<Void, Never>?
    /// Interception requests being answered over the WebSocket, so `stop()` can let them finish.
    /// Not actor state: the event task starts them without waiting for the Lua thread.
    private nonisolated let interceptions = Mutex<(next: Int, running: [Int: Task<Void, Never>])>((0, [:]))
    /// Where an in-process review's task starts (`answer`): the Lua loop; nil when the runtime's executor is not one.
    nonisolated let reviewStart: ReviewStart?

    /// Whether interception requests arrive as direct calls (in-process attachment) rather than as events.
    private let reviewsInProcess: Bool

    /// The Lua thread, as the plugin runtime's (and, made by `make`, the bot's client's): an event's way from
    /// the client through the routing and the hooks to the reply's way back into the client takes no hop. A
    /// caller on another executor hops onto it for the call and off it when the call returns (an actor with
    /// a custom executor is not given up in place, as a default actor is); so what only reads counters
    /// (`statistics`) is nonisolated, and waits for no hook.
    public nonisolated var unownedExecutor: UnownedSerialExecutor { runtime.unownedExecutor }

    public init(
        configuration: BotConfiguration, client: IMClient, runtime: PluginRuntime,
        logger: Logger = Logger(label: "hookbot.bot"), metrics: any MetricsFactory = NOOPMetricsHandler.instance
    ) {
        self.init(
            configuration: configuration, client: client, runtime: runtime, logger: logger, metrics: metrics,
            reviewsInProcess: false)
    }

    init(
        configuration: BotConfiguration, client: IMClient, runtime: PluginRuntime, logger: Logger,
        metrics: any MetricsFactory, reviewsInProcess: Bool
    ) {
        self.reviewsInProcess = reviewsInProcess
        self.metrics = BotMetrics(factory: metrics)
        self.configuration = configuration
        self.client = client
        self.runtime = runtime
        reviewStart = (runtime.executor as? any EventLoop).map(ReviewStart.init)
        self.logger = logger
        reviewBudget = configuration.reviewBudget
        reviewBudgetText = "\(configuration.reviewBudget)"
        let counters = counters
        let botMetrics = self.metrics
        let report: @Sendable (RoutingNote) -> Void = { note in
            counters.count(note)
            if case .actionFailed(let what, let cid, let plugin, let error) = note {
                botMetrics.failed(what)
                logger.warning(
                    "action failed",
                    metadata: [
                        "action": "\(what)", "cid": "\(cid)", "plugin": "\(plugin)",
                        "error": "\(error)",
                    ])
            }
        }
        router = MessageRouter(
            settings: configuration.routing, plugins: runtime,
            outlet: ClientOutlet(client: client, metrics: botMetrics, report: report, cardSent: Self.cardRecorder(runtime)),
            logger: logger, note: report)
    }

    /// A bot host for the server at `serverURL` (a WebSocket) with the client and runtime its configuration
    /// describes; it records its and its plugins' metrics into `metrics`.
    public static func make(
        configuration: BotConfiguration, serverURL: String,
        logger: Logger = Logger(label: "hookbot.bot"),
        metrics: any MetricsFactory = NOOPMetricsHandler.instance
    ) throws -> BotHost {
        try make(configuration: configuration, options: IMClientOptions(url: serverURL), logger: logger, metrics: metrics)
            .lookingAtFiles(on: serverURL)
    }

    /// A bot host attached to a server in the same process: commands and interception requests cross as
    /// values and direct calls, with no socket and no encoding.
    public static func make(
        configuration: BotConfiguration, local endpoint: any LocalEndpoint,
        logger: Logger = Logger(label: "hookbot.bot"),
        metrics: any MetricsFactory = NOOPMetricsHandler.instance
    ) throws -> BotHost {
        try make(configuration: configuration, options: IMClientOptions(local: endpoint), logger: logger, metrics: metrics)
    }

    private static func make(
        configuration: BotConfiguration, options: IMClientOptions, logger: Logger,
        metrics: any MetricsFactory
    ) throws -> BotHost {
        try configuration.validate()
        var options = options
        if let secret = configuration.interceptorSecret {
            options.signatureProvider = SecretSignatureProvider(
                secret: secret, appID: configuration.appID ?? "hookbot", masterKey: configuration.masterKey)
        }
        let reviewer = Reviewer()
        let reviewsInProcess = options.localEndpoint != nil && configuration.interceptorSecret != nil
        if reviewsInProcess, let endpoint = options.localEndpoint {
            // Verdicts by callback (`HookAnswerer`): given on the Lua thread, applied there by the server.
            options.localEndpoint = AnsweringEndpoint(
                base: endpoint, answerer: { request, answer in reviewer.answer(request, then: answer) }, headsUp: { reviewer.headsUp() })
        }
        let store = try HookStateStore(path: configuration.statePath, quota: configuration.plugins.stateQuota)
        var pluginLogger = logger
        pluginLogger[metadataKey: "component"] = "plugins"
        let runtime = PluginRuntime(
            directory: configuration.plugins.directory, store: store,
            config: configuration.plugins.config, limits: configuration.plugins.limits, logger: pluginLogger,
            botID: configuration.clientID, reach: ConversationReach(), metrics: metrics,
            configLocator: configuration.configLocator, commands: configuration.commands,
            http: AsyncHTTPTransport(), httpPolicies: configuration.httpPolicies)
        if options.localEndpoint != nil {
            // In process, the bot's client runs on the Lua thread with the host and the plugins (see
            // `unownedExecutor`): a delivery reaches the hooks and a reply the server with no hop. Over a
            // WebSocket it stays on Swift's pool, so that a verdict goes out while a hook runs.
            options.executor = runtime.executor
        }
        let client = IMClient(
            clientId: configuration.clientID, tag: configuration.tag,
            deviceId: "hookbot-\(configuration.clientID)", options: options, logger: logger)
        let host = BotHost(
            configuration: configuration, client: client, runtime: runtime, logger: logger,
            metrics: metrics, reviewsInProcess: reviewsInProcess)
        reviewer.host.withLock { $0.value = host }
        return host
    }

    /// The live counters. Nonisolated (the counters are not actor state): reading them never waits for the Lua
    /// thread, whatever a hook is doing there.
    public nonisolated var statistics: BotStats { get async { counters.snapshot } }

    /// Loads the plugins, logs in (forced, so a restarted bot takes over its tag), and starts routing,
    /// hot reload and timers.
    public func start() async throws {
        router.mutes.load()
        await runtime.setDefaultLocale(configuration.locale)
        let report = await runtime.loadAll()
        // A setting no plugin takes would be silently ignored: refuse to start instead.
        let problems = configuration.problems(after: report, plugins: await runtime.plugins)
        if !problems.isEmpty {
            await runtime.shutdown()
            throw ConfigurationProblems(errors: problems)
        }
        let router = router
        await runtime.onAsyncResults { result in await router.finish(result) }
        // Events are routed on the Lua thread, this actor's executor, not with it as the tasks' preferred
        // executor: default actors entered from such a task run there, with every other task that calls them
        // at that moment, which then keep running on the Lua thread (an event loop) after they leave (issue
        // 30, tried and not kept).
        if reviewsInProcess {
            // Interception requests are direct calls that never enter the event stream: route in order. The client
            // emits on the Lua thread, this host's executor too: each arrival starts the routing there, as a task
            // isolated to the host (enqueued on the Lua loop directly; a task waiting in `next()` would be resumed
            // through Swift's pool first), one at a time, in order.
            let queue = client.eventQueue()
            eventQueue = queue
            let host = Weak(self)
            let loop = runtime.executor as? any EventLoop
            queue.onArrival {
                guard let bot = host.value else { return }
                if loop?.inEventLoop == true {
                    bot.assumeIsolated { $0.routeArrivals() }
                } else {
                    Task { await bot.routeArrivals() }
                }
            }
        } else {
            let events = client.events()
            // Interception requests are answered as they arrive; everything else is routed in order, on a
            // task of its own, so that a slow hook never holds up a verdict.
            let (routed, routing) = AsyncStream<IMEvent>.makeStream()
            eventTask = Task { [weak self] in
                for await event in events {
                    guard let self else { break }
                    if case .unhandled(let command) = event, command.cmd == .hook, command.op == .request {
                        self.answerRemotely(command)
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
        try await logIn()
        await refreshReach()
        // What loading asked for (on_load's messages, members told that their dialogs ended with the last
        // run) goes out once the bot is logged in and knows its conversations.
        await router.finish(HookResult(actions: report.actions))
        if configuration.plugins.watchInterval > 0 {
            await runtime.startWatching(interval: configuration.plugins.watchInterval) { [weak self] report in
                await self?.afterReload(report)
            }
        }
        timerTask = runtime.startTimerDriver { result in await router.finish(result) }
        let pluginCount = await runtime.plugins.count
        logger.info("bot running", metadata: ["client": "\(configuration.clientID)", "plugins": "\(pluginCount)"])
    }

    /// Lists the conversations the bot is a member of, where its plugins may act (see `ConversationReach`).
    public func refreshReach() async {
        guard let reach = runtime.reach else { return }
        var conversations = Set<String>()
        do {
            while true {
                let page = try await conversationsWithMembers(
                    IMConversationQuery().whereMember(configuration.clientID), skip: conversations.count)
                conversations.formUnion(page.map(\.objectId))
                for conversation in page { learn(conversation) }
                if page.count < 1000 { break }
            }
            reach.replace(with: conversations)
        } catch {
            logger.error("could not list the bot's conversations", metadata: ["error": "\(error)"])
        }
    }

    /// A page of up to 1000 conversations matching `query`, each with its members' join times, roles and
    /// sent-message counts (`conv query` flag bit 4, `memberInfo`).
    private func conversationsWithMembers(_ query: IMConversationQuery, skip: Int = 0) async throws -> [ConversationInfo] {
        var command = Command(cmd: .conv, op: .query)
        command.where = query.whereJSON
        command.limit = 1000
        command.skip = skip
        command.flag = 4
        return try await client.send(command).results ?? []
    }

    /// Records a conversation's owner and what is known of its members (`ctx.conv(cid).member`).
    private func learn(_ conversation: ConversationInfo) {
        if let creator = conversation.c { router.setConversationRole("Owner", of: creator, in: conversation.objectId) }
        router.learn(conversation)
    }

    /// Asks the server for one conversation the bot just entered and records it (see `learn(_:)`).
    private func learnConversation(_ cid: String) async {
        do {
            let query = IMConversationQuery().whereKey("objectId", equalTo: .string(cid))
            if let conversation = try await conversationsWithMembers(query).first { learn(conversation) }
        } catch {
            logger.warning("could not read a conversation's members", metadata: ["cid": "\(cid)", "error": "\(error)"])
        }
    }

    /// Stops taking events, lets hooks in flight finish, unloads the plugins (`on_unload`) and logs out.
    public func stop() async {
        await runtime.stopWatching()
        timerTask?.cancel()
        for task in interceptions.withLock({ Array($0.running.values) }) { await task.value }
        await client.close()
        eventQueue?.finish()
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
        await router.finish(result)
        return response
    }

    /// Reloads one plugin (re-enabling it if it was disabled) and executes what its `on_load` returned.
    public func reload(plugin name: String) async -> ReloadReport {
        let report = await runtime.reload(name: name)
        await afterReload(report)
        return report
    }

    private func afterReload(_ report: ReloadReport) async {
        await router.finish(HookResult(actions: report.actions))
    }

    /// Answers an interception request that came over the WebSocket, off the actor (started at once, whatever
    /// a hook is doing on the Lua thread; the review waits there only for its own hook call).
    private nonisolated func answerRemotely(_ request: Command) {
        interceptions.withLock { interceptions in
            interceptions.next += 1
            let id = interceptions.next
            interceptions.running[id] = Task {
                let verdict = await self.verdict(for: request)
                do { try await self.client.sendWithoutReply(verdict) } catch {
                    self.logger.warning("could not answer an interception request", metadata: ["error": "\(error)"])
                }
                _ = self.interceptions.withLock { $0.running.removeValue(forKey: id) }
            }
        }
    }

    // MARK: Routing

    /// Starts routing what arrived on `eventQueue`, unless a routing task is at it (it takes what arrives meanwhile).
    private func routeArrivals() {
        guard !routingArrivals, let queue = eventQueue else { return }
        routingArrivals = true
        eventTask = Task { await self.routeQueued(queue) }
    }

    /// Routes the events of `queue` in order until none is left.
    private func routeQueued(_ queue: IMEventQueue) async {
        while let events = queue.take(), !events.isEmpty, !Task.isCancelled {
            for event in events { await route(event) }
        }
        routingArrivals = false
    }

    func route(_ event: IMEvent) async {
        logger.debug("event", metadata: ["event": "\(event)"])
        switch event {
        case .message(let message):
            let incoming = HookMapping.hookMessage(message)
            if message.isTransient {
                await router.transient(incoming)
            } else if message.from == configuration.clientID {
                await router.message(incoming)
            } else {
                await MessageTrace.$current.withValue(traces.delivered(incoming)) { await router.message(incoming) }
            }
        case .cmd(let cmd):
            await router.command(HookMapping.hookCommand(cmd))
        case .edited(let message):
            await router.event(.edited(HookMapping.hookMessage(message), editedAt: message.editedAt ?? 0))
        case .recalled(let message):
            await router.event(
                .recalled(
                    cid: message.conversationId, messageID: message.id, by: message.from,
                    timestamp: message.timestamp))
        case .membersJoined(let cid, let members, let by, let founding):
            if members.contains(configuration.clientID) { runtime.reach?.insert(cid) }
            await router.event(.membersJoined(cid: cid, members: members, by: by, founding: founding))
        case .membersLeft(let cid, let members, let by):
            if members.contains(configuration.clientID) { runtime.reach?.remove(cid) }
            await router.event(.membersLeft(cid: cid, members: members, by: by))
        case .invited(let cid, let by):
            if configuration.acceptInvitations {
                runtime.reach?.insert(cid)
                await learnConversation(cid)
            }
            await router.event(.invited(cid: cid, by: by))
            if !configuration.acceptInvitations {
                do { _ = try await client.conversation(cid).quit() } catch {
                    logger.warning("could not leave a conversation", metadata: ["cid": "\(cid)", "error": "\(error)"])
                }
            }
        case .joined(let cid, _):
            runtime.reach?.insert(cid)
            await learnConversation(cid)
        case .kicked(let cid, let by):
            runtime.reach?.remove(cid)
            await router.event(.kicked(cid: cid, by: by))
        case .conversationUpdated(let cid, let patch, let by, _):
            await router.event(.conversationUpdated(cid: cid, attrs: patch, by: by))
        case .membersMuted(let cid, let members, let by, let seconds, _) where by != configuration.clientID:
            // Mutes made by others (SDK clients, other bots): mirrored for ctx.conv(cid).muted().
            for member in members { try? router.mutes.mute(member, in: cid, for: seconds ?? MuteList.untilLifted) }
        case .membersUnmuted(let cid, let members, let by, _) where by != configuration.clientID:
            for member in members { try? router.mutes.mute(member, in: cid, for: 0) }
        case .memberRoleChanged(let cid, let member, let role, _):
            router.setConversationRole(role.rawValue, of: member, in: cid)
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

    /// Updates the counters.
    nonisolated func count(_ update: (inout BotStats) -> Void) {
        counters.update(update)
    }
}
