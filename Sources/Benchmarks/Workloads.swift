import BotHost
import BotHub
import Foundation
import IMClient
import IMCore
import IMServer
import Logging
import Synchronization

/// Runs the benchmark workloads against real servers, bots and WebSocket clients on loopback.
struct Bench {
    let scale: Double
    let relaxedSync: Bool
    /// Run the bot as a separate `hookbot run` process over WebSocket instead of attached in process.
    let remoteBot: Bool
    /// With a PostgreSQL URL, w1b and w3 run on `nodes` server nodes sharing that database (a new schema per
    /// workload): w3's members are spread over the nodes, w1b's user is on a node the bot is not on.
    let cluster: (url: String, nodes: Int)?
    let root: URL
    let logger: Logger

    /// Plugins of the benchmark bot: a ping → pong replier and a word filter.
    static let plugins = [
        "ping.lua": """
        return { name = "ping", on_receive = function(msg, ctx)
          local k = msg.text and msg.text:match("^ping (%d+)$")
          if k then ctx.reply("pong " .. k) end
        end }
        """,
        "filter.lua": """
        return { name = "filter", moderation = function(msg, ctx)
          if msg.text and msg.text:find("forbidden-word", 1, true) then
            return { verdict = "block", reason = "forbidden word" }
          end
        end }
        """,
    ]

    init(scale: Double, relaxedSync: Bool, remoteBot: Bool, cluster: (url: String, nodes: Int)? = nil) throws {
        self.scale = scale
        self.relaxedSync = relaxedSync
        self.remoteBot = remoteBot
        self.cluster = cluster
        root = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        var logger = Logger(label: "hookbot.bench")
        logger.logLevel = ProcessInfo.processInfo.environment["HOOKBOT_BENCH_LOG"].flatMap { Logger.Level(rawValue: $0) } ?? .critical
        self.logger = logger
    }

    // MARK: Setups

