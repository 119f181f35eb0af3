import Foundation

/// The benchmark's JSON output.
public struct BenchReport: Encodable {
    struct Machine: Encodable {
        var cores = ProcessInfo.processInfo.activeProcessorCount
        var memoryGB = Double(ProcessInfo.processInfo.physicalMemory) / 1e9
    }

    var machine: Machine
    /// How the bot was attached, the store (SQLite, or PostgreSQL with how many nodes), and the SQLite
    /// synchronous level.
    var bot: String
    var store: String
    var synchronous: String
    var hooks: HookBenchmark.Result?
    var w1a: PingPongResult?
    var w1b: PingPongResult?
    var w2: ModerationResult?
    var w3: FanOutResult?
    var idle: IdleSessionsResult?
    var w4: BigRoomResult?
    var media: MediaBenchResult?
    var push: PushBenchResult?

    enum CodingKeys: String, CodingKey {
        case machine, bot, store, synchronous, hooks, w1a, w1b, w2, w3, w4, idle, media, push
    }
}

struct PingPongResult: Encodable {
    var messages: Int
    var inFlight: Int
    var repliesPerSecond: Double
    var latencyMs: LatencyStats
    var efficiency: Efficiency
}

struct ModerationResult: Encodable {
    var messages: Int
    var blocked: Int
    /// The messages' latency on a server without interceptor: what each run's overhead is measured against.
    var withoutPluginMs: LatencyStats
    /// With the bot's word filter as interceptor.
    var withPlugin: ModerationRun
    /// The same again with the shipped moderation (its default rule set) reviewing every message after the filter.
    var shippedModeration: ModerationRun
}

/// One moderated run of w2: the messages sent one at a time, then all at once (`burst`).
struct ModerationRun: Encodable {
    var delivered: Int
    var leaked: Int
    var latencyMs: LatencyStats
    var overheadP50Ms: Double
    var overheadP99Ms: Double
    /// How long the server held each message in review (request to verdict applied), measured in the server: the
    /// interception's overhead without the run-to-run noise of comparing two servers' end-to-end latencies.
    var holdMs: LatencyStats
    var efficiency: Efficiency
    /// The same messages sent all at once (no waiting between sends).
    var burst: BurstResult
}

struct BurstResult: Encodable {
    var messages: Int
    var forbidden: Int
    var refused: Int
    var delivered: Int
    var leaked: Int
    /// Messages the server's failure policy decided (the interceptor did not answer in time).
    var policyDecisions: Int
    var peakReviewsInFlight: Int
    var messagesPerSecond: Double
}

struct FanOutResult: Encodable {
    var messages: Int
    var members: Int
    var deliveries: Int
    var deliveriesPerSecond: Double
    var latencyMs: LatencyStats
    var efficiency: Efficiency
}

extension BenchReport {
    /// Runs the `workloads` named (w1a, w1b, w2, w3, w4, idle, hooks, media, push); `quick` runs a tenth of the
    /// messages (`media` a 10 MB file, `idle` 1,000 and 2,000 sessions, `w4` 1,000 members).
    public static func run(
        _ workloads: Set<String>, quick: Bool = false, relaxedSync: Bool = false,
        remoteBot: Bool = false, database: String? = nil, nodes: Int = 1
    ) async throws -> BenchReport {
        let scale = quick ? 0.1 : 1.0
        let bench = try Bench(
            scale: scale, relaxedSync: relaxedSync, remoteBot: remoteBot, cluster: database.map { (url: $0, nodes: max(1, nodes)) })
        // Every workload stops its servers and bots before it returns: their databases, plugins and files go with the run.
        defer { try? FileManager.default.removeItem(at: bench.root) }
        var report = BenchReport(
            machine: BenchReport.Machine(), bot: remoteBot ? "remote process (WebSocket)" : "in process",
            store: database == nil ? "SQLite" : "PostgreSQL, \(max(1, nodes)) node(s)",
            synchronous: relaxedSync ? "NORMAL" : "FULL")
        if workloads.contains("hooks") { report.hooks = try HookBenchmark.run(iterations: quick ? 20_000 : 200_000) }
        if workloads.contains("w1a") { report.w1a = try await bench.pingPong(messages: Int(2000 * scale), warmup: 200, inFlight: 1) }
        if workloads.contains("w1b") {
            report.w1b = try await bench.pingPong(messages: Int(10_000 * scale), warmup: 200, inFlight: 50)
        }
        if workloads.contains("w2") { report.w2 = try await bench.moderation(messages: Int(2000 * scale)) }
        if workloads.contains("w3") { report.w3 = try await bench.groupFanOut(messages: Int(2000 * scale), members: 50) }
        if workloads.contains("w4") {
            report.w4 = try await BigRoomBenchmark(root: bench.root, members: quick ? 1000 : 5000, messages: quick ? 100 : 1000).run()
        }
        if workloads.contains("idle") {
            report.idle = try await IdleSessionsBenchmark(root: bench.root, steps: quick ? [1000, 2000] : [1000, 5000, 15000]).run()
        }
        if workloads.contains("media") {
            report.media = try await MediaBenchmark(root: bench.root, logger: bench.logger, scale: scale).run()
        }
        if workloads.contains("push") {
            report.push = try await PushBenchmark(root: bench.root, logger: bench.logger, relaxedSync: relaxedSync, scale: scale).run()
        }
        return report
    }

