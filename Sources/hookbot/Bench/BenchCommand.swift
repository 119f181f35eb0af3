import ArgumentParser
import BotHost
import Foundation
import HookRuntime
import IMClient
import IMCore
import IMServer
import Logging

struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Run the benchmark workloads (w1a, w1b, w2, w3, rss, hooks) and print one JSON object.")

    @Flag(help: "Smaller message counts, for a quick look.") var quick = false
    @Flag(help: "Use SQLite synchronous=NORMAL (WAL survives a process crash, not a power loss).") var relaxedSync = false
    @Option(help: "Only these workloads (comma-separated: w1a,w1b,w2,w3,rss,hooks).") var only: String?

    func run() async throws {
        let scale = quick ? 0.1 : 1.0
        let selected = Set((only ?? "w1a,w1b,w2,w3,rss,hooks").split(separator: ",").map(String.init))
        let bench = try Bench(scale: scale, relaxedSync: relaxedSync)
        var report = BenchReport(machine: BenchReport.Machine())
        if selected.contains("hooks") { report.hooks = try HookBenchmark.run(iterations: quick ? 20_000 : 200_000) }
        if selected.contains("w1a") { report.w1a = try await bench.pingPong(messages: Int(2000 * scale), warmup: 200, inFlight: 1) }
        if selected.contains("w1b") { report.w1b = try await bench.pingPong(messages: Int(10_000 * scale), warmup: 200, inFlight: 50) }
        if selected.contains("w2") { report.w2 = try await bench.moderation(messages: Int(2000 * scale)) }
        if selected.contains("w3") { report.w3 = try await bench.groupFanOut(messages: Int(2000 * scale), members: 50) }
        if selected.contains("rss") { report.rssMB = try await bench.idleConnectionsRSS(connections: 1000) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        print(String(decoding: try encoder.encode(report), as: UTF8.self))
    }
}

/// The benchmark's JSON output.
struct BenchReport: Encodable {
    struct Machine: Encodable {
        var cores = ProcessInfo.processInfo.activeProcessorCount
        var memoryGB = Double(ProcessInfo.processInfo.physicalMemory) / 1e9
    }

    var machine: Machine
    var hooks: HookBenchmark.Result?
    var w1a: PingPongResult?
    var w1b: PingPongResult?
    var w2: ModerationResult?
    var w3: FanOutResult?
    var rssMB: Double?

    enum CodingKeys: String, CodingKey {
        case machine, hooks, w1a, w1b, w2, w3
        case rssMB = "rss_mb"
    }
}

struct PingPongResult: Encodable {
    var messages: Int
    var inFlight: Int
    var repliesPerSecond: Double
    var latencyMs: LatencyStats
}

struct ModerationResult: Encodable {
    var messages: Int
    var blocked: Int
    var delivered: Int
    var leaked: Int
    var withPluginMs: LatencyStats
    var withoutPluginMs: LatencyStats
    var overheadP50Ms: Double
    var overheadP99Ms: Double
}

struct FanOutResult: Encodable {
    var messages: Int
    var members: Int
    var deliveries: Int
    var deliveriesPerSecond: Double
    var latencyMs: LatencyStats
}
