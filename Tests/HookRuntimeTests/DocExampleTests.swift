import Foundation
import IMCore
import XCTest

@testable import HookRuntime

/// Runs every Lua example of docs/PLUGINS.md. Each ```lua block must be
/// preceded by `<!-- example: scenario/path -->`; the files of a scenario are
/// written to one plugins directory and checked below.
final class DocExampleTests: XCTestCase {
    /// Fixtures live until the test ends (their deinit deletes the directory).
    private var fixtures: [Fixture] = []

    override func tearDown() { fixtures.removeAll() }

    static var docURL: URL {
        URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("docs/PLUGINS.md")
    }

    /// scenario -> [relative path: source]
    static func examples() throws -> [String: [String: String]] {
        let text = try String(contentsOf: docURL, encoding: .utf8)
        var out: [String: [String: String]] = [:]
        var pending: String?
        var inBlock = false
        var block: [String] = []
        var unmarked = 0
        for line in text.components(separatedBy: "\n") {
            if inBlock {
                if line == "```" {
                    inBlock = false
                    if let p = pending {
                        let parts = p.split(separator: "/", maxSplits: 1).map(String.init)
                        out[parts[0], default: [:]][parts[1]] = block.joined(separator: "\n") + "\n"
                    } else {
                        unmarked += 1
                    }
                    pending = nil
                } else {
                    block.append(line)
                }
                continue
            }
            if line.hasPrefix("<!-- example: ") && line.hasSuffix(" -->") {
                pending = String(line.dropFirst("<!-- example: ".count).dropLast(" -->".count))
            } else if line == "```lua" || (line == "```toml" && pending != nil) {
                // a marked TOML block is a file of the example too (locale files)
                inBlock = true
                block = []
            } else if !line.trimmingCharacters(in: .whitespaces).isEmpty {
                pending = nil
            }
        }
        if unmarked > 0 {
            throw NSError(domain: "doc", code: unmarked, userInfo: [NSLocalizedDescriptionKey: "\(unmarked) unmarked lua blocks"])
        }
        return out
    }

    private func setUp(_ scenario: String, config: [String: JSONValue] = [:]) throws -> (Fixture, PluginEngine) {
        let all = try Self.examples()
        let files = try XCTUnwrap(all[scenario], "scenario \(scenario) missing from docs/PLUGINS.md")
        let f = Fixture()
        fixtures.append(f)
        for (path, src) in files { f.write(path, src) }
        let rt = f.runtime(config: config)
        let r = rt.loadAll()
        XCTAssertEqual(r.errors, [])
        return (f, rt)
    }

    func testEveryLuaBlockIsAMarkedExampleWithACheck() throws {
        let all = try Self.examples()
        let checked: Set<String> = [
            "greeter", "schema", "commands", "webhooks", "http", "moderation", "beforesend",
            "translate", "antiflood", "timers", "poll", "files", "newmembers", "offline",
            "matching", "dialogs", "cards", "schedules", "locales",
        ]
        XCTAssertEqual(Set(all.keys), checked)
        // each example at least compiles and loads (checked per scenario below too)
        XCTAssertEqual(all.values.reduce(0) { $0 + $1.count }, 23)
    }

    /// Dialogs: `!city` asks, a too-long answer is asked again, the answer is saved; a timeout says so.
    func testTranslations() throws {
        let (f, rt) = try setUp("locales")
        XCTAssertEqual(sentTexts(rt.receive(msg("hi", from: "Tom")).actions), ["Hello, Tom!"])
        XCTAssertEqual(sentTexts(rt.receive(msg("hi", from: "小明", attrs: ["lang": "zh-CN"])).actions), ["你好，小明！"])
        XCTAssertEqual(sentTexts(rt.receive(msg("apples")).actions), ["1 apple / 3 apples"])
        XCTAssertEqual(sentTexts(rt.receive(msg("apples", attrs: ["lang": "zh-CN"])).actions), ["1 个苹果 / 3 个苹果"])
        try f.store.set(plugin: "hookbot.locale", key: "user:小红", value: "zh-CN", now: 0)
        XCTAssertEqual(
            sentTexts(rt.memberJoined(cid: "c1", members: ["小红", "Tom"]).actions),
            ["欢迎 小红！", "Welcome, Tom! {braces} are written doubled."])
    }

