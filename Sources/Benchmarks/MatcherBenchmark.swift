import Foundation
import HookRuntime
import IMCore
import Logging

/// `ctx.matcher` in a hook (the `hooks` workload of `hookbot bench`): a matcher of 1,000 keywords (a tenth with
/// a wildcard), 10 regular expressions of the kinds moderators write, and the six shipped presets, asked for
/// the first hit of each message of the benign corpus (plugins/tests/corpus/benign.txt) in `on_receive`; the
/// same messages through a hook that does not match give the baseline, and the difference is the matcher's
/// share per message.
extension HookBenchmark {
    public struct MatcherResult: Codable, Sendable {
        /// Microseconds per message of the hook that runs `m:find(msg.text)`.
        public var hookMicrosPerMessage: Double
        /// Microseconds per message of the same hook without the matcher (dispatch and the message's conversion).
        public var baselineMicrosPerMessage: Double
        /// The difference: what the matcher itself costs per message.
        public var matcherMicrosPerMessage: Double
        /// The same for a matcher of only the six presets.
        public var presetsMatcherMicrosPerMessage: Double
        public var keywords: Int
        public var regexes: Int
        public var presets: [String]
        public var messages: Int
        /// Messages with a hit (the corpus is ordinary chat; the random keywords should not occur).
        public var hits: Int
    }

    static let matcherPresets = ["en/profanity", "en/sexual", "en/slurs", "zh/profanity", "zh/sexual", "scam"]

    static let matcherRegexes = [
        #"\b(?:bit\.ly|tinyurl\.com|t\.me)/\w+"#, #"discord(?:\.gg|app\.com/invite)/\w+"#,
        #"(?:free|cheap)\s+(?:nitro|robux|vbucks)"#, #"\b\d{3}[-.\s]?\d{3}[-.\s]?\d{4}\b"#,
        #"[a-z0-9._%+-]+@[a-z0-9.-]+\.(?:ru|cn|tk)\b"#, #"(.)\1{9,}"#, #"\bwhats?app\s*\+?\d{6,}"#,
        #"(?:加|\+)\s*(?:微信|vx|v信)\s*[a-z0-9_-]{5,}"#, #"\b(?:usdt|btc|eth)\s*(?:giveaway|airdrop)\b"#,
        #"https?://[^\s/]*(?:gift|nitro|steam)[^\s/]*\.(?:ru|xyz|top|click)"#,
    ]

    /// 1,000 made-up words of 5 to 10 letters (every tenth `word*`, every tenth `*word`), the same every run.
    static func matcherKeywords() -> [String] {
        var state: UInt64 = 28
        func next(_ n: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(n))
        }
        let letters = Array("abcdefghijklmnopqrstuvwxyz")
        return (0..<1000).map { i in
            let word = String((0..<(5 + next(6))).map { _ in letters[next(26)] })
            return i % 10 == 0 ? word + "*" : i % 10 == 1 ? "*" + word : word
        }
    }

    static func luaList(_ items: [String]) -> String {
        items.map { "[==[" + $0 + "]==]" }.joined(separator: ", ")
    }

    /// Measures `rounds` passes over the corpus; nil when the shipped plugins directory (with presets and the
    /// corpus) is not found.
    public static func matcher(rounds: Int = 3) throws -> MatcherResult? {
        let fm = FileManager.default
        // ./plugins (where `hookbot bench` is usually run), else the source tree this binary was built from
        let candidates = [
            URL(fileURLWithPath: fm.currentDirectoryPath).appendingPathComponent("plugins"),
            URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("plugins"),
        ]
        guard let source = candidates.first(where: { fm.fileExists(atPath: $0.appendingPathComponent("presets").path) }) else {
            return nil
        }
        let corpus = source.appendingPathComponent("tests/corpus/benign.txt")
        guard fm.fileExists(atPath: source.appendingPathComponent("presets").path),
            let text = try? String(contentsOf: corpus, encoding: .utf8)
        else { return nil }
        let lines = text.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") }
        let base = fm.temporaryDirectory.appendingPathComponent("matcherbench-\(UUID().uuidString)")
        let plugins = base.appendingPathComponent("plugins")
        try fm.createDirectory(at: plugins, withIntermediateDirectories: true)
        defer { try? fm.removeItem(at: base) }
        try fm.copyItem(at: source.appendingPathComponent("presets"), to: plugins.appendingPathComponent("presets"))
        let store = try HookStateStore(path: base.appendingPathComponent("state.sqlite").path)
        var quiet = Logger(label: "hookbench.matcher")
        quiet.logLevel = .critical

        /// µs per message and messages with a hit, for a plugin whose `on_receive` runs `body`.
        func measure(_ name: String, setup: String, body: String) throws -> (Double, Int) {
            let dir = plugins.appendingPathComponent(name)
            try fm.createDirectory(at: dir, withIntermediateDirectories: true)
            try fm.createSymbolicLink(
                at: dir.appendingPathComponent("presets"), withDestinationURL: plugins.appendingPathComponent("presets"))
            try """
            local m
            return { name = "\(name)",
              on_load = function(ctx) \(setup) end,
              on_receive = function(msg, ctx) \(body) end }
            """.write(to: dir.appendingPathComponent("\(name).lua"), atomically: true, encoding: .utf8)
            let engine = PluginEngine(directory: dir, store: store, logger: quiet)
            let report = engine.loadAll()
            guard report.errors.isEmpty, report.loaded == [name] else {
                throw BenchmarkError(description: "the matcher benchmark plugin failed to load: \(report.errors)")
            }
            defer { engine.shutdown() }
            let messages = lines.map {
                HookMessage(id: "m1", cid: "c1", from: "alice", type: MessageType.text.rawValue, text: $0, timestamp: 1_700_000_000_000)
            }
            for m in messages.prefix(1000) { _ = engine.receive(m) }
            var hits = 0
            let t0 = DispatchTime.now().uptimeNanoseconds
            for _ in 0..<rounds {
                for m in messages {
                    let r = engine.receive(m)
                    guard r.errors.isEmpty else { throw BenchmarkError(description: "matcher benchmark: \(r.errors)") }
                    hits += r.actions.count
                }
            }
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
            return (seconds * 1e6 / Double(rounds * messages.count), hits / rounds)
        }
        let keywords = matcherKeywords()
        let presets = "presets = { \(luaList(matcherPresets)) }"
        let find = "if m:find(msg.text) then ctx.log(\"hit\") end"
        let full = try measure(
            "full",
            setup: "m = ctx.matcher{ keywords = { \(luaList(keywords)) }, regex = { \(luaList(matcherRegexes)) }, \(presets) }",
            body: find)
        let presetsOnly = try measure("presets", setup: "m = ctx.matcher{ \(presets) }", body: find)
        let baseline = try measure("baseline", setup: "m = 0", body: "if msg.text == \"\" then ctx.log(\"hit\") end")
        return MatcherResult(
            hookMicrosPerMessage: full.0, baselineMicrosPerMessage: baseline.0, matcherMicrosPerMessage: full.0 - baseline.0,
            presetsMatcherMicrosPerMessage: presetsOnly.0 - baseline.0, keywords: keywords.count, regexes: matcherRegexes.count,
            presets: matcherPresets, messages: lines.count, hits: full.1)
    }
}
