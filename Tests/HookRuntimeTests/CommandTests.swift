import Foundation
import XCTest

@testable import HookRuntime

/// Chat commands: `ctx.commands.add`, arguments, roles, cooldowns, `!help` and unknown commands.
final class CommandTests: XCTestCase {
    private static let moderation = """
        return { name = "mod",
          on_load = function(ctx)
            ctx.commands.add{ name = "mute", args = "<user:user> [minutes:number] [reason:text]", roles = { "moderator" },
              description = "mute a member",
              run = function(args, msg, ctx)
                ctx.reply("muted " .. args.user .. " for " .. (args.minutes or 10) .. " min" .. (args.reason and (": " .. args.reason) or ""))
              end }
            ctx.commands.add{ name = "roll", args = "[sides:integer]", cooldown = 30, description = "roll a die",
              run = function(args, msg, ctx) ctx.reply(msg.from .. " rolled " .. (args.sides or 6)) end }
            ctx.commands.add{ name = "promote", args = "<user>", roles = "admin",
              run = function(args, msg, ctx) ctx.roles.grant(args.user, "moderator"); ctx.reply("ok") end }
            ctx.commands.add{ name = "demote", args = "<user>", roles = "admin",
              run = function(args, msg, ctx) ctx.roles.revoke(args.user, "moderator"); ctx.reply(tostring(ctx.roles.has(args.user, "moderator"))) end }
          end,
          on_receive = function(msg, ctx)
            if msg.text == "!hi" then ctx.reply("hi " .. msg.from) end
            if msg.text == "plain" then ctx.reply("seen by on_receive") end
          end,
        }
        """

    /// Fixtures live until the test ends (their deinit deletes the state file the engine uses).
    private var fixtures: [Fixture] = []

    override func tearDown() { fixtures.removeAll() }

    private func engine(
        _ sources: [String: String] = ["mod.lua": moderation], roles: [String: [String]] = ["admin": ["boss"]],
        prefix: String = "!"
    ) -> (Fixture, PluginEngine) {
        let fixture = Fixture()
        fixtures.append(fixture)
        for (name, source) in sources { fixture.write(name, source) }
        let engine = PluginEngine(
            directory: fixture.plugins, store: fixture.store, limits: testLimits, clock: fixture.clock.clock,
            commands: ChatCommandSettings(prefix: prefix, roles: roles))
        XCTAssertEqual(engine.loadAll().errors, [])
        return (fixture, engine)
    }

    private func replies(_ engine: PluginEngine, _ text: String, from: String = "u1") -> [String] {
        sentTexts(engine.receive(msg(text, from: from)).actions)
    }

    func testArgumentsAreParsedAndChecked() {
        let (_, engine) = engine(roles: ["moderator": ["alice"]])
        XCTAssertEqual(replies(engine, "!mute @Tom", from: "alice"), ["muted Tom for 10 min"])
        XCTAssertEqual(replies(engine, "!mute Tom 5 spamming links", from: "alice"), ["muted Tom for 5 min: spamming links"])
        XCTAssertEqual(replies(engine, "!mute \"Tom Cat\" 2.5", from: "alice"), ["muted Tom Cat for 2.5 min"])
        XCTAssertEqual(
            replies(engine, "!mute", from: "alice"),
            ["!mute: missing <user> — usage: !mute <user:user> [minutes:number] [reason:text]"])
        XCTAssertEqual(
            replies(engine, "!mute Tom soon", from: "alice"),
            ["!mute: minutes must be a number, not 'soon' — usage: !mute <user:user> [minutes:number] [reason:text]"])
        XCTAssertEqual(replies(engine, "!roll 6 7"), ["!roll: unexpected '7' — usage: !roll [sides:integer]"])
        XCTAssertEqual(replies(engine, "!roll x"), ["!roll: sides must be a whole number, not 'x' — usage: !roll [sides:integer]"])
    }

    func testRolesFromConfigurationAndGrantedAtRunTime() {
        let (_, engine) = engine()
        XCTAssertEqual(replies(engine, "!mute Tom", from: "alice"), ["!mute is only for moderator"])
        XCTAssertEqual(replies(engine, "!promote alice", from: "alice"), ["!promote is only for admin"])
        XCTAssertEqual(replies(engine, "!promote alice", from: "boss"), ["ok"])
        XCTAssertEqual(replies(engine, "!mute Tom", from: "alice"), ["muted Tom for 10 min"])
        XCTAssertEqual(replies(engine, "!demote alice", from: "boss"), ["false"])
        XCTAssertEqual(replies(engine, "!mute Tom", from: "alice"), ["!mute is only for moderator"])
    }

