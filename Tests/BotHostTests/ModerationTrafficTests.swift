import BotHost
import BotRouting
import Foundation
import HookRuntime
import IMCore
import Logging
import Synchronization
import XCTest

/// The shipped moderation, as `hookbot run` configures it (`hookbot.toml` read by the real loader, every
/// plugin of `plugins/`, the bot as the server's interceptor), against a lively group: 40 members
/// chatting at human pace for 15 minutes of virtual time with links, mentions, emoji and Chinese. Nobody
/// is warned or muted; a flooder in the same traffic is.
///
/// Each message goes through the routing core a running bot uses (`MessageRouter.review`, then the follow-up
/// actions, then `MessageRouter.message` for `on_receive`), with a manual clock the plugins' state, timers and
/// the mute list all read.
final class ModerationTrafficTests: XCTestCase {
    /// The members' client ids (alice is the configured moderator; everyone else is moderated).
    static let members = [
        "alice", "Tom", "Jerry", "Spike", "Tyke", "Butch", "Nibbles", "Toodles", "Quacker", "Lightning",
        "anna_k", "ben-r", "chen_wei", "li.na", "wang_fang", "zhang3", "maria", "jose", "olga", "pierre",
        "yuki", "hiro", "sven", "ines", "kofi", "amara", "ravi", "priya", "noah", "emma",
        "liam", "mia", "lucas", "sofia", "ethan", "zoe", "小明", "小红", "老王", "阿杰",
    ]
    static let flooder = "promo_bot_77"
    static let duration = 15.0 * 60
    static let start = 1_790_000_000.0