    private func directory(_ name: String) throws -> URL {
        let url = root.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// A schema of its own for a workload, on the cluster's database.
    private func schemaURL(_ name: String) -> String? {
        guard let cluster else { return nil }
        let schema = "bench_" + name.filter { $0.isLetter || $0.isNumber } + "_" + UUID().uuidString.prefix(8).lowercased()
        return cluster.url + (cluster.url.contains("?") ? "&" : "?") + "schema=" + schema
    }

    /// More nodes on the database `url`, with `interceptor` configured (the bot on the first node).
    private func extraNodes(url: String, count: Int, interceptor: InterceptionConfiguration.Interceptor?, deadline: Int)
        async throws -> [(server: IMServer, port: Int)]
    {
        var nodes: [(IMServer, Int)] = []
        for _ in 0..<count {
            var configuration = ServerConfiguration()
            configuration.port = 0
            configuration.databaseURL = url
            if let interceptor { configuration.interception.interceptors = [interceptor] }
            configuration.interception.deadlineMillis = deadline
            let server = try IMServer(configuration: configuration, logger: logger)
            nodes.append((server, try await server.start()))
        }
        return nodes
    }

    /// In a cluster, the nodes beside the bot's, which list the bot as their interceptor.
    private func otherNodes(beside hub: BenchHub) async throws -> [(server: IMServer, port: Int)] {
        guard let cluster, cluster.nodes > 1, let url = hub.server.configuration.databaseURL else { return [] }
        let interceptor = InterceptionConfiguration.Interceptor(
            clientID: hub.botID, secret: hub.server.configuration.interception.interceptors.first?.secret ?? "")
        return try await extraNodes(url: url, count: cluster.nodes - 1, interceptor: interceptor, deadline: 1000)
    }

    /// A server with the benchmark bot as its interceptor (in process, or a separate process).
    /// With `shippedModeration`, the bot also runs the shipped `moderation.lua` with its default rule set but flood (copied
    /// from the source tree with the modules, presets and locale files it reads), after the word filter.
    private func hub(_ name: String, shippedModeration: Bool = false) async throws -> BenchHub {
        let dir = try directory(name)
        let plugins = dir.appendingPathComponent("plugins")
        try FileManager.default.createDirectory(at: plugins, withIntermediateDirectories: true)
        for (file, source) in Self.plugins { try source.write(to: plugins.appendingPathComponent(file), atomically: true, encoding: .utf8) }
        var configuration = BotConfiguration()
        if shippedModeration {
            guard let shipped = HookBenchmark.shippedPlugins() else {
                throw BenchError(message: "w2: no plugins directory with the shipped moderation.lua found")
            }
            try HookBenchmark.copyShippedModeration(from: shipped, to: plugins)
            // Every default rule but flood: the benchmark's one sender sends a thousand messages a second, which is
            // what the flood rule exists to stop (it would block the run's messages, not measure them).
            configuration.plugins.config["moderation"] = ["moderators": ["alice"], "flood": false]
        }
        configuration.plugins.directory = plugins
        configuration.statePath = dir.appendingPathComponent("state.sqlite").path
        configuration.server.database = dir.appendingPathComponent("server.sqlite").path
        configuration.server.port = 0
        configuration.server.synchronousFull = !relaxedSync
        configuration.adminSocketPath = nil
        configuration.plugins.watchInterval = 0
        configuration.replyLimit = Int.max
        configuration.globalReplyLimit = Int.max
        configuration.sendsPerEvent = Int.max
        configuration.server.interceptionDeadlineMillis = 1000
        configuration.server.databaseURL = schemaURL(name)
        configuration.interceptorSecret = UUID().uuidString
        if remoteBot {
            var server = ServerConfiguration()
            server.port = 0
            server.databasePath = configuration.server.database
            server.synchronousFull = !relaxedSync
            return try await BenchHub.remote(
                configuration: configuration, directory: dir, serverConfiguration: server,
                logger: logger)
        }
        return .embedded(try await EmbeddedHub.start(configuration: configuration, logger: logger))
    }

    /// Servers without interceptors: one on SQLite, or the cluster's nodes on a fresh schema.
    private func plainServers(_ name: String) async throws -> [(server: IMServer, port: Int)] {
        if let cluster, let url = schemaURL(name) {
            return try await extraNodes(url: url, count: cluster.nodes, interceptor: nil, deadline: 200)
        }
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.databasePath = try directory(name).appendingPathComponent("server.sqlite").path
        configuration.synchronousFull = !relaxedSync
        let server = try IMServer(configuration: configuration, logger: logger)
        return [(server, try await server.start())]
    }

    private func client(_ id: String, port: Int) -> IMClient {
        var options = IMClientOptions(port: port)
        options.requestTimeout = .seconds(60)
        options.sendTimeout = .seconds(60)
        return IMClient(clientId: id, options: options, logger: logger)
    }

    // MARK: w1: ping → pong through the bot

    func pingPong(messages: Int, warmup: Int, inFlight: Int) async throws -> PingPongResult {
        let hub = try await hub("w1-\(inFlight)")
        return try await hub.whileRunning {
            // In a cluster, the user talks to another node: its messages are reviewed and answered across nodes.
            let others = try await otherNodes(beside: hub)
            return try await Self.stopping(others.map(\.server)) {
                for node in others {
                    for _ in 0..<200 where !node.server.isInterceptorAttached(hub.botID) { try await Task.sleep(for: .milliseconds(50)) }
                }
                return try await pingPong(
                    hub: hub, others: others, messages: messages, warmup: warmup, inFlight: inFlight)
            }
        }
    }

    /// Runs `body`, then stops `servers`, also when `body` throws (a `defer` cannot await their stop).
    static func stopping<T>(_ servers: [IMServer], _ body: () async throws -> T) async throws -> T {
        do {
            let result = try await body()
            for server in servers { await server.stop() }
            return result
        } catch {
            for server in servers { await server.stop() }
            throw error
        }
    }

    private func pingPong(
        hub: BenchHub, others: [(server: IMServer, port: Int)], messages: Int, warmup: Int, inFlight: Int
    ) async throws -> PingPongResult {
        let user = client("bench-user", port: others.first?.port ?? hub.port)
        let waiter = ReplyWaiter()
        let watchdog = waiter.watchdog()
        defer { watchdog.cancel() }
        let events = user.events()
        let listener = Task {
            for await event in events {
                if case .message(let message) = event, message.from == hub.botID,
                    let text = message.content.text, text.hasPrefix("pong "), let k = Int(text.dropFirst(5))
                {
                    waiter.arrived(k)
                }
            }
        }
        defer { listener.cancel() }
        try await user.open()
        let conversation = try await user.createConversation(members: [hub.botID])
        let clock = ContinuousClock()
        func roundTrip(_ k: Int) async throws -> Double {
            let start = clock.now
            async let reply: Void = waiter.wait(for: k)
            _ = try await conversation.send(.text("ping \(k)"))
            try await reply
            return (clock.now - start).milliseconds
        }
        for k in 0..<warmup { _ = try await roundTrip(1_000_000 + k) }
        let meter = Meter(servers: [hub.server] + others.map(\.server), bot: hub)
        let started = clock.now
        let samples = try await withThrowingTaskGroup(of: Double.self) { group in
            var samples: [Double] = []
            var next = 0
            while next < min(inFlight, messages) {
                let k = next
                group.addTask { try await roundTrip(k) }
                next += 1
            }
            while let sample = try await group.next() {
                samples.append(sample)
                if next < messages {
                    let k = next
                    group.addTask { try await roundTrip(k) }
                    next += 1
                }
            }
            return samples
        }
        let elapsed = (clock.now - started).milliseconds / 1000
        let efficiency = meter.finish()
        await user.close()
        return PingPongResult(
            messages: messages, inFlight: inFlight, repliesPerSecond: (Double(messages) / elapsed).rounded(),
            latencyMs: LatencyStats(samples), efficiency: efficiency)
    }

    // MARK: w2: moderation before delivery

    func moderation(messages: Int) async throws -> ModerationResult {
        let plain = try await plainServers("w2-plain")[0]
        let without = try await deliveryRun(port: plain.port, messages: messages, prefix: "plain")
        await plain.server.stop()
        let withoutStats = LatencyStats(without.latencies)
        return ModerationResult(
            messages: messages, blocked: (0..<messages).filter { $0 % 10 == 0 }.count, withoutPluginMs: withoutStats,
            withPlugin: try await moderatedRun(hub: try await hub("w2-bot"), messages: messages, prefix: "mod", without: withoutStats),
            // The same with the shipped moderation's default rule set reviewing every message too.
            shippedModeration: try await moderatedRun(
                hub: try await hub("w2-shipped", shippedModeration: true), messages: messages, prefix: "shipped",
                without: withoutStats))
    }

    /// One moderated run on `hub` (stopped afterwards): the messages one at a time, then the burst; the overheads
    /// against the run `without` interceptor.
    private func moderatedRun(hub: BenchHub, messages: Int, prefix: String, without: LatencyStats) async throws
        -> ModerationRun
    {
        let (run, efficiency, burst) = try await hub.whileRunning {
            let meter = Meter(servers: [hub.server], bot: hub)
            _ = hub.server.takeInterceptionHoldTimes()
            let run = try await deliveryRun(port: hub.port, messages: messages, prefix: prefix)
            let holds = hub.server.takeInterceptionHoldTimes()
            return ((run, holds), meter.finish(), try await burstRun(hub: hub, messages: messages))
        }
        let stats = LatencyStats(run.0.latencies)
        return ModerationRun(
            delivered: run.0.delivered, leaked: run.0.leaked, latencyMs: stats,
            overheadP50Ms: LatencyStats.round(stats.p50 - without.p50),
            overheadP99Ms: LatencyStats.round(stats.p99 - without.p99), holdMs: LatencyStats(run.1), efficiency: efficiency,
            burst: burst)
    }

    /// A sends every message at once (every tenth forbidden); counts what B received and what the
    /// server's failure policy had to decide.
    private func burstRun(hub: BenchHub, messages: Int) async throws -> BurstResult {
        let a = client("burst-A", port: hub.port)
        let b = client("burst-B", port: hub.port)
        let (delivered, leaks, listener) = countDeliveries(to: b) { _ in }
        defer { listener.cancel() }
        try await a.open()
        try await b.open()
        let conversation = try await a.createConversation(members: [b.clientId])
        let policyBefore = hub.server.interceptionStats.policyApplied
        let clock = ContinuousClock()
        let start = clock.now
        let refused = await withTaskGroup(of: Bool.self) { group in
            for k in 0..<messages {
                group.addTask {
                    let text = k % 10 == 0 ? "a forbidden-word \(k)" : "hello \(k)"
                    do {
                        _ = try await conversation.send(.text(text))
                        return false
                    } catch { return true }
                }
            }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        let elapsed = (clock.now - start).milliseconds / 1000
        try await Task.sleep(for: .milliseconds(500))
        await a.close()
        await b.close()
        return BurstResult(
            messages: messages, forbidden: (0..<messages).filter { $0 % 10 == 0 }.count, refused: refused,
            delivered: delivered.withLock { $0 }, leaked: leaks.withLock { $0 },
            policyDecisions: hub.server.interceptionStats.policyApplied - policyBefore,
            peakReviewsInFlight: hub.server.reviewsInFlight.peak,
            messagesPerSecond: (Double(messages) / max(elapsed, 0.001)).rounded())
    }

    /// Counts the messages `client` receives, and those of them with the forbidden word; `arrived` gets
    /// the number each message ends with.
    private func countDeliveries(to client: IMClient, arrived: @escaping @Sendable (Int) -> Void)
        -> (delivered: Locked<Int>, leaked: Locked<Int>, listener: Task<Void, Never>)
    {
        let leaks = Locked(0)
        let delivered = Locked(0)
        let events = client.events()
        let listener = Task {
            for await event in events {
                guard case .message(let message) = event, let text = message.content.text else { continue }
                delivered.withLock { $0 += 1 }
                if text.contains("forbidden-word") { leaks.withLock { $0 += 1 } }
                if let k = Int(text.split(separator: " ").last ?? "") { arrived(k) }
            }
        }
        return (delivered, leaks, listener)
    }

    /// A sends to B one message at a time; every tenth contains the forbidden word.
    private func deliveryRun(port: Int, messages: Int, prefix: String) async throws
        -> (latencies: [Double], delivered: Int, leaked: Int)
    {
        let a = client("\(prefix)-A", port: port)
        let b = client("\(prefix)-B", port: port)
        let waiter = ReplyWaiter()
        let watchdog = waiter.watchdog()
        defer { watchdog.cancel() }
        let (delivered, leaks, listener) = countDeliveries(to: b) { k in waiter.arrived(k) }
        defer { listener.cancel() }
        try await a.open()
        try await b.open()
        let conversation = try await a.createConversation(members: [b.clientId])
        let clock = ContinuousClock()
        var latencies: [Double] = []
        for k in 0..<messages {
            let start = clock.now
            if k % 10 == 0 {
                _ = try? await conversation.send(.text("a forbidden-word \(k)"))
                continue
            }
            async let arrival: Void = waiter.wait(for: k)
            _ = try await conversation.send(.text("hello \(k)"))
            try await arrival
            latencies.append((clock.now - start).milliseconds)
        }
        try await Task.sleep(for: .milliseconds(300))
        await a.close()
        await b.close()
        return (latencies, delivered.withLock { $0 }, leaks.withLock { $0 })
    }

    // MARK: w3: group fan-out

    func groupFanOut(messages: Int, members: Int) async throws -> FanOutResult {
        let nodes = try await plainServers("w3")
        return try await Self.stopping(nodes.map(\.server)) {
            try await groupFanOut(nodes: nodes, messages: messages, members: members)
        }
    }

    private func groupFanOut(nodes: [(server: IMServer, port: Int)], messages: Int, members: Int) async throws
        -> FanOutResult
    {
        let sender = client("w3-sender", port: nodes[0].port)
        try await sender.open()
        let clock = ContinuousClock()
        let sentAt = Locked([Int: ContinuousClock.Instant]())
        let latencies = Locked([Double]())
        let remaining = Locked(messages * members)
        let (done, finished) = AsyncStream<Void>.makeStream()
        var receivers: [IMClient] = []
        var listeners: [Task<Void, Never>] = []
        for m in 0..<members {
            let receiver = client("w3-m\(m)", port: nodes[m % nodes.count].port)
            listeners.append(
                Self.latencyListener(
                    receiver.events(), clock: clock, sentAt: sentAt, latencies: latencies, remaining: remaining, finished: finished))
            try await receiver.open()
            receivers.append(receiver)
        }
        let conversation = try await sender.createConversation(members: receivers.map(\.clientId))
        let meter = Meter(servers: nodes.map(\.server), bot: nil)
        let started = clock.now
        try await Bench.send(messages, to: conversation, clock: clock, sentAt: sentAt)
        for await _ in done { break }
        let elapsed = (clock.now - started).milliseconds / 1000
        let efficiency = meter.finish()
        for listener in listeners { listener.cancel() }
        for receiver in receivers { await receiver.close() }
        await sender.close()
        let deliveries = messages * members
        return FanOutResult(
            messages: messages, members: members, deliveries: deliveries,
            deliveriesPerSecond: (Double(deliveries) / elapsed).rounded(),
            latencyMs: LatencyStats(latencies.withLock { $0 }), efficiency: efficiency)
    }
}