    func testCooldownPerMember() {
        let (fixture, engine) = engine()
        XCTAssertEqual(replies(engine, "!roll"), ["u1 rolled 6"])
        XCTAssertEqual(replies(engine, "!roll"), ["!roll: wait 30 s"])
        XCTAssertEqual(replies(engine, "!roll", from: "u2"), ["u2 rolled 6"], "another member's cooldown is their own")
        fixture.clock.advance(by: 31)
        XCTAssertEqual(replies(engine, "!roll 20"), ["u1 rolled 20"])
    }

    func testHelpUnknownCommandsAndOnReceive() {
        let (_, engine) = engine()
        XCTAssertEqual(
            replies(engine, "!help"),
            [
                """
                Commands:
                !demote <user> (admin)
                !mute <user:user> [minutes:number] [reason:text] — mute a member (moderator)
                !promote <user> (admin)
                !roll [sides:integer] — roll a die
                !help <command> for one of them.
                """
            ])
        XCTAssertEqual(replies(engine, "!help roll"), ["!roll [sides:integer] — roll a die; once every 30 s per member"])
        XCTAssertEqual(replies(engine, "!help fly"), ["unknown command !fly; !help lists the commands"])
        XCTAssertEqual(replies(engine, "!fly away"), ["unknown command !fly; !help lists the commands"])
        XCTAssertEqual(replies(engine, "!hi"), ["hi u1"], "on_receive still answers its own ! messages")
        XCTAssertEqual(replies(engine, "plain"), ["seen by on_receive"])
        // A command is not also an on_receive message.
        let (_, other) = self.engine(roles: ["moderator": ["u1"]])
        XCTAssertEqual(replies(other, "!mute x"), ["muted x for 10 min"])
    }

    func testAnotherPrefixAndNoCommandsMeansNoUnknownReplies() {
        let (_, slash) = engine(prefix: "/")
        XCTAssertEqual(replies(slash, "/roll 3"), ["u1 rolled 3"])
        XCTAssertEqual(replies(slash, "!roll 3"), [])
        let (_, none) = engine(["plain.lua": "return { name = \"plain\", on_receive = function(msg, ctx) end }"])
        XCTAssertEqual(replies(none, "!anything"), [], "without commands the host does not answer ! messages")
    }

    func testCommandsBelongToTheirPluginAcrossReloadsAndDisable() {
        let (fixture, engine) = engine()
        XCTAssertEqual(engine.reload(name: "mod").errors, [])
        XCTAssertEqual(replies(engine, "!roll"), ["u1 rolled 6"])
        // A version whose on_load fails keeps the running version's commands.
        fixture.write(
            "mod.lua",
            "return { name = \"mod\", on_load = function(ctx) ctx.commands.add{ name = \"x\", run = function() end }; error(\"boom\") end }"
        )
        XCTAssertEqual(engine.reload(name: "mod").errors.count, 1)
        XCTAssertEqual(replies(engine, "!roll", from: "u2"), ["u2 rolled 6"])
        XCTAssertEqual(replies(engine, "!x"), ["unknown command !x; !help lists the commands"])
        XCTAssertTrue(engine.disable(name: "mod"))
        XCTAssertEqual(replies(engine, "!roll", from: "u3"), ["!roll is not available now (its plugin is disabled)"])
        engine.unload(name: "mod")
        XCTAssertEqual(replies(engine, "!roll", from: "u4"), [], "no commands left: the host stays silent")
    }

    func testDeclarationsAreChecked() {
        let cases: [(String, String)] = [
            ("ctx.commands.add{ name = \"help\", run = function() end }", "help is the host's command"),
            ("ctx.commands.add{ name = \"a b\", run = function() end }", "name must be 1–32 letters, digits, _ or -"),
            ("ctx.commands.add{ name = \"a\" }", "run must be a function(args, msg, ctx)"),
            ("ctx.commands.add{ name = \"a\", args = \"[x] <y>\", run = function() end }", "args: required 'y' after an optional argument"),
            ("ctx.commands.add{ name = \"a\", args = \"<x:date>\", run = function() end }", "args: '<x:date>': unknown type 'date'"),
            (
                "ctx.commands.add{ name = \"a\", args = \"[t:text] [u]\", run = function() end }",
                "args: a text argument takes the rest of the line"
            ),
        ]
        assertLoadFails(onLoad: cases)
        let fixture = Fixture()
        fixture.write(
            "a.lua", "return { name = \"a\", on_load = function(ctx) ctx.commands.add{ name = \"go\", run = function() end } end }")
        fixture.write(
            "b.lua", "return { name = \"b\", on_load = function(ctx) ctx.commands.add{ name = \"go\", run = function() end } end }")
        let errors = fixture.runtime().loadAll().errors
        XCTAssertEqual(errors.count, 1)
        XCTAssertTrue(errors.first?.message.contains("go is already a command of a") == true, "\(errors)")
    }
}

