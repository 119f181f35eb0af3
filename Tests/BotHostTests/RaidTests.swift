import BotHost
import Foundation
import HookRuntime
import HookbotTestSupport
import IMClient
import IMCore
import Logging
import Synchronization
import XCTest

/// A scripted raid against a real server with a real bot host running the shipped `plugins/` with the
/// settings of the shipped `hookbot.toml` (the bot as the server's interceptor, as `hookbot run` has it):
/// 20 established members chat at human pace; 50 new accounts join within 10 seconds and each posts a scam
/// link with an @everyone mention and a copy of one message. Measured and asserted: the conversation is
/// locked to invite-only within 5 s of the wave's first join, at most 5 raid messages reach the
/// established members' clients, and no established member is muted, blocked or refused.
final class RaidTests: XCTestCase {
    static let established = (1...20).map { String(format: "member%02d", $0) }
    static let raiders = (1...50).map { String(format: "raider%02d", $0) }
    /// The raiders' joins are this far apart: 50 joins in 7.35 s.
    static let joinSpacing = Duration.milliseconds(150)
    static let copy = "JOIN THE REAL GROUP NOW -> https://t.me/raid_central"

    func testAJoinWaveIsLockedAndContained() async throws {
        let harness = try await BotHarness.start(attachment: .inProcess)
        addTeardownBlock(releasing: harness.server) { await $0.stop() }
        let bot = try await Self.shippedBot(harness)
        addTeardownBlock(releasing: bot) { await $0.stop() }
        let loaded = await bot.router.plugins.plugins.map(\.name)
        XCTAssertTrue(loaded.contains("gatekeeper") && loaded.contains("moderation"), "\(loaded)")

        // The community: member01 creates it with the 19 others and the bot (founders, not a wave).
        let members = Self.established.map { harness.server.client($0) }
        let logs = try await openClients(members)
        let group = try await members[0].createConversation(name: "community", members: Array(Self.established.dropFirst()) + ["modbot"])
        let cid = group.id
        // The owner asks the bot for the gate's status (also: the bot has seen the conversation's creation).
        var status = ""
        var asked = 0
        for _ in 0..<50 {
            _ = try await group.send(.text("!gate status"))
            asked += 1
            status = try await logs[0].next("the gate's status") { event -> String? in
                if case .message(let m) = event, m.from == "modbot", m.conversationId == cid { m.content.text } else { nil }
            }
            if status.hasPrefix("gate in") { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        XCTAssertTrue(status.hasPrefix("gate in \(cid): open; raid mode off;"), status)
        XCTAssertTrue(status.hasSuffix("joins in the last 10 s: 0/10"), "founders are no joins: \(status)")

        let raiders = Self.raiders.map { harness.server.client($0) }
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for raider in raiders { tasks.addTask { try await raider.open() } }
            try await tasks.waitForAll()
        }
        for log in logs { log.clear() }

        // The established members chat at human pace (a message every 2.2 to 4.5 s each, under the shipped
        // flood limit) from 1.5 s before the raid until 1.5 s after its last join.
        let record = RaidRecord()
        let start = ContinuousClock.now
        let raidStart = start + .milliseconds(1_500)
        let raidEnd = raidStart + Self.joinSpacing * (Self.raiders.count - 1)
        let chatEnd = raidEnd + .milliseconds(1_500)
        async let chatting: Void = Self.chatAll(members, in: cid, until: chatEnd, record: record)

        // The raid: each account joins (150 ms after the previous one) and at once posts a scam link with an
        // @everyone mention and the copy, then the copy again a second later.
        await Self.raidAll(raiders, in: cid, at: raidStart, record: record)
        await chatting
        // When the conversation became invite-only: the update every member gets, and the refusals.
        let lockedEvent = logs[1].history.lazy.compactMap { event -> Bool? in
            if case .conversationUpdated(cid, let patch, _, _) = event,
                patch.contains(where: { $0.key.hasSuffix("joinPolicy") && $0.value == .string("invite") })
                    || patch["attr"]?.objectValue?["joinPolicy"] == .string("invite")
            {
                return true
            }
            return nil
        }.first
        let snapshot = record.snapshot
        guard let firstJoin = snapshot.joins.min(), let firstRefusal = snapshot.lockRefusals.min() else {
            return XCTFail("no join or no refusal: \(snapshot.joins.count) joins, refusals \(snapshot.otherJoinErrors)")
        }
        let lockSeconds = Self.seconds(firstRefusal - raidStart)
        // Raid messages that reached established members' clients (each counted once, whoever got it), and
        // the established members' messages among them (waiting until what is in flight has arrived).
        let expected = (record.snapshot.sent.values.reduce(0, +) + asked) * 19
        var reached = Set<String>()
        var deliveries = 0
        var establishedReceived = 0
        for _ in 0..<50 {
            (reached, deliveries, establishedReceived) = ([], 0, 0)
            for log in logs {
                for case .message(let m) in log.history where m.conversationId == cid {
                    if m.from.hasPrefix("raider") {
                        reached.insert(m.id)
                        deliveries += 1
                    } else if m.from.hasPrefix("member") {
                        establishedReceived += 1
                    }
                }
            }
            if establishedReceived >= expected { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        var muted: [String] = []
        var page = try await group.mutedMembers(limit: 100)
        muted += page.ids
        while let next = page.next {
            page = try await group.mutedMembers(limit: 100, next: next)
            muted += page.ids
        }
        var blocked: [String] = []
        var blockedPage = try await group.blockedMembers(limit: 100)
        blocked += blockedPage.ids
        while let next = blockedPage.next {
            blockedPage = try await group.blockedMembers(limit: 100, next: next)
            blocked += blockedPage.ids
        }
        let establishedSet = Set(Self.established)
        let sentByEstablished = snapshot.sent.values.reduce(0, +)

        print(
            """
            raid: \(Self.raiders.count) accounts, joins 150 ms apart from t=0; \(snapshot.joins.count) joined, \
            \(snapshot.lockRefusals.count) refused (locked), first join at +\(Self.ms(firstJoin - raidStart)) ms
            raid: locked (first join refused 4308) \(Self.ms(firstRefusal - raidStart)) ms after the wave's first join; \
            update event seen: \(lockedEvent != nil)
            raid: \(snapshot.raidAccepted) raid messages accepted by the server, \(snapshot.raidRefused) refused \
            (\(snapshot.refusalCodes.sorted { $0.key < $1.key }.map { "\($0.key)×\($0.value)" }.joined(separator: ", ")))
            raid: \(reached.count) raid messages reached members (\(deliveries) deliveries to 20 clients)
            raid: established members sent \(sentByEstablished), \(snapshot.refusedEstablished.count) refused; \
            \(establishedReceived) deliveries among them; muted \(muted.sorted()), blocked \(blocked.count)
            """)

        XCTAssertNotNil(lockedEvent, "the members were told the conversation is invite-only")
        XCTAssertLessThanOrEqual(lockSeconds, 5, "locked within 5 s of the wave's start")
        XCTAssertLessThanOrEqual(reached.count, 5, "at most 5 raid messages reach members")
        XCTAssertEqual(snapshot.otherJoinErrors, [], "joins fail only because the conversation is locked")
        XCTAssertGreaterThanOrEqual(snapshot.joins.count, 10, "a wave is 10 joins")
        XCTAssertLessThanOrEqual(snapshot.joins.count, 35, "locked within 5 s: at most 34 joins 150 ms apart got in")
        XCTAssertEqual(snapshot.refusedEstablished, [], "no established member's message is refused")
        XCTAssertGreaterThan(sentByEstablished, 40, "the members kept chatting during the raid")
        XCTAssertTrue(establishedSet.isDisjoint(with: muted), "established members muted: \(muted)")
        XCTAssertTrue(establishedSet.isDisjoint(with: blocked), "established members blocked: \(blocked)")
        XCTAssertTrue(Set(muted).isSuperset(of: snapshot.joinedNames), "every raider who got in is muted")
        // Every member received every other member's messages (19 recipients each), the owner's !gate
        // status included.
        XCTAssertEqual(establishedReceived, expected)

        for client in members + raiders { await client.close() }
    }

    /// A bot host with the shipped `plugins/` and the settings of the shipped `hookbot.toml`, as the server's
    /// interceptor. The shipped interception deadline is 200 ms; the harness gives 1 s, so that on a machine
    /// busy with other tests what is measured is the plugins' decisions, not the failure policy.
    static func shippedBot(_ harness: BotHarness, gatekeeper: [String: JSONValue] = [:]) async throws -> BotHost {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let shipped = try BotConfiguration.load(path: root.appendingPathComponent("hookbot.toml").path)
        return try await harness.bot(plugins: shipped.plugins.directory) { configuration in
            var mine = shipped
            mine.clientID = configuration.clientID
            mine.plugins.directory = configuration.plugins.directory
            mine.statePath = configuration.statePath
            mine.interceptorSecret = configuration.interceptorSecret
            mine.adminSocketPath = nil
            mine.plugins.watchInterval = 3600 // the shipped files as they are now; no reloads during the test
            mine.server.interceptionDeadlineMillis = configuration.server.interceptionDeadlineMillis
            var settings = mine.plugins.config["gatekeeper"]?.objectValue ?? [:]
            for (key, value) in gatekeeper { settings[key] = value }
            mine.plugins.config["gatekeeper"] = .object(settings)
            configuration = mine
        }
    }

    /// member01 starts the group `name` with member02 and the bot, and `newcomer` joins it: the shipped screening
    /// mutes the newcomer. Returns the group's id, the three clients (member01, member02, newcomer) and their
    /// logs, and the seconds of the mute the newcomer was told of.
    static func newcomerJoins(
        _ harness: BotHarness, _ newcomer: String, group name: String
    ) async throws -> (cid: String, clients: [IMClient], logs: [EventLog], mutedSeconds: Int) {
        let clients = ["member01", "member02", newcomer].map { harness.server.client($0) }
        let logs = try await openClients(clients)
        let group = try await clients[0].createConversation(name: name, members: ["member02", "modbot"])
        let cid = group.id
        try await clients[2].conversation(cid).join()
        let muted = try await logs[2].next("the newcomer's mute") { event -> Int? in
            if case .muted(cid, "modbot", let seconds, false) = event { seconds } else { nil }
        }
        return (cid, clients, logs, muted)
    }

    /// Screening through a real server with the in-group fallback (`dm = false, ask_in_group = true`): the
    /// newcomer is muted by the server, opens a 1:1 chat with the bot, answers wrong once and then right,
    /// and may post. (The bot opening the 1:1 chat itself: ScreeningDMTests.)
    func testANewcomerAnswersInAOneToOneChatAndMayPost() async throws {
        let harness = try await BotHarness.start(attachment: .inProcess)
        addTeardownBlock(releasing: harness.server) { await $0.stop() }
        let bot = try await Self.shippedBot(harness, gatekeeper: ["screening": true, "dm": false, "ask_in_group": true])
        addTeardownBlock(releasing: bot) { await $0.stop() }
        let (cid, clients, logs, muted) = try await Self.newcomerJoins(harness, "newbie", group: "screened")
        let newbie = clients[2]
        XCTAssertEqual(muted, 300)
        let asked = try await logs[0].next("the question in the group") { event -> String? in
            if case .message(let m) = event, m.from == "modbot", m.content.text?.hasPrefix("@newbie welcome!") == true {
                m.content.text
            } else {
                nil
            }
        }
        do {
            _ = try await newbie.conversation(cid).send(.text("hi all"))
            XCTFail("a newcomer posted before answering")
        } catch {
            XCTAssertEqual(error.knownCode, .memberMuted)
            XCTAssertTrue(error.detail?.contains("answer modbot's question in a 1:1 chat with modbot") == true, "\(error)")
        }

        // The newcomer opens a 1:1 chat with the bot: the question is asked there.
        let dm = try await newbie.createConversation(members: ["modbot"], options: .unique)
        let question = try await logs[2].next("the question in the 1:1 chat") { event -> String? in
            if case .message(let m) = event, m.conversationId == dm.id, let text = m.content.text,
                text.hasPrefix("To post in \(cid), answer: ")
            {
                String(text.dropFirst("To post in \(cid), answer: ".count))
            } else {
                nil
            }
        }
        XCTAssertTrue(asked.hasSuffix(question), "the same question: \(asked) / \(question)")
        _ = try await dm.send(.text("-100"))
        let wrong = try await logs[2].next("the bot's answer") { event -> String? in
            if case .message(let m) = event, m.conversationId == dm.id, m.from == "modbot",
                m.content.text?.hasPrefix("Hi! I am a bot") == false
            {
                m.content.text
            } else {
                nil
            }
        }
        XCTAssertEqual(wrong, "Not quite, 2 more tries. \(question)")
        _ = try await dm.send(.text(try XCTUnwrap(Self.solve(question), question)))
        let right = try await logs[2].next("the bot's answer") { event -> String? in
            if case .message(let m) = event, m.conversationId == dm.id, m.from == "modbot",
                m.content.text?.hasPrefix("Hi! I am a bot") == false
            {
                m.content.text
            } else {
                nil
            }
        }
        XCTAssertEqual(right, "Thanks, newbie! You can post in \(cid) now.")
        _ = try await logs[2].next("the mute lifted") { event -> Bool? in
            if case .unmuted(cid, _, false) = event { true } else { nil }
        }
        _ = try await newbie.conversation(cid).send(.text("hi all, glad to be here"))
        let got = try await logs[1].next("the newcomer's first message") { event -> String? in
            if case .message(let m) = event, m.from == "newbie" { m.content.text } else { nil }
        }
        XCTAssertEqual(got, "hi all, glad to be here")
        for client in clients { await client.close() }
    }

    /// Settings that cannot work stop the plugin from loading, with the key and the reason.
    func testBadSettingsAreLoadErrorsNamingTheKey() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gatekeeper-\(UUID().uuidString)")
        let plugins = directory.appendingPathComponent("plugins")
        try FileManager.default.createDirectory(at: plugins.appendingPathComponent("lib"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: plugins.appendingPathComponent("locales/gatekeeper"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        for file in ["gatekeeper.lua", "lib/modlog.lua", "locales/gatekeeper/en.toml", "locales/gatekeeper/zh-CN.toml"] {
            try FileManager.default.copyItem(
                at: root.appendingPathComponent("plugins/\(file)"), to: plugins.appendingPathComponent(file))
        }
        let store = try HookStateStore(path: directory.appendingPathComponent("state.sqlite").path)
        var quiet = Logger(label: "gatekeeper-settings")
        quiet.logLevel = .critical
        let cases: [(JSONValue, String)] = [
            (["raid_action": "ban"], "plugins.gatekeeper.raid_action: must be \"mute\" or \"kick\""),
            (["wave": ["joins": 0]], "plugins.gatekeeper.wave.joins: must be a number, at least 1"),
            (["language": "fr"], "plugins.gatekeeper.language: must be \"auto\", \"en\", \"zh\" or \"both\""),
            (["kinds": ["maths"]], "plugins.gatekeeper.kinds: 'maths' is not math or emoji"),
            (["questions": [["q": "2 + 2?"]]], "plugins.gatekeeper.questions[1]: must be { q = \"question\", a = { \"answer\", ... } }"),
            (["kinds": [], "questions": []], "plugins.gatekeeper.kinds: no questions: list a kind or add questions"),
            (["answer_seconds": 0], "plugins.gatekeeper.answer_seconds: must be a number above 0"),
            (["screening": "yes"], "plugins.gatekeeper.screening: must be true, false or a list of conversation ids"),
            (["texts": ["en": ["greeting": "hi"]]], "plugins.gatekeeper.texts.en.greeting: no such text"),
        ]
        for (settings, message) in cases {
            let runtime = PluginRuntime(directory: plugins, store: store, config: ["gatekeeper": settings], logger: quiet)
            let errors = await runtime.loadAll().errors.map(\.description)
            await runtime.shutdown()
            XCTAssertTrue(errors.contains { $0.contains(message) }, "\(settings): \(errors)")
        }
        let runtime = PluginRuntime(
            directory: plugins, store: store, config: ["gatekeeper": ["screening": ["lobby"], "language": "both"]], logger: quiet)
        let report = await runtime.loadAll()
        await runtime.shutdown()
        XCTAssertEqual(report.errors.map(\.description), [], "good settings load")
    }

    /// The answer to one of the built-in questions, as a person reads it.
    static func solve(_ question: String) -> String? {
        let words = question.split(separator: " ")
        if question.hasPrefix("What is "), words.count == 5, let a = Int(words[2]), let b = Int(words[4].dropLast()) {
            return String(words[3] == "+" ? a + b : a - b)
        }
        if question.hasPrefix("Which one is the "), words.count > 4 {
            return String(words[4].dropLast()) // "Which one is the cat? 1 🐶 …": the name
        }
        return nil
    }

    static func chatAll(_ members: [IMClient], in cid: String, until end: ContinuousClock.Instant, record: RaidRecord) async {
        await withTaskGroup(of: Void.self) { tasks in
            for index in members.indices {
                let member = members[index]
                tasks.addTask { await chat(member, index: index, in: cid, until: end, record: record) }
            }
        }
    }

    static func raidAll(_ raiders: [IMClient], in cid: String, at start: ContinuousClock.Instant, record: RaidRecord) async {
        await withTaskGroup(of: Void.self) { tasks in
            for index in raiders.indices {
                let raider = raiders[index]
                tasks.addTask { await raid(raider, index: index, in: cid, at: start, record: record) }
            }
        }
    }

    /// One established member chatting at human pace until `end`.
    static func chat(_ member: IMClient, index: Int, in cid: String, until end: ContinuousClock.Instant, record: RaidRecord) async {
        var generator = TrafficGenerator(seed: 0x2A1D + UInt64(index), members: established)
        try? await Task.sleep(for: .milliseconds(Int(generator.uniform(0...2_000))))
        while ContinuousClock.now < end {
            let text = generator.text(from: established[index])
            do {
                _ = try await member.conversation(cid).send(.text(text))
                record.sent(by: established[index])
            } catch {
                record.refused("\(established[index]): \(error) for \(text)")
            }
            try? await Task.sleep(for: .milliseconds(Int(generator.uniform(2_200...4_500))))
        }
    }

    /// One raid account: joins at its slot, posts the scam link with @everyone and the copy at once, and the
    /// copy again a second later.
    static func raid(_ raider: IMClient, index: Int, in cid: String, at start: ContinuousClock.Instant, record: RaidRecord) async {
        try? await Task.sleep(until: start + joinSpacing * index)
        let conversation = raider.conversation(cid)
        do {
            try await conversation.join()
            record.joined(raiders[index], at: ContinuousClock.now)
        } catch {
            record.joinRefused(error, at: ContinuousClock.now)
            return
        }
        let posts: [(String, IMSendOptions)] = [
            (
                "🎁 FREE NITRO for everyone, claim it before it's gone: https://dlscord-gift.example/claim @everyone",
                IMSendOptions(mentionAll: true)
            ),
            (copy, .default), (copy, .default),
        ]
        for (n, (text, options)) in posts.enumerated() {
            if n == 2 { try? await Task.sleep(for: .seconds(1)) }
            do {
                _ = try await conversation.send(.text(text), options: options)
                record.raidAccepted()
            } catch {
                record.raidRefused(error)
            }
        }
    }

    static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }
    static func ms(_ d: Duration) -> Int { Int(seconds(d) * 1000) }
}

/// What the test's clients saw, shared by their tasks.
final class RaidRecord: Sendable {
    struct Snapshot {
        var joins: [ContinuousClock.Instant] = []
        var joinedNames: Set<String> = []
        var lockRefusals: [ContinuousClock.Instant] = []
        var otherJoinErrors: [String] = []
        var raidAccepted = 0
        var raidRefused = 0
        var refusalCodes: [String: Int] = [:]
        var sent: [String: Int] = [:]
        var refusedEstablished: [String] = []
    }

    private let state = Mutex(Snapshot())
    var snapshot: Snapshot { state.withLock { $0 } }

    func joined(_ name: String, at t: ContinuousClock.Instant) {
        state.withLock {
            $0.joins.append(t)
            $0.joinedNames.insert(name)
        }
    }
    func joinRefused(_ error: any Error, at t: ContinuousClock.Instant) {
        state.withLock {
            if (error as? IMError)?.knownCode == .conversationNotAllowed {
                $0.lockRefusals.append(t)
            } else {
                $0.otherJoinErrors.append("\(error)")
            }
        }
    }
    func raidAccepted() { state.withLock { $0.raidAccepted += 1 } }
    func raidRefused(_ error: any Error) {
        state.withLock {
            $0.raidRefused += 1
            let e = error as? IMError
            // 4402 with the plugin's appCode (gatekeeper 4340, moderation 4301), 4905 the server's mute.
            var key = "\(error)"
            if let e {
                key = "\(e.code)"
                if let app = e.appCode { key += "/\(app)" }
            }
            $0.refusalCodes[key, default: 0] += 1
        }
    }
    func sent(by member: String) { state.withLock { $0.sent[member, default: 0] += 1 } }
    func refused(_ line: String) { state.withLock { $0.refusedEstablished.append(line) } }
}