    /// One line per workload: throughput, latency, CPU and transactions per 1,000 stored messages.
    public var summaryTable: String {
        func number(_ value: Double?, _ digits: Int = 0) -> String {
            guard let value else { return "-" }
            return String(format: "%.\(digits)f", value)
        }
        var rows: [[String]] = [["workload", "rate", "p50 ms", "p99 ms", "cpu s/1k", "bot cpu s/1k", "tx/1k", "db tx/1k"]]
        func add(_ name: String, _ rate: String, _ latency: LatencyStats, _ efficiency: Efficiency) {
            rows.append([
                name, rate, number(latency.p50, 3), number(latency.p99, 3),
                number(efficiency.cpuSecondsPer1000Messages, 3), number(efficiency.botCPUSecondsPer1000Messages, 3),
                number(efficiency.transactionsPer1000Messages, 1), number(efficiency.databaseTransactionsPer1000Messages, 1),
            ])
        }
        if let w1a { add("w1a ping-pong x1", "\(number(w1a.repliesPerSecond))/s", w1a.latencyMs, w1a.efficiency) }
        if let w1b { add("w1b ping-pong x\(w1b.inFlight)", "\(number(w1b.repliesPerSecond))/s", w1b.latencyMs, w1b.efficiency) }
        func add(_ name: String, burst burstName: String, _ run: ModerationRun) {
            add(
                name, "leaked \(run.leaked), +\(number(run.overheadP50Ms, 3)) ms, held \(number(run.holdMs.p50, 3)) ms",
                run.latencyMs, run.efficiency)
            rows.append([
                "\(burstName) x\(run.burst.messages)",
                "leaked \(run.burst.leaked), policy \(run.burst.policyDecisions), \(number(run.burst.messagesPerSecond))/s",
                "-", "-", "-", "-", "-", "-",
            ])
        }
        if let w2 {
            add("w2 moderated A->B", burst: "w2 burst", w2.withPlugin)
            add("w2 + shipped moderation", burst: "w2 + shipped burst", w2.shippedModeration)
        }
        if let w3 { add("w3 fan-out x\(w3.members)", "\(number(w3.deliveriesPerSecond))/s", w3.latencyMs, w3.efficiency) }
        var lines = ["", "bot: \(bot), store: \(store), synchronous=\(synchronous)"]
        if rows.count > 1 {
            let widths = rows[0].indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
            for row in rows {
                lines.append(zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: "  "))
            }
        }
        if let w4 {
            lines.append(
                "w4 chat room of \(w4.members): \(number(w4.deliveriesPerSecond)) deliveries/s, p50 \(number(w4.latencyMs.p50, 1)) ms, "
                    + "p99 \(number(w4.latencyMs.p99, 1)) ms, server CPU \(number(w4.serverCPUMicrosPerDelivery, 2)) us/delivery, missing \(w4.missing)"
            )
        }
        if let idle {
            let steps = idle.steps.map { "\($0.sessions): \(number($0.rssMB, 1)) MB" }.joined(separator: ", ")
            lines.append(
                "idle sessions: empty \(number(idle.emptyRSSMB, 1)) MB, \(steps); \(number(idle.slopeKBPerSession, 1)) KB per session")
        }
        if let hooks {
            lines.append(
                "hooks: \(number(hooks.trivialCallsPerSecond)) trivial calls/s (\(number(hooks.trivialCPUMicrosPerCall, 3)) µs CPU each), "
                    + "\(number(hooks.pipelineEventsPerSecond)) pipeline events/s (\(number(hooks.pipelineCPUMicrosPerEvent, 2)) µs CPU each)"
            )
        }
        if let media { lines += media.summaryLines }
        if let push { lines += push.summaryLines }
        return lines.joined(separator: "\n")
    }
}