/// `!help` whatever the plugins declare: descriptions cut at registration, the listing in pages of
/// bounded size, one command in full with `!help <command>`.
final class CommandHelpTests: XCTestCase {
    private var fixtures: [Fixture] = []
    override func tearDown() { fixtures.removeAll() }

    /// A hostile plugin with a 100 KB description (with line breaks), the moderation-like fixture of
    /// `CommandTests`, and a plugin of 30 commands with long descriptions: enough for several pages.
    private func engine() -> PluginEngine {
        let fixture = Fixture()
        fixtures.append(fixture)
        fixture.write(
            "hog.lua",
            """
            return { name = "hog", on_load = function(ctx)
              ctx.commands.add{ name = "hog", args = "[what:text]", description = string.rep("hog\\n", 25000),
                run = function(args, msg, ctx) ctx.reply("oink") end }
            end }
            """)
        fixture.write(
            "many.lua",
            """
            return { name = "many", on_load = function(ctx)
              for i = 1, 30 do
                ctx.commands.add{ name = string.format("cmd%02d", i), args = "<user:user> [n:integer]",
                  description = string.format("command %d: ", i) .. string.rep("汉字", 120),
                  run = function(args, msg, ctx) ctx.reply("ran " .. i) end }
              end
            end }
            """)
        fixture.write(
            "dice.lua",
            """
            return { name = "dice", on_load = function(ctx)
              ctx.commands.add{ name = "roll", args = "[sides:integer]", cooldown = 10, description = "roll a die",
                run = function(args, msg, ctx) ctx.reply("4") end }
              ctx.commands.add{ name = "rig", args = "<user:user> <value:integer>", roles = "gm",
                description = "fix someone's next rolls", run = function(args, msg, ctx) ctx.reply("done") end }
            end }
            """)
        let engine = PluginEngine(
            directory: fixture.plugins, store: fixture.store, limits: testLimits, clock: fixture.clock.clock,
            commands: ChatCommandSettings())
        XCTAssertEqual(engine.loadAll().errors, [])
        return engine
    }

    private func reply(_ engine: PluginEngine, _ text: String) -> String {
        let texts = sentTexts(engine.receive(msg(text, from: "u1")).actions)
        XCTAssertEqual(texts.count, 1, text)
        return texts.first ?? ""
    }

    func testAHostileDescriptionCannotPushOtherCommandsOutOfHelp() {
        let engine = engine()
        var pages: [String] = []
        var next: String? = "!help"
        while let asked = next, pages.count < 10 {
            let page = reply(engine, asked)
            pages.append(page)
            next = page.split(separator: "\n").last.flatMap { $0.firstMatch(of: /; (!help \d+) for the next page\.$/) }
                .map { String($0.1) }
        }
        XCTAssertGreaterThan(pages.count, 1, "33 commands do not fit one page")
        XCTAssertTrue(pages[0].hasPrefix("Commands (page 1 of \(pages.count)):\n"), pages[0])
        XCTAssertTrue(pages.last!.hasSuffix("\n!help <command> for one of them."), pages.last!)
        for page in pages {
            XCTAssertLessThanOrEqual(page.utf8.count, ChatCommandHelp.maxReplyBytes)
            XCTAssertLessThanOrEqual(page.split(separator: "\n").count, ChatCommandHelp.linesPerPage + 2)
        }
        let listed = pages.flatMap { $0.split(separator: "\n").dropFirst().dropLast().map(String.init) }
        let names = ["cmd01", "cmd15", "cmd30", "hog", "rig", "roll"]
        XCTAssertEqual(listed.count, 33, listed.joined(separator: "\n"))
        for name in names { XCTAssertTrue(listed.contains { $0.hasPrefix("!\(name) ") }, name) }
        XCTAssertTrue(listed.contains("!rig <user:user> <value:integer> — fix someone's next rolls (gm)"), "\(listed)")
        XCTAssertTrue(listed.contains("!roll [sides:integer] — roll a die"), "\(listed)")
        // Listing lines shorten descriptions to 80 characters; the hog's is one line, cut at registration.
        let hog = listed.first { $0.hasPrefix("!hog") } ?? ""
        XCTAssertEqual(hog, "!hog [what:text] — " + String(repeating: "hog ", count: 20).dropLast(1) + "…")
        let full = reply(engine, "!help hog")
        XCTAssertEqual(full, "!hog [what:text] — " + String(repeating: "hog ", count: 50).dropLast(1) + "…")
        XCTAssertEqual(reply(engine, "!help !cmd07").count, "!cmd07 <user:user> [n:integer] — ".count + ChatCommand.maxDescription)
        XCTAssertEqual(reply(engine, "!help roll"), "!roll [sides:integer] — roll a die; once every 10 s per member")
        XCTAssertEqual(reply(engine, "!hog"), "oink", "the hostile command itself still runs")
    }