    func testDialogs() throws {
        let (f, rt) = try setUp("dialogs")
        func say(_ text: String) -> [String] { sentTexts(rt.incoming(msg(text, from: "Tom")).actions) }
        XCTAssertEqual(say("!city"), ["Which city are you in?"])
        XCTAssertEqual(say(String(repeating: "x", count: 41)), ["A shorter name, please: which city?"])
        XCTAssertEqual(say("杭州"), ["Got it, Tom: 杭州."])
        XCTAssertEqual(try f.store.get(plugin: "city", key: "user:Tom:city", now: f.clock.now), .string("杭州"))
        XCTAssertEqual(say("!city"), ["Which city are you in?"])
        f.clock.advance(by: 120)
        XCTAssertEqual(sentTexts(rt.fireDueTimers().actions), ["No city set (timeout)."])
    }

    /// Cards: `!deploy` sends a card only the ops role may click; a click by ops updates it and answers.
    func testCards() throws {
        let (f, rt) = try setUp("cards")
        let sent = rt.incoming(msg("!deploy api v2", from: "Tom"))
        XCTAssertEqual(sent.errors, [])
        guard case .send(_, let card, _)? = sent.actions.first?.kind, let c = card.attrs["card"] else { return XCTFail("\(sent.actions)") }
        XCTAssertEqual(card.text, "Deploy api v2?\nasked by Tom\n[Approve] [Reject]")
        HookCards.recordSent(card, id: "m9", timestamp: 1, store: f.store, now: f.clock.now)
        try f.store.set(plugin: "hookbot.host", key: "role:ops:alice", value: .bool(true), now: f.clock.now)
        func click(_ from: String) -> HookResult {
            let approve = c["buttons"]?.arrayValue?.first
            return rt.command(
                HookCommand(
                    action: "card.click",
                    ext: ["plugin": "approve", "card": c["id"]!, "action": "click", "value": "yes", "token": approve?["token"] ?? ""],
                    cid: "c1", from: from))
        }
        XCTAssertEqual(logMessages(click("Tom").actions).first, "card click refused: Tom in c1: 'Approve' is not for Tom")
        let approved = click("alice")
        XCTAssertEqual(sentTexts(approved.actions), ["api v2 approved by alice"])
        guard case .edit(_, "m9", _, let edited)? = approved.actions.first?.kind else { return XCTFail("\(approved.actions)") }
        XCTAssertEqual(edited.attrs["card"]?["text"], "approved by alice")
    }

    /// `on_offline`: a mention gets its own title, the others keep theirs; the build bot's message no push.
    func testOffline() throws {
        let (_, rt) = try setUp("offline")
        let notification: [String: JSONValue] = ["title": "Kitchen", "body": "Tom: hi", "data": ["cid": "c1"]]
        let receivers = [
            OfflineReceiver(id: "Jerry", mentioned: true, notification: notification),
            OfflineReceiver(id: "Spike", notification: notification),
        ]
        let mentioned = rt.offline(msg("@Jerry hi", from: "Tom"), receivers: receivers)
        XCTAssertEqual(mentioned.errors, [])
        XCTAssertTrue(mentioned.hooked)
        XCTAssertEqual(
            mentioned.receivers.map(\.notification),
            [
                ["title": "Tom mentioned you", "body": "Tom: hi", "sound": "mention.caf", "data": ["cid": "c1"]],
                notification,
            ])
        let chatter = rt.offline(msg("build passed", from: "ci-bot"), receivers: receivers)
        XCTAssertEqual(chatter.receivers.map(\.notification), [nil, nil])
    }

    /// `ctx.conv(cid).member(uid)`: founders post links at once, a joiner after 10 minutes and 3 messages,
    /// somebody the host does not know as a member never.
    func testNewMembers() throws {
        let (f, rt) = try setUp("newmembers")
        let members = rt.env.members
        let now = f.clock.now
        members.joined(["Spike"], in: "c1", at: now, founding: true)
        members.joined(["Tom"], in: "c1", at: now, founding: false)
        func verdict(_ from: String) -> ModerationVerdict { rt.moderate(msg("see https://example.org", from: from)).verdict }
        XCTAssertEqual(verdict("Spike"), .allow)
        XCTAssertEqual(verdict("Tom"), .block(reason: "new members cannot post links yet", code: nil, silent: false))
        XCTAssertEqual(verdict("Jerry"), .block(reason: "new members cannot post links yet", code: nil, silent: false))
        f.clock.advance(by: 601)
        for _ in 0..<2 { members.counted("Tom", in: "c1") }
        XCTAssertEqual(verdict("Tom"), .block(reason: "new members cannot post links yet", code: nil, silent: false))
        members.counted("Tom", in: "c1")
        XCTAssertEqual(members.member("Tom", of: "c1")?.messages, 3)
        XCTAssertEqual(verdict("Tom"), .allow)
        members.left(["Tom"], from: "c1")
        XCTAssertEqual(verdict("Tom"), .block(reason: "new members cannot post links yet", code: nil, silent: false))
    }

