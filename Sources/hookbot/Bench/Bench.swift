import BotHost
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

    init(scale: Double, relaxedSync: Bool) throws {
        self.scale = scale
        self.relaxedSync = relaxedSync
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

    /// An embedded server with the benchmark bot as its interceptor.
    private func hub(_ name: String) async throws -> EmbeddedHub {
        let dir = try directory(name)
        let plugins = dir.appendingPathComponent("plugins")
        try FileManager.default.createDirectory(at: plugins, withIntermediateDirectories: true)
        for (file, source) in Self.plugins { try source.write(to: plugins.appendingPathComponent(file), atomically: true, encoding: .utf8) }
        var configuration = BotConfiguration()
        configuration.pluginsDirectory = plugins
        configuration.statePath = dir.appendingPathComponent("state.sqlite").path
        configuration.serverDatabase = dir.appendingPathComponent("server.sqlite").path
        configuration.serverPort = 0
        configuration.serverSynchronousFull = !relaxedSync
        configuration.adminSocketPath = nil
        configuration.watchInterval = 0
        configuration.replyLimit = Int.max
        configuration.interceptionDeadlineMillis = 1000
        return try await EmbeddedHub.start(configuration: configuration, logger: logger)
    }

    /// A server without interceptors.
    private func plainServer(_ name: String) async throws -> (IMServer, Int) {
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.databasePath = try directory(name).appendingPathComponent("server.sqlite").path
        configuration.synchronousFull = !relaxedSync
        let server = try IMServer(configuration: configuration, logger: logger)
        return (server, try await server.start())
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
        defer { Task { await hub.stop() } }
        let user = client("bench-user", port: hub.port)
        let waiter = ReplyWaiter()
        let events = user.events()
        let listener = Task {
            for await event in events {
                if case .message(let message) = event, message.from == hub.bot.configuration.clientID,
                   let text = message.content.text, text.hasPrefix("pong "), let k = Int(text.dropFirst(5)) {
                    waiter.arrived(k)
                }
            }
        }
        defer { listener.cancel() }
        try await user.open()
        let conversation = try await user.createConversation(members: [hub.bot.configuration.clientID])
        let clock = ContinuousClock()
        func roundTrip(_ k: Int) async throws -> Double {
            let start = clock.now
            async let reply: Void = waiter.wait(for: k)
            _ = try await conversation.send(.text("ping \(k)"))
            try await reply
            return (clock.now - start).milliseconds
        }
        for k in 0..<warmup { _ = try await roundTrip(1_000_000 + k) }
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
        await user.close()
        return PingPongResult(messages: messages, inFlight: inFlight, repliesPerSecond: (Double(messages) / elapsed).rounded(),
                              latencyMs: LatencyStats(samples))
    }

    // MARK: w2: moderation before delivery

    func moderation(messages: Int) async throws -> ModerationResult {
        let plain = try await plainServer("w2-plain")
        let without = try await deliveryRun(port: plain.1, messages: messages, prefix: "plain")
        await plain.0.stop()
        let hub = try await hub("w2-bot")
        let with = try await deliveryRun(port: hub.port, messages: messages, prefix: "mod")
        await hub.stop()
        let blocked = (0..<messages).filter { $0 % 10 == 0 }.count
        let withStats = LatencyStats(with.latencies)
        let withoutStats = LatencyStats(without.latencies)
        return ModerationResult(
            messages: messages, blocked: blocked, delivered: with.delivered, leaked: with.leaked,
            withPluginMs: withStats, withoutPluginMs: withoutStats,
            overheadP50Ms: LatencyStats.round(withStats.p50 - withoutStats.p50),
            overheadP99Ms: LatencyStats.round(withStats.p99 - withoutStats.p99))
    }

    /// A sends to B one message at a time; every tenth contains the forbidden word.
    private func deliveryRun(port: Int, messages: Int, prefix: String) async throws
        -> (latencies: [Double], delivered: Int, leaked: Int)
    {
        let a = client("\(prefix)-A", port: port)
        let b = client("\(prefix)-B", port: port)
        let waiter = ReplyWaiter()
        let leaks = Locked(0)
        let delivered = Locked(0)
        let events = b.events()
        let listener = Task {
            for await event in events {
                guard case .message(let message) = event, let text = message.content.text else { continue }
                delivered.withLock { $0 += 1 }
                if text.contains("forbidden-word") { leaks.withLock { $0 += 1 } }
                if let k = Int(text.split(separator: " ").last ?? "") { waiter.arrived(k) }
            }
        }
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
        let (server, port) = try await plainServer("w3")
        defer { Task { await server.stop() } }
        let sender = client("w3-sender", port: port)
        try await sender.open()
        let clock = ContinuousClock()
        let sentAt = Locked([Int: ContinuousClock.Instant]())
        let latencies = Locked([Double]())
        let remaining = Locked(messages * members)
        let (done, finished) = AsyncStream<Void>.makeStream()
        var receivers: [IMClient] = []
        var listeners: [Task<Void, Never>] = []
        for m in 0..<members {
            let receiver = client("w3-m\(m)", port: port)
            let events = receiver.events()
            listeners.append(Task {
                for await event in events {
                    guard case .message(let message) = event, let k = Int(message.content.text ?? "") else { continue }
                    let now = clock.now
                    if let start = sentAt.withLock({ $0[k] }) { latencies.withLock { $0.append((now - start).milliseconds) } }
                    if remaining.withLock({ $0 -= 1; return $0 }) == 0 { finished.yield() }
                }
            })
            try await receiver.open()
            receivers.append(receiver)
        }
        let conversation = try await sender.createConversation(members: receivers.map(\.clientId))
        let started = clock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for lane in 0..<8 {
                group.addTask {
                    for k in stride(from: lane, to: messages, by: 8) {
                        sentAt.withLock { $0[k] = clock.now }
                        _ = try await conversation.send(.text("\(k)"))
                    }
                }
            }
            try await group.waitForAll()
        }
        for await _ in done { break }
        let elapsed = (clock.now - started).milliseconds / 1000
        listeners.forEach { $0.cancel() }
        for receiver in receivers { await receiver.close() }
        await sender.close()
        let deliveries = messages * members
        return FanOutResult(messages: messages, members: members, deliveries: deliveries,
                            deliveriesPerSecond: (Double(deliveries) / elapsed).rounded(),
                            latencyMs: LatencyStats(latencies.withLock { $0 }))
    }

    // MARK: RSS with idle connections

    /// Starts `hookbot server` as a child process, logs in `connections` clients and reads its resident size.
    func idleConnectionsRSS(connections: Int) async throws -> Double {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        let port = Int.random(in: 30000..<60000)
        let process = Process()
        process.executableURL = executable
        process.arguments = ["server", "--port", "\(port)", "--db", try directory("rss").appendingPathComponent("s.sqlite").path,
                             "--log-level", "error"]
        try process.run()
        defer { process.terminate() }
        var clients: [IMClient] = []
        for attempt in 0..<100 {
            let probe = client("rss-probe", port: port)
            do {
                try await probe.open()
                clients.append(probe)
                break
            } catch {
                if attempt == 99 { throw error }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        try await withThrowingTaskGroup(of: IMClient.self) { group in
            for index in 0..<connections - 1 {
                group.addTask {
                    let idle = client("idle-\(index)", port: port)
                    try await idle.open()
                    return idle
                }
                if index % 50 == 49 { for _ in 0..<50 { if let c = try await group.next() { clients.append(c) } } }
            }
            for try await c in group { clients.append(c) }
        }
        try await Task.sleep(for: .seconds(1))
        let status = try String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8)
        let kilobytes = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
            .flatMap { Double($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
        for c in clients { await c.close() }
        return (kilobytes / 1024 * 10).rounded() / 10
    }
}

/// Lets a sender wait until the reply or delivery numbered `k` has arrived.
final class ReplyWaiter: Sendable {
    private struct State {
        var arrived: Set<Int> = []
        var waiting: [Int: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = Mutex(State())

    func arrived(_ k: Int) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if let waiter = state.waiting.removeValue(forKey: k) { return waiter }
            state.arrived.insert(k)
            return nil
        }
        waiter?.resume()
    }

    func wait(for k: Int) async throws {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Bool in
                if state.arrived.remove(k) != nil { return true }
                state.waiting[k] = continuation
                return false
            }
            if ready { continuation.resume() }
        }
    }
}

/// A value shared between tasks.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    init(_ value: Value) { mutex = Mutex(value) }

    func withLock<T>(_ body: (inout Value) -> T) -> T { mutex.withLock { body(&$0) } }
}