    func testPagesOutOfRangeAndLongUnknownNames() {
        let engine = engine()
        let last = reply(engine, "!help").firstMatch(of: /page 1 of (\d+)/).map { Int($0.1)! } ?? 0
        XCTAssertGreaterThan(last, 1)
        XCTAssertEqual(reply(engine, "!help 99"), "no page 99 of commands; !help 1 to !help \(last) list them")
        XCTAssertEqual(reply(engine, "!help 0"), "no page 0 of commands; !help 1 to !help \(last) list them")
        XCTAssertTrue(reply(engine, "!help \(last)").hasPrefix("Commands (page \(last) of \(last)):"))
        let long = String(repeating: "z", count: 70_000)
        XCTAssertEqual(reply(engine, "!help \(long)"), "unknown command !\(String(repeating: "z", count: 39))…; !help lists the commands")
        XCTAssertEqual(reply(engine, "!\(long)"), "unknown command !\(String(repeating: "z", count: 39))…; !help lists the commands")
        XCTAssertEqual(
            reply(engine, "!roll \(long)"),
            "!roll: sides must be a whole number, not '\(String(repeating: "z", count: 39))…' — usage: !roll [sides:integer]")
    }

    func testDeclarationsAreBounded() {
        let cases: [(String, String)] = [
            (
                "ctx.commands.add{ name = \"a\", args = \"[\" .. string.rep(\"x\", 240) .. \"]\", run = function() end }",
                "args is 242 characters; at most 200"
            ),
            (
                "local r = {} for i = 1, 9 do r[i] = \"role\" .. i end ctx.commands.add{ name = \"a\", roles = r, run = function() end }",
                "9 roles; at most 8"
            ),
            ("ctx.commands.add{ name = \"a\", roles = string.rep(\"r\", 65), run = function() end }", "must be 1–64 characters"),
            (
                "for i = 1, 51 do ctx.commands.add{ name = \"c\" .. i, run = function() end } end",
                "a plugin declares at most 50 commands"
            ),
        ]
        assertLoadFails(onLoad: cases)
        // Fifty is fine, and declaring one again (a reload) does not count twice.
        let fixture = Fixture()
        fixture.write(
            "p.lua",
            """
            return { name = "p", on_load = function(ctx)
              for i = 1, 50 do ctx.commands.add{ name = "c" .. i, run = function() end } end
              ctx.commands.add{ name = "c1", description = "again", run = function() end }
            end }
            """)
        let engine = fixture.runtime()
        XCTAssertEqual(engine.loadAll().errors, [])
        XCTAssertEqual(engine.reload(name: "p").errors, [])
        XCTAssertEqual(sentTexts(engine.receive(msg("!help c1")).actions), ["!c1 — again"])
    }
}

extension XCTestCase {
    /// For each case (an `on_load` body, the text expected): a plugin running that body fails to load, saying so.
    fileprivate func assertLoadFails(onLoad cases: [(String, String)], file: StaticString = #filePath, line: UInt = #line) {
        for (body, expected) in cases {
            let fixture = Fixture()
            fixture.write("p.lua", "return { name = \"p\", on_load = function(ctx) \(body) end }")
            let error = fixture.runtime().loadAll().errors.first
            XCTAssertTrue(
                error?.message.contains(expected) == true, "\(body): \(error?.message ?? "no error")", file: file, line: line)
        }
    }
}
