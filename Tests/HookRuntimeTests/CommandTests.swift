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
            commands: CommandSettings(prefix: prefix, roles: roles))
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
        for (body, expected) in cases {
            let fixture = Fixture()
            fixture.write("p.lua", "return { name = \"p\", on_load = function(ctx) \(body) end }")
            let error = fixture.runtime().loadAll().errors.first
            XCTAssertTrue(error?.message.contains(expected) == true, "\(body): \(error?.message ?? "no error")")
        }
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
