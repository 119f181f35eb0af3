import Foundation
import HookRuntime
import IMCore
import Logging

/// The shipped `moderation` plugin with its default rule set (the `hooks` workload of `hookbot bench`): the
/// cost of one message through `incoming` (moderation, then `on_receive`) on a `PluginEngine`, for ordinary
/// chat from 40 members in 3 conversations (links, mentions, emoji, Chinese), one message every 0.25 s of a
/// manual clock so that no rate or duplicate rule is tripped and the common path is what is measured.
extension HookBenchmark {
    public struct ModerationResult: Codable, Sendable {
        /// Microseconds per message through the shipped moderation with its default rules.
        public var microsPerMessage: Double
        public var messages: Int
        /// Messages the rules blocked or warned about (0 expected: the traffic is ordinary chat).
        public var blocked: Int
        public var warned: Int
        /// Where the plugin was read from.
        public var plugins: String
        /// The same with hookbot.toml's demo `words` (scam, forbidden) checked by the built-in word rule.
        public var withWordsMicrosPerMessage: Double?
    }

    static let chatLines = [
        "morning all", "anyone tried the new build?", "lol", "that's exactly what I said yesterday",
        "who's in for lunch at 12:30?", "I'll push the fix tonight", "can someone review my PR?",
        "the deploy went fine", "it works on my machine", "I think the cache is stale", "大家好", "今天天气不错",
        "晚上一起吃饭吗？", "这个问题我也遇到过", "收到，谢谢！", "发生了什么事？", "NASA posted the launch video",
        "Scunthorpe won 2-1 last night", "cocktails after work?", "happy birthday Jerry! 🎉🎉",
    ]
    static let chatExtras = [
        "", " 😂", " 👍", " https://github.com/apple/swift/pull/1234", " https://zh.wikipedia.org/wiki/上海",
        " www.bbc.co.uk/news", " https://www.youtube.com/watch?v=dQw4w9WgXcQ", " @Jerry", " @Tom @Spike", " 🔥🔥🔥",
        " https://www.bilibili.com/video/BV1xx411c7mD @小明",
    ]

    /// The plugins directory with the shipped `moderation.lua`: `./plugins` (where `hookbot bench` is usually
    /// run), else the source tree this binary was built from.
    static func shippedPlugins() -> URL? {
        let fm = FileManager.default
        let candidates = [
            URL(fileURLWithPath: fm.currentDirectoryPath).appendingPathComponent("plugins"),
            URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("plugins"),
        ]
        return candidates.first { fm.fileExists(atPath: $0.appendingPathComponent("moderation.lua").path) }
    }

    /// Copies the shipped `moderation.lua` into `plugins` with the modules it requires, the preset word lists its
    /// default rules use and its locale files.
    static func copyShippedModeration(from source: URL, to plugins: URL) throws {
        let fm = FileManager.default
        try fm.copyItem(at: source.appendingPathComponent("moderation.lua"), to: plugins.appendingPathComponent("moderation.lua"))
        for folder in ["lib", "presets", "locales/moderation"] where fm.fileExists(atPath: source.appendingPathComponent(folder).path) {
            let target = plugins.appendingPathComponent(folder)
            try fm.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
            try fm.copyItem(at: source.appendingPathComponent(folder), to: target)
        }
    }

    /// Measures `messages` messages (after a warm-up) through the shipped moderation; nil when no plugins
    /// directory with it is found.
    public static func moderation(messages: Int = 50_000, withWords: Bool = false) throws -> ModerationResult? {
        guard let source = shippedPlugins() else { return nil }
        let fm = FileManager.default
        let base = fm.temporaryDirectory.appendingPathComponent("modbench-\(UUID().uuidString)")
        let plugins = base.appendingPathComponent("plugins")
        try fm.createDirectory(at: plugins, withIntermediateDirectories: true)
        defer { try? fm.removeItem(at: base) }
        try copyShippedModeration(from: source, to: plugins)
        let store = try HookStateStore(path: base.appendingPathComponent("state.sqlite").path)
        var quiet = Logger(label: "hookbench.moderation")
        quiet.logLevel = .critical
        let clock = ManualClock()
        // The default rule set as shipped; `words` (hookbot.toml's demo words) adds the built-in word rule.
        var settings: [String: JSONValue] = ["moderators": ["alice"]]
        if withWords { settings["words"] = ["scam", "forbidden"] }
        let config: [String: JSONValue] = ["moderation": .object(settings)]
        let engine = PluginEngine(
            directory: plugins, store: store, config: config, clock: clock.clock, logger: quiet, botID: "modbot")
        let report = engine.loadAll()
        guard report.errors.isEmpty, report.loaded == ["moderation"] else {
            throw BenchmarkError(description: "the shipped moderation plugin failed to load: \(report.errors)")
        }
        defer { engine.shutdown() }

        let members = (1...40).map { $0 % 4 == 0 ? "成员\($0)" : "member_\($0)" }
        let conversations = ["lobby", "dev", "random"]
        var texts: [String] = []
        for (i, line) in chatLines.enumerated() {
            for (j, extra) in chatExtras.enumerated() where (i + j) % 2 == 0 { texts.append(line + extra) }
        }
        func message(_ k: Int) -> HookMessage {
            HookMessage(
                id: "m\(k)", cid: conversations[k % conversations.count], from: members[k % members.count],
                type: MessageType.text.rawValue, text: texts[k % texts.count], timestamp: Int64(clock.now * 1000))
        }
        var blocked = 0
        var warned = 0
        func send(_ k: Int) {
            clock.advance(by: 0.25)
            let outcome = engine.incoming(message(k))
            if case .block = outcome.moderation.verdict { blocked += 1 }
            warned += outcome.actions.filter { if case .warn = $0.kind { true } else { false } }.count
        }
        for k in 0..<2000 { send(k) }
        blocked = 0
        warned = 0
        let t0 = DispatchTime.now().uptimeNanoseconds
        for k in 2000..<(2000 + messages) { send(k) }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
        let withWordsMicros = withWords ? nil : try moderation(messages: messages, withWords: true)?.microsPerMessage
        return ModerationResult(
            microsPerMessage: seconds * 1e6 / Double(messages), messages: messages, blocked: blocked, warned: warned,
            plugins: source.path, withWordsMicrosPerMessage: withWordsMicros)
    }
}