    func testALivelyGroupIsLeftAloneAndAFlooderIsStopped() async throws {
        let configuration = try BotConfiguration.load(path: packageRoot.appendingPathComponent("hookbot.toml").path)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("traffic-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }

        let clock = ManualClock()
        clock.set(Self.start)
        let logger = Logger(label: "traffic", factory: { _ in SwiftLogNoOpLogHandler() })
        let store = try HookStateStore(
            path: directory.appendingPathComponent("state.sqlite").path, quota: configuration.plugins.stateQuota)
        // The shipped limits, but with a generous wall-clock deadline: what is under test is the verdicts,
        // and a machine busy with other tests must not turn a slow call into a missing one.
        var limits = configuration.plugins.limits
        limits.deadline = 5
        let runtime = PluginRuntime(
            directory: configuration.plugins.directory, store: store, config: configuration.plugins.config,
            limits: limits, clock: clock.clock, logger: logger, botID: configuration.clientID,
            configLocator: configuration.configLocator, commands: configuration.commands,
            httpPolicies: configuration.httpPolicies)
        // `hookbot run` with its embedded server: the bot is always the interceptor.
        var settings = configuration.routing
        settings.intercepting = true
        let outlet = TrafficOutlet()
        let hookErrors = Mutex<[String]>([])
        let router = MessageRouter(settings: settings, plugins: runtime, outlet: outlet, logger: logger) { note in
            if case .hookErrors(let errors) = note { hookErrors.withLock { $0 += errors.map(\.description) } }
        }
        let report = await runtime.loadAll()
        XCTAssertEqual(report.errors, [])
        let loaded = await runtime.plugins.map(\.name)
        XCTAssertTrue(loaded.contains("moderation"), "\(loaded)")
        await router.finish(HookResult(actions: report.actions))

        var generator = TrafficGenerator(seed: 0x5EED_2026, members: Self.members)
        var traffic = generator.schedule(duration: Self.duration)
        // A flooder joins in at minute 7: twelve messages in six seconds.
        let flood = (0..<12).map { i in
            Post(time: 420 + Double(i) * 0.5, from: Self.flooder, text: "🚀 JOIN NOW, 10x gains https://t.me/promo77 #\(i)")
        }
        traffic = (traffic + flood).sorted { ($0.time, $0.from) < ($1.time, $1.from) }

        var refused: [String: [String]] = [:]
        var delivered: [String: Int] = [:]
        var floodDecisions: [String] = []
        for (index, post) in traffic.enumerated() {
            clock.set(Self.start + post.time)
            await router.finish(await runtime.fireDueTimers(now: clock.now))
            let message = HookMessage(
                id: "m\(index)", cid: "lobby", from: post.from, text: post.text, timestamp: Int64(clock.now * 1000))
            let review = await router.review(message)
            await router.finish(review.followUp)
            switch review.decision {
            case .allow:
                delivered[post.from, default: 0] += 1
                await router.message(message)
            case .modify(let approved):
                delivered[post.from, default: 0] += 1
                await router.message(approved)
            case .drop(let reason, _, _):
                refused[post.from, default: []].append("t=\(Int(post.time)) s \(reason): \(post.text)")
            case .undecided:
                refused[post.from, default: []].append("t=\(Int(post.time)) s undecided: \(post.text)")
            }
            if post.from == Self.flooder {
                if case .drop(let reason, _, _) = review.decision { floodDecisions.append(reason) } else { floodDecisions.append("allow") }
            }
        }
        await runtime.shutdown()

        // The traffic is what the test claims: 40 members, thousands of messages, everyone every few
        // seconds, at most 5 messages in any 10 s (the shipped flood limit) and reaching it, links
        // (several in a message, https://www. ones), mentions, emoji and Chinese.
        let ordinary = traffic.filter { $0.from != Self.flooder }
        let stats = TrafficStats(ordinary, members: Self.members)
        XCTAssertEqual(Set(ordinary.map(\.from)).count, 40)
        XCTAssertGreaterThan(ordinary.count, 3500)
        XCTAssertLessThan(stats.meanInterval, 12, "each member writes every few seconds on average")
        XCTAssertEqual(stats.busiestTenSeconds, 5, "bursts reach the flood limit but never pass it")
        XCTAssertGreaterThan(stats.withSeveralWWWLinks, 50)
        XCTAssertGreaterThan(stats.withMentions, 300)
        XCTAssertGreaterThan(stats.withEmoji, 500)
        XCTAssertGreaterThan(stats.withChinese, 500)

        XCTAssertEqual(hookErrors.withLock { $0 }, [])
        let punished = outlet.moderationActions.filter { $0.user != Self.flooder }
        let refusedOrdinary = refused.filter { $0.key != Self.flooder }
        XCTAssertEqual(
            refusedOrdinary.values.map(\.count).reduce(0, +), 0,
            "ordinary members refused:\n"
                + refusedOrdinary.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value.prefix(3).joined(separator: " | "))" }
                .joined(separator: "\n"))
        XCTAssertEqual(punished.count, 0, "ordinary members warned, muted or kicked: \(punished.prefix(10))")
        XCTAssertEqual(delivered.filter { $0.key != Self.flooder }.values.reduce(0, +), ordinary.count)

        // The flooder: five messages in one window pass, the sixth is refused with a warning, the seventh
        // (a second strike) mutes, and the rest are refused as muted.
        XCTAssertEqual(Array(floodDecisions.prefix(5)), Array(repeating: "allow", count: 5), "\(floodDecisions)")
        XCTAssertEqual(floodDecisions.dropFirst(5).first, "slow down, you are sending messages too fast")
        // (A running bot leaves the mute to the server, which refuses the flooder's messages before any
        // review; here, without a server, the moderation plugin's own record refuses them.)
        XCTAssertTrue(floodDecisions.dropFirst(7).allSatisfy { $0.hasPrefix("you are muted") }, "\(floodDecisions)")
        let flooderActions = outlet.moderationActions.filter { $0.user == Self.flooder }.map(\.kind)
        XCTAssertEqual(flooderActions, ["warn", "mute", "warn"], "a warning, then a mute (with its own warning)")
    }
}

/// One message of the traffic: when (seconds from the start), who, what.
struct Post: Sendable {
    var time: Double
    var from: String
    var text: String
}