    /// Without `[http.weather]` hosts the call is refused at once, as a value (the call itself is tested
    /// against a real server in ConsoleTests/HTTPCallTests).
    func testHTTPRefusedByTheAllowList() throws {
        let (_, rt) = try setUp("http")
        let replies = sentTexts(rt.receive(msg("!weather Paris")).actions)
        XCTAssertEqual(replies, ["ctx.http: weather.example.org is not in this plugin's allowed hosts ([http.weather] hosts)"])
        XCTAssertEqual(rt.plugins.first?.http.refused, 1)
    }

    func testWebhook() throws {
        let (_, rt) = try setUp("webhooks")
        let posted = try XCTUnwrap(rt.http(plugin: "ci", HookHTTPRequest(body: #"{"cid": "c9", "result": "passed", "commit": "abc"}"#)))
        XCTAssertEqual(posted.response.status, 202)
        XCTAssertEqual(posted.response.body, #"{"posted":true}"#)
        XCTAssertEqual(sentTexts(posted.result.actions), ["CI passed for abc"])
        let bad = try XCTUnwrap(rt.http(plugin: "ci", HookHTTPRequest(body: "not json")))
        XCTAssertEqual(bad.response.status, 400)
        XCTAssertEqual(bad.result.actions, [])
        XCTAssertNil(rt.http(plugin: "nobody", HookHTTPRequest()))
    }

    func testCommands() throws {
        let files = try XCTUnwrap(try Self.examples()["commands"])
        let f = Fixture()
        fixtures.append(f)
        for (path, src) in files { f.write(path, src) }
        let rt = PluginEngine(
            directory: f.plugins, store: f.store, limits: testLimits, clock: f.clock.clock,
            commands: ChatCommandSettings(roles: ["gm": ["alice"]]))
        XCTAssertEqual(rt.loadAll().errors, [])
        XCTAssertEqual(sentTexts(rt.receive(msg("!rig Tom 6", from: "Tom")).actions), ["!rig is only for gm"])
        XCTAssertEqual(
            sentTexts(rt.receive(msg("!rig @Tom x", from: "alice")).actions),
            ["!rig: value must be a whole number, not 'x' — usage: !rig <user:user> <value:integer>"])
        XCTAssertEqual(sentTexts(rt.receive(msg("!rig @Tom 6", from: "alice")).actions), ["done"])
        XCTAssertEqual(sentTexts(rt.receive(msg("!roll", from: "Tom")).actions), ["Tom rolls 6"])
        XCTAssertEqual(sentTexts(rt.receive(msg("!roll", from: "Tom")).actions), ["!roll: wait 10 s"])
        let help = sentTexts(rt.receive(msg("!help")).actions).first ?? ""
        XCTAssertTrue(help.contains("!rig <user:user> <value:integer> — fix someone's next rolls (gm)"), help)
    }

    func testSchema() throws {
        let (_, rt) = try setUp("schema", config: ["strikes": ["action": "mute", "limit": 2]])
        XCTAssertEqual(sentTexts(rt.receive(msg("!strike")).actions), [])
        XCTAssertEqual(sentTexts(rt.receive(msg("!strike")).actions), ["mute u1"])

        let files = try XCTUnwrap(try Self.examples()["schema"])
        let f = Fixture()
        fixtures.append(f)
        for (path, src) in files { f.write(path, src) }
        let error = f.runtime(config: ["strikes": ["action": "ban"]]).loadAll().errors.first
        XCTAssertEqual(error?.message, #"plugins.strikes.action: must be one of "warn", "mute", "kick", not "ban""#)
    }

    func testGreeter() throws {
        let (_, rt) = try setUp("greeter", config: ["greeter": ["greeting": "Bienvenue"]])
        XCTAssertEqual(
            sentTexts(rt.memberJoined(cid: "c1", members: ["alice", "bob"]).actions),
            ["Bienvenue, alice!", "Bienvenue, bob!"])
        XCTAssertEqual(sentTexts(rt.receive(msg("!hello", from: "bob")).actions), ["hello bob"])
        XCTAssertEqual(rt.receive(msg("hello")).actions, [])
    }

    func testMatching() throws {
        let (_, rt) = try setUp("matching")
        func verdict(_ text: String) -> ModerationVerdict { rt.incoming(msg(text)).moderation.verdict }
        XCTAssertEqual(verdict("what a s c a m"), .block(reason: "keyword scam: 's c a m'", code: nil, silent: false))
        XCTAssertEqual(verdict("ｆｒｅｅ ｍｏｎｅｙ!"), .block(reason: "keyword free money: 'ｆｒｅｅ ｍｏｎｅｙ'", code: nil, silent: false))
        XCTAssertEqual(
            verdict("see bit.ly/x1"), .block(reason: #"regex \b(?:bit\.ly|tinyurl\.com)/\w+: 'bit.ly/x1'"#, code: nil, silent: false))
        for text in ["scampi for lunch", "a scammer", "coins"] { XCTAssertEqual(verdict(text), .allow, text) }
    }

    func testWordFilter() throws {
        let (_, rt) = try setUp("moderation")
        let first = rt.incoming(msg("Great SCAM here", from: "eve"))
        XCTAssertEqual(first.moderation.verdict, .block(reason: "banned word", code: 4301, silent: false))
        XCTAssertEqual(first.actions.map(\.kind), [.warn(cid: "c1", user: "eve", reason: "please do not post scams")])
        _ = rt.incoming(msg("scam 2", from: "eve"))
        let third = rt.incoming(msg("scam 3", from: "eve"))
        XCTAssertTrue(third.actions.contains { $0.kind == .mute(cid: "c1", user: "eve", seconds: 600, reason: "banned word") })
        XCTAssertNil(third.delivered)
        XCTAssertEqual(rt.incoming(msg("oh darn it")).delivered?.text, "oh **** it")
        XCTAssertEqual(rt.incoming(msg("hello")).moderation.verdict, .allow)
    }

    func testSignature() throws {
        let (_, rt) = try setUp("beforesend")
        let out = rt.beforeSend(msg("hi"))
        XCTAssertEqual(out.message?.text, "hi -- hookbot")
        XCTAssertEqual(out.message?.attrs["signed"], true)
        let d = rt.beforeSend(msg("-----BEGIN PRIVATE KEY-----"))
        XCTAssertNil(d.message)
        XCTAssertEqual(d.dropReason, "looks like a private key")
        XCTAssertEqual(rt.beforeSend(msg(nil, type: MessageType.image.rawValue)).message?.text, nil)
    }

    func testTranslateChain() throws {
        let (_, rt) = try setUp("translate")
        let a = rt.translate(text: "Hello", from: "en", to: "fr", messageID: "m1")
        XCTAssertEqual(a.text, "bonjour")
        XCTAssertEqual(a.plugin, "glossary")
        XCTAssertEqual(rt.translate(text: "dog", from: nil, to: "fr").text, "[fr] dog")
        let de = rt.translate(text: "Hello", from: "en", to: "de", messageID: "m1")
        XCTAssertEqual(de.text, "[de] Hello")
        XCTAssertEqual(de.plugin, "fallback")
        let again = rt.translate(text: "Hello", from: "en", to: "fr", messageID: "m1")
        XCTAssertTrue(again.cached, "\(again)")
    }

    func testAntiflood() throws {
        let (f, rt) = try setUp("antiflood")
        for _ in 0..<3 { XCTAssertEqual(rt.incoming(msg("hi", from: "spammer")).moderation.verdict, .allow) }
        let fourth = rt.incoming(msg("hi", from: "spammer"))
        XCTAssertEqual(fourth.moderation.verdict, .block(reason: "flooding", code: nil, silent: true))
        XCTAssertEqual(fourth.actions.map(\.kind), [.mute(cid: "c1", user: "spammer", seconds: 60, reason: "flooding")])
        XCTAssertEqual(rt.incoming(msg("hi", from: "other")).moderation.verdict, .allow)
        f.clock.advance(by: 11)
        XCTAssertEqual(rt.incoming(msg("hi", from: "spammer")).moderation.verdict, .allow)
    }

    /// Schedules: the weekday cron job (declared under an id in on_load) survives a reload and a restart and
    /// runs late once after downtime; `!snooze` schedules a one-off job.
    func testSchedules() throws {
        let iso = ISO8601DateFormatter()
        func at(_ s: String) -> Double { iso.date(from: s)!.timeIntervalSince1970 }
        let f = Fixture()
        fixtures.append(f)
        f.clock.set(at("2026-11-27T18:00:00+08:00")) // a Friday
        for (path, src) in try XCTUnwrap(Self.examples()["schedules"]) { f.write(path, src) }
        let rt = f.runtime()
        XCTAssertEqual(rt.loadAll().errors, [])
        XCTAssertEqual(rt.nextTimerDue, at("2026-11-30T09:00:00+08:00"))
        XCTAssertEqual(sentTexts(rt.incoming(msg("!snooze 10", from: "Tom")).actions), ["OK, job 1"])
        f.clock.advance(by: 600)
        XCTAssertEqual(
            rt.fireDueTimers().actions.map(\.kind),
            [.send(cid: "c1", message: HookMessage(cid: "c1", text: "@Tom time's up ⏰"), replyTo: nil)])
        f.clock.set(at("2026-11-30T09:00:00+08:00"))
        XCTAssertEqual(
            rt.fireDueTimers().actions.map(\.kind),
            [.send(cid: "team-room", message: HookMessage(cid: "team-room", text: "Stand-up time! 站会时间到"), replyTo: nil)])
        for _ in 0..<3 { rt.reload(name: "standup") }
        XCTAssertEqual(rt.schedules().first?.jobs.map(\.id), ["standup"])
        // A restart two hours after Tuesday's stand-up was due: it runs once, late.
        let restarted = f.runtime(store: try HookStateStore(path: f.dbPath))
        XCTAssertEqual(restarted.loadAll().errors, [])
        f.clock.set(at("2026-12-01T11:00:00+08:00"))
        XCTAssertEqual(sentTexts(restarted.fireDueTimers().actions), ["Stand-up (late: the bot was down)"])
        XCTAssertEqual(restarted.nextTimerDue, at("2026-12-02T09:00:00+08:00"))
    }

    func testReminder() throws {
        let (f, rt) = try setUp("timers")
        XCTAssertEqual(rt.command(HookCommand(action: "remind", ext: ["after": 30, "text": "tea"], cid: "c1")).errors, [])
        f.clock.advance(by: 29)
        XCTAssertEqual(rt.fireDueTimers().actions, [])
        f.clock.advance(by: 1)
        XCTAssertEqual(
            rt.fireDueTimers().actions.map(\.kind),
            [.send(cid: "c1", message: HookMessage(cid: "c1", text: "reminder: tea"), replyTo: nil)])
        for _ in 0..<3 { rt.reload(name: "reminder") }
        f.clock.advance(by: 3600)
        let beats = rt.fireDueTimers().actions
        XCTAssertEqual(
            beats.map(\.kind), [.send(cid: "ops-room", message: HookMessage(cid: "ops-room", text: "still alive, 1 beats"), replyTo: nil)])
    }

    func testPoll() throws {
        let (_, rt) = try setUp("poll")
        let r = rt.command(HookCommand(action: "poll", ext: ["question": "Lunch?", "options": "pizza, sushi"], cid: "c1"))
        XCTAssertEqual(r.errors, [])
        guard case .send(let cid, let m, _)? = r.actions.first?.kind else { return XCTFail("\(r)") }
        XCTAssertEqual(cid, "c1")
        XCTAssertEqual(m.type, 7)
        XCTAssertEqual(m.text, "Poll: Lunch?")
        XCTAssertEqual(m.attrs, ["question": "Lunch?", "options": ["pizza", "sushi"]])
        XCTAssertNil(rt.validate(m))
        let v1 = rt.incoming(msg("vote 2"))
        XCTAssertEqual(v1.errors, [])
        XCTAssertEqual(sentTexts(v1.actions), ["sushi: 1"])
        XCTAssertEqual(sentTexts(rt.incoming(msg("vote 2")).actions), ["sushi: 2"])
        XCTAssertEqual(sentTexts(rt.incoming(msg("vote 5")).actions), ["no such option"])
    }
}
