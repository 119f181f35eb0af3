import Foundation
import HookRuntime
import IMCore
import Logging

/// Measures hook dispatch speed (the `hooks` workload of `hookbot bench`).
public enum HookBenchmark {
    public struct Result: Codable, Sendable {
        /// `ctx.matcher` in a hook: 1,000 keywords, 10 regexes and the presets on the benign corpus (nil without `plugins/`).
        public var matcher: MatcherResult?
        /// Trivial `on_receive` hook calls per second (one plugin, one thread).
        public var trivialCallsPerSecond: Double
        /// Microseconds per event for the trivial hook.
        public var trivialMicrosPerEvent: Double
        /// CPU microseconds per trivial call: the benchmark thread's own CPU time over the loop, which time
        /// spent waiting for a core on a busy machine does not inflate (the wall-clock figures above do).
        public var trivialCPUMicrosPerCall: Double
        /// Events per second through a 5-plugin pipeline (moderation + on_receive).
        public var pipelineEventsPerSecond: Double
        /// Microseconds per event through the 5-plugin pipeline.
        public var pipelineMicrosPerEvent: Double
        /// CPU microseconds per pipeline event (the thread's CPU time, as `trivialCPUMicrosPerCall`).
        public var pipelineCPUMicrosPerEvent: Double
        /// Hook calls per event in the pipeline.
        public var pipelineHookCallsPerEvent: Int
        public var iterations: Int
        /// The shipped moderation plugin with its default rules (nil when no `plugins/` is found).
        public var moderation: ModerationResult?
    }

    static let trivial = """
        return { name = "trivial", on_receive = function(msg, ctx) end }
        """

    static let pipeline: [(String, String)] = [
        (
            "p1_filter",
            """
            local banned = { spam = true, scam = true }
            return {
              name = "p1_filter", priority = 50,
              moderation = function(msg, ctx)
                local t = msg.text
                if t and banned[t] then return ctx.block("banned word") end
              end,
            }
            """
        ),
        (
            "p2_caps",
            """
            return {
              name = "p2_caps", priority = 40,
              moderation = function(msg, ctx)
                local t = msg.text
                if t and #t > 200 and t == t:upper() then return ctx.block("shouting") end
              end,
            }
            """
        ),
        (
            "p3_echo",
            """
            return {
              name = "p3_echo", priority = 30,
              on_receive = function(msg, ctx)
                if msg.text == "!ping" then ctx.reply("pong") end
              end,
            }
            """
        ),
        (
            "p4_words",
            """
            return {
              name = "p4_words", priority = 20,
              on_receive = function(msg, ctx)
                local n = 0
                for _ in string.gmatch(msg.text or "", "%S+") do n = n + 1 end
                msg.attrs.words = n
              end,
            }
            """
        ),
        (
            "p5_types",
            """
            return {
              name = "p5_types", priority = 10,
              on_receive = function(msg, ctx)
                if msg.type_name == "image" and msg.file then ctx.log("debug", msg.file.url) end
              end,
            }
            """
        ),
    ]

    struct BenchmarkError: Error, CustomStringConvertible { var description: String }

    private static func check(_ r: ReloadReport, expect: Int) throws {
        guard r.errors.isEmpty, r.loaded.count == expect else {
            throw BenchmarkError(description: "benchmark plugins failed to load: \(r.errors)")
        }
    }

    /// Runs both measurements in a temporary directory.
    public static func run(iterations: Int = 300_000) throws -> Result {
        let fm = FileManager.default
        let base = fm.temporaryDirectory.appendingPathComponent("hookbench-\(UUID().uuidString)")
        try fm.createDirectory(at: base, withIntermediateDirectories: true)
        defer { try? fm.removeItem(at: base) }
        let store = try HookStateStore(path: base.appendingPathComponent("state.sqlite").path)
        var quiet = Logger(label: "hookbench")
        quiet.logLevel = .critical

        let msg = HookMessage(
            id: "m1", cid: "c1", from: "alice", type: MessageType.text.rawValue,
            text: "hello there general kenobi", timestamp: 1_700_000_000_000)

        // trivial
        let d1 = base.appendingPathComponent("trivial")
        try fm.createDirectory(at: d1, withIntermediateDirectories: true)
        try trivial.write(to: d1.appendingPathComponent("trivial.lua"), atomically: true, encoding: .utf8)
        let rt1 = PluginEngine(directory: d1, store: store, logger: quiet)
        try check(rt1.loadAll(), expect: 1)
        for _ in 0..<2000 { _ = rt1.receive(msg) }
        let t0 = DispatchTime.now().uptimeNanoseconds
        let c0 = ThreadCPUClock.now()
        for _ in 0..<iterations { _ = rt1.receive(msg) }
        let cpu1 = Double(ThreadCPUClock.now() - c0) / 1e3
        let s1 = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
        rt1.shutdown()

        // pipeline
        let d2 = base.appendingPathComponent("pipeline")
        try fm.createDirectory(at: d2, withIntermediateDirectories: true)
        for (n, src) in pipeline {
            try src.write(to: d2.appendingPathComponent("\(n).lua"), atomically: true, encoding: .utf8)
        }
        let rt2 = PluginEngine(directory: d2, store: store, logger: quiet)
        try check(rt2.loadAll(), expect: pipeline.count)
        var ping = msg
        ping.text = "!ping"
        guard rt2.incoming(ping).actions.count == 1, rt2.incoming(msg).errors.isEmpty else {
            throw BenchmarkError(description: "pipeline plugins do not behave as expected")
        }
        let n2 = max(iterations / 4, 1000)
        for _ in 0..<2000 { _ = rt2.incoming(msg) }
        let t1 = DispatchTime.now().uptimeNanoseconds
        let c1 = ThreadCPUClock.now()
        for _ in 0..<n2 { _ = rt2.incoming(msg) }
        let cpu2 = Double(ThreadCPUClock.now() - c1) / 1e3
        let s2 = Double(DispatchTime.now().uptimeNanoseconds - t1) / 1e9
        rt2.shutdown()

        return Result(
            matcher: try matcher(),
            trivialCallsPerSecond: Double(iterations) / s1,
            trivialMicrosPerEvent: s1 * 1e6 / Double(iterations),
            trivialCPUMicrosPerCall: cpu1 / Double(iterations),
            pipelineEventsPerSecond: Double(n2) / s2,
            pipelineMicrosPerEvent: s2 * 1e6 / Double(n2),
            pipelineCPUMicrosPerEvent: cpu2 / Double(n2),
            pipelineHookCallsPerEvent: 5,
            iterations: iterations,
            moderation: try moderation(messages: max(iterations / 4, 1000)))
    }
}