/// Human-paced chat: each member writes in bursts (one to four messages, a second or a few apart, as a
/// person does who thinks in fragments) separated by pauses of a few seconds to half a minute, and never
/// more than five messages in ten seconds. Texts mix English and Chinese chat, emoji, links (up to three,
/// many `https://www.`), @mentions and pasted multi-line snippets. Seeded, so every run is the same.
struct TrafficGenerator {
    var rng: SplitMix64
    let members: [String]

    init(seed: UInt64, members: [String]) {
        rng = SplitMix64(seed: seed)
        self.members = members
    }

    static let english = [
        "morning all", "anyone tried the new build?", "lol", "that's exactly what I said yesterday", "brb coffee",
        "ok", "+1", "sounds good to me", "who's in for lunch at 12:30?", "I'll push the fix tonight",
        "did you see the game last night?", "wait what", "haha no way", "thanks!", "can someone review my PR?",
        "meeting moved to 3pm", "yes", "no idea tbh", "the deploy went fine", "it works on my machine",
        "I think the cache is stale", "let me check", "back", "nice one", "agreed",
        "hmm not sure about that", "see you tomorrow", "great talk today", "is the wifi down again?",
        "I'm a bit late, sorry", "we should write this down somewhere", "who broke the tests?",
        "a quick question about the release", "I can take that one", "so a new version is out",
        "is it me or is it slow", "ship it", "same here", "good point", "oh I see",
    ]
    static let chinese = [
        "大家好", "今天天气不错", "我马上到", "这个链接看看", "哈哈哈哈", "晚上一起吃饭吗？", "收到，谢谢！", "周末有空吗",
        "这个问题我也遇到过", "好的没问题", "早上好", "辛苦了", "明天见", "我觉得可以", "等我一下", "太好了",
        "谁知道会议室在哪", "我在路上了", "刚看到消息", "这个版本好用多了",
    ]
    static let emoji = ["😂", "👍", "🎉🎉", "❤️", "🙏", "😅", "🔥🔥🔥", "🤔", "👀", "🙌", "😭", "✅", "☕️", "🍜"]
    static let links = [
        "https://www.example.com/article?id=42", "https://github.com/apple/swift/pull/1234", "www.bbc.co.uk/news",
        "http://news.ycombinator.com/item?id=1", "https://www.youtube.com/watch?v=dQw4w9WgXcQ",
        "https://zh.wikipedia.org/wiki/上海", "https://www.bilibili.com/video/BV1xx411c7mD",
        "https://docs.swift.org/swift-book/", "www.weibo.com/u/123456", "https://www.zhihu.com/question/20000000",
        "https://maps.google.com/?q=cafe", "https://www.nytimes.com/2026/11/25/technology/ai.html",
    ]

    mutating func pick<T>(_ list: [T]) -> T { list[Int(rng.next() % UInt64(list.count))] }
    mutating func uniform(_ range: ClosedRange<Double>) -> Double {
        range.lowerBound + (range.upperBound - range.lowerBound) * Double(rng.next() >> 11) / Double(1 << 53)
    }
    mutating func chance(_ p: Double) -> Bool { uniform(0...1) < p }

    mutating func line() -> String { chance(0.3) ? pick(Self.chinese) : pick(Self.english) }

    mutating func mention(except sender: String) -> String {
        var other = pick(members)
        while other == sender { other = pick(members) }
        return "@" + other
    }

    mutating func text(from sender: String) -> String {
        let r = uniform(0...1)
        switch r {
        case ..<0.30: return line()
        case ..<0.42: return line() + " " + pick(Self.emoji)
        case ..<0.50: return pick(Self.emoji) + (chance(0.5) ? pick(Self.emoji) : "")
        case ..<0.64:
            let count = 1 + Int(rng.next() % 3)
            let links = (0..<count).map { _ in pick(Self.links) }
            return chance(0.5) ? "\(line()) \(links.joined(separator: " "))" : "look: \(links.joined(separator: " and "))"
        case ..<0.70:
            return "https://www.\(pick(["github.com", "reddit.com", "google.com"]))/x https://www.taobao.com/item/1 \(pick(Self.emoji))"
        case ..<0.88:
            let count = 1 + Int(rng.next() % 3)
            let names = (0..<count).map { _ in mention(except: sender) }.joined(separator: " ")
            return chance(0.5) ? "\(names) \(line())" : "\(line()) \(names) \(pick(Self.emoji))"
        default:
            return "\(mention(except: sender)) \(line())\n\(line())\n\(pick(Self.links)) \(pick(Self.emoji))"
        }
    }

    /// Every member's messages over `duration` seconds, sorted by time.
    mutating func schedule(duration: Double) -> [Post] {
        var posts: [Post] = []
        for member in members {
            var times: [Double] = []
            var t = uniform(0...15)
            while t < duration {
                let burst = pick([1, 1, 1, 1, 2, 2, 2, 3, 3, 4])
                for _ in 0..<burst where t < duration {
                    // A person who has written five messages in the last ten seconds waits before a sixth.
                    if times.count >= 5, t - times[times.count - 5] < 10 { t = times[times.count - 5] + 10.5 }
                    times.append(t)
                    posts.append(Post(time: t, from: member, text: text(from: member)))
                    t += uniform(1.2...4)
                }
                t += uniform(3...18)
            }
        }
        return posts.sorted { ($0.time, $0.from) < ($1.time, $1.from) }
    }
}

/// What the generated traffic holds, so the test can say what it covered.
struct TrafficStats {
    var meanInterval: Double
    var busiestTenSeconds: Int
    var withSeveralWWWLinks: Int
    var withMentions: Int
    var withEmoji: Int
    var withChinese: Int

    init(_ posts: [Post], members: [String]) {
        var perMember: [String: [Double]] = [:]
        for post in posts { perMember[post.from, default: []].append(post.time) }
        meanInterval = ModerationTrafficTests.duration * Double(members.count) / Double(posts.count)
        busiestTenSeconds =
            perMember.values.map { times in
                var best = 0
                var first = 0
                for (i, t) in times.enumerated() {
                    while t - times[first] >= 10 { first += 1 }
                    best = max(best, i - first + 1)
                }
                return best
            }.max() ?? 0
        withSeveralWWWLinks = posts.filter { $0.text.components(separatedBy: "https://www.").count > 2 }.count
        withMentions = posts.filter { $0.text.contains("@") }.count
        withEmoji = posts.filter { $0.text.unicodeScalars.contains { $0.properties.isEmojiPresentation } }.count
        withChinese = posts.filter { $0.text.unicodeScalars.contains { (0x4E00...0x9FFF).contains($0.value) } }.count
    }
}

struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Records the moderation actions (warnings, mutes, kicks) the bot carries out; its messages go nowhere.
final class TrafficOutlet: BotOutlet {
    struct Punishment: Sendable, CustomStringConvertible {
        var kind: String
        var user: String
        var reason: String?
        var description: String { "\(kind) \(user): \(reason ?? "")" }
    }

    private let recorded = Mutex<[Punishment]>([])
    var moderationActions: [Punishment] { recorded.withLock { $0 } }

    nonisolated(nonsending) func send(
        _ message: HookMessage, transient: Bool, mentions: [String], replyTo: String?, plugin: String
    ) async throws {}

    nonisolated(nonsending) func perform(_ action: HookAction) async throws {
        let punishment: Punishment? =
            switch action.kind {
            case .warn(_, let user, let reason): Punishment(kind: "warn", user: user, reason: reason)
            case .mute(_, let user, let seconds, let reason):
                (seconds ?? 600) > 0 ? Punishment(kind: "mute", user: user, reason: reason) : nil
            case .kick(_, let user, let reason): Punishment(kind: "kick", user: user, reason: reason)
            default: nil
            }
        if let punishment { recorded.withLock { $0.append(punishment) } }
    }
}

private let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()
