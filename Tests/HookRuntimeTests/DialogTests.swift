import Foundation
import IMCore
import XCTest

@testable import HookRuntime

/// Dialogs: `ctx.ask` waits for the member's answer in a coroutine while other events flow; timeouts,
/// cancel words, replaced questions, limits per resumed step, reloads and restarts.
final class DialogTests: XCTestCase {
    /// Asks a city on "weather", then answers with it; logs what on_receive sees.
    static let weather = """
        return { name = "weather",
          on_receive = function(msg, ctx)
            if msg.text == "weather" or msg.text == "天气" then
              local answer, why = ctx.ask("Which city? 哪个城市？", { timeout = 30 })
              if answer then
                ctx.reply("☀️ sunny in " .. answer.text .. " for " .. answer.from)
              else
                ctx.reply("no city (" .. why .. ")")
              end
            else
              ctx.reply("heard: " .. msg.text)
            end
          end,
        }
        """

    /// Another plugin that answers every message it sees.
    static let echo = """
        return { name = "echo", on_receive = function(msg, ctx) ctx.reply("echo: " .. msg.text) end }
        """

    private var fixtures: [Fixture] = []
    override func tearDown() { fixtures.removeAll() }

    private func engine(_ sources: [String: String], fixture: Fixture? = nil, limits: HookLimits = testLimits) -> (Fixture, PluginEngine) {
        let fixture = fixture ?? Fixture()
        fixtures.append(fixture)
        for (name, source) in sources { fixture.write(name, source) }
        let engine = PluginEngine(
            directory: fixture.plugins, store: fixture.store, limits: limits, clock: fixture.clock.clock,
            commands: ChatCommandSettings(prefix: "!"))
        XCTAssertEqual(engine.loadAll().errors, [])
        return (fixture, engine)
    }

    private func replies(_ engine: PluginEngine, _ text: String, from: String = "Tom", cid: String = "lobby") -> [String] {
        let outcome = engine.incoming(msg(text, cid: cid, from: from))
        XCTAssertEqual(outcome.errors, [], "\(text)")
        return sentTexts(outcome.actions)
    }

    func testTheAnswerResumesTheHookAndIsNotSeenAsAMessage() throws {
        let (fixture, engine) = engine(["weather.lua": Self.weather, "echo.lua": Self.echo])
        // The question goes out; echo still sees the message that started it.
        XCTAssertEqual(replies(engine, "天气"), ["echo: 天气", "Which city? 哪个城市？"])
        XCTAssertEqual(engine.openDialogCount, 1)
        // Other members and other conversations flow meanwhile.
        XCTAssertEqual(replies(engine, "hello 👋", from: "Jerry"), ["echo: hello 👋", "heard: hello 👋"])
        XCTAssertEqual(replies(engine, "hi", cid: "garden"), ["echo: hi", "heard: hi"])
        // Tom's next message in the lobby is the answer: consumed by the dialog, not on_receive.
        XCTAssertEqual(replies(engine, "上海"), ["☀️ sunny in 上海 for Tom"])
        XCTAssertEqual(engine.openDialogCount, 0)
        XCTAssertEqual(replies(engine, "上海"), ["echo: 上海", "heard: 上海"])
        // The record of the open dialog was removed with it.
        XCTAssertEqual(try fixture.store.keys(plugin: dialogStoreNamespace, prefix: "", now: fixture.clock.now), [])
    }

    func testTimeoutCancelWordsAndTheTimerDriver() {
        let (fixture, engine) = engine(["weather.lua": Self.weather])
        XCTAssertEqual(replies(engine, "weather"), ["Which city? 哪个城市？"])
        XCTAssertEqual(engine.nextTimerDue, fixture.clock.now + 30)
        fixture.clock.advance(by: 29)
        XCTAssertEqual(sentTexts(engine.fireDueTimers().actions), [])
        fixture.clock.advance(by: 1)
        XCTAssertEqual(sentTexts(engine.fireDueTimers().actions), ["no city (timeout)"])
        XCTAssertNil(engine.nextTimerDue)
        XCTAssertEqual(replies(engine, "Paris"), ["heard: Paris"])
        // Cancel words, in any case and with the command prefix.
        for word in ["取消", "Cancel", "!cancel"] {
            XCTAssertEqual(replies(engine, "weather"), ["Which city? 哪个城市？"])
            XCTAssertEqual(replies(engine, word), ["no city (cancelled)"], word)
        }
    }

    static let setup = """
        return { name = "setup",
          on_load = function(ctx)
            ctx.commands.add{ name = "setup", description = "set up your profile",
              run = function(args, msg, ctx)
                local name = ctx.ask("Your name?", { cancel = { "stop" } })
                if not name then return ctx.reply("setup stopped") end
                local age
                repeat
                  local a, why = ctx.ask("Your age, " .. name.text .. "?")
                  if not a then return ctx.reply("setup stopped (" .. why .. ")") end
                  age = tonumber(a.text)
                  if not age then ctx.reply("a number, please") end
                until age
                ctx.state.user(msg.from).set("profile", { name = name.text, age = age })
                ctx.reply("saved: " .. name.text .. ", " .. age)
              end }
            ctx.commands.add{ name = "ping", run = function(args, msg, ctx) ctx.reply("pong") end }
          end,
        }
        """

    func testAMultiStepCommandWithValidationAndCommandsInBetween() throws {
        let (fixture, engine) = engine(["setup.lua": Self.setup])
        XCTAssertEqual(replies(engine, "!setup"), ["Your name?"])
        XCTAssertEqual(replies(engine, "小明"), ["Your age, 小明?"])
        // A command is not an answer: it runs, the dialog keeps waiting.
        XCTAssertEqual(replies(engine, "!ping"), ["pong"])
        XCTAssertEqual(replies(engine, "twelve"), ["a number, please", "Your age, 小明?"])
        XCTAssertEqual(replies(engine, "12"), ["saved: 小明, 12"])
        XCTAssertEqual(
            try fixture.store.get(plugin: "setup", key: "user:Tom:profile", now: fixture.clock.now),
            .object(["name": .string("小明"), "age": .int(12)]))
        // Its own cancel word ("stop"), and the default ones no longer cancel the first question.
        XCTAssertEqual(replies(engine, "!setup"), ["Your name?"])
        XCTAssertEqual(replies(engine, "stop"), ["setup stopped"])
        // Asking again for the same member ends the first dialog ("replaced").
        XCTAssertEqual(replies(engine, "!setup"), ["Your name?"])
        XCTAssertEqual(replies(engine, "Tom"), ["Your age, Tom?"])
        XCTAssertEqual(replies(engine, "!setup"), ["Your name?", "setup stopped (replaced)"])
        XCTAssertEqual(engine.openDialogCount, 1)
    }

    func testWhereAskIsRefusedWithAClearError() {
        let (_, engine) = engine([
            "review.lua": """
            return { name = "review",
              moderation = function(msg, ctx) if msg.text == "ask in review" then ctx.ask("really?") end end,
              on_receive = function(msg, ctx)
                if msg.text == "ask in timer" then ctx.after(1, function(ctx) ctx.ask("late?") end) end
                if msg.text == "ask in coroutine" then
                  local co = coroutine.create(function() return ctx.ask("inner?") end)
                  local ok, err = coroutine.resume(co)
                  error(err, 0)
                end
                if msg.text == "yield" then coroutine.yield(1) end
                if msg.text == "bad options" then ctx.ask("x", { timout = 5 }) end
              end }
            """
        ])
        func error(_ text: String) -> String {
            let errors = engine.incoming(msg(text, cid: "lobby", from: "Tom")).errors
            return errors.map { "\($0)" }.joined()
        }
        XCTAssertTrue(
            error("ask in review").contains("ctx.ask: not allowed while reviewing a message (moderation)"), error("ask in review"))
        XCTAssertTrue(error("ask in coroutine").contains("ctx.ask: call it from the hook itself"))
        XCTAssertTrue(error("yield").contains("coroutine.yield outside a coroutine of the plugin"))
        XCTAssertTrue(error("bad options").contains("ctx.ask: unknown option 'timout' (timeout, member, cancel)"))
        _ = engine.incoming(msg("ask in timer", cid: "lobby", from: "Tom"))
        fixtures[0].clock.advance(by: 1)
        let timer = engine.fireDueTimers().errors.map { "\($0)" }.joined()
        XCTAssertTrue(timer.contains("ctx.ask: only on_receive, on_cmd, on_member_joined and commands"), timer)
        XCTAssertEqual(engine.openDialogCount, 0)
    }

    func testEachResumedStepGetsItsOwnInstructionBudget() {
        let limits = HookLimits(instructionBudget: 200_000, deadline: 2.0, loadDeadline: 5.0, memoryBytes: 8 * 1024 * 1024)
        let (_, engine) = engine(
            [
                "busy.lua": """
                return { name = "busy",
                  on_receive = function(msg, ctx)
                    if msg.text ~= "go" then return end
                    local n = 0
                    for i = 1, 60000 do n = n + i end            -- most of one step's budget
                    local a = ctx.ask("more?")
                    for i = 1, 60000 do n = n + i end            -- most of the next step's budget
                    if a.text == "forever" then while true do end end
                    ctx.reply("done " .. a.text)
                  end }
                """
            ], limits: limits)
        XCTAssertEqual(replies(engine, "go"), ["more?"])
        XCTAssertEqual(replies(engine, "yes"), ["done yes"])
        XCTAssertEqual(replies(engine, "go"), ["more?"])
        let outcome = engine.incoming(msg("forever", cid: "lobby", from: "Tom"))
        XCTAssertEqual(outcome.errors.map(\.reason), [.instructionBudget])
        XCTAssertEqual(engine.openDialogCount, 0)
        XCTAssertEqual(replies(engine, "go"), ["more?"])
    }

    func testOnMemberJoinedAsksTheNewMember() {
        let (_, engine) = engine([
            "greet.lua": """
            return { name = "greet",
              on_member_joined = function(ev, ctx)
                local a = ctx.ask("Welcome! Where are you from?")
                if a then ctx.reply("Nice, " .. ev.members[1] .. " from " .. a.text) end
              end }
            """
        ])
        XCTAssertEqual(sentTexts(engine.memberJoined(cid: "lobby", members: ["Lily"]).actions), ["Welcome! Where are you from?"])
        XCTAssertEqual(replies(engine, "北京", from: "Tom"), [])
        XCTAssertEqual(replies(engine, "北京", from: "Lily"), ["Nice, Lily from 北京"])
        let several = engine.memberJoined(cid: "lobby", members: ["A", "B"]).errors.map { "\($0)" }.joined()
        XCTAssertTrue(several.contains("say who answers with {member = uid}"), several)
    }

    func testOnCmdAsksTheSenderAndAnswersComeAsMessages() {
        let (_, engine) = engine([
            "vote.lua": """
            return { name = "vote",
              on_cmd = function(cmd, ctx)
                if cmd.action ~= "vote" then return end
                local a, why = ctx.ask("Your vote on " .. cmd.ext.topic .. "?", { cancel = false, timeout = 10 })
                ctx.reply(a and (cmd.from .. " votes " .. a.text) or why)
              end }
            """
        ])
        let asked = engine.command(HookCommand(action: "vote", ext: ["topic": .string("午饭")], cid: "lobby", from: "Tom"))
        XCTAssertEqual(asked.errors, [])
        XCTAssertEqual(sentTexts(asked.actions), ["Your vote on 午饭?"])
        // cancel = false: "cancel" is an answer like any other
        XCTAssertEqual(replies(engine, "cancel"), ["Tom votes cancel"])
    }

    func testAReloadEndsOpenDialogsAndTheMemberIsTold() throws {
        let (fixture, engine) = engine(["weather.lua": Self.weather])
        XCTAssertEqual(replies(engine, "weather"), ["Which city? 哪个城市？"])
        XCTAssertEqual(replies(engine, "weather", from: "Jerry", cid: "garden"), ["Which city? 哪个城市？"])
        // A reload: each coroutine continues with nil, "ended" and says so itself.
        let reloaded = engine.reload(name: "weather")
        XCTAssertEqual(sentTexts(reloaded.actions), ["no city (ended)", "no city (ended)"])
        XCTAssertEqual(engine.openDialogCount, 0)
        // A plugin that says nothing when ended: the host tells the member.
        fixture.write(
            "weather.lua", "return { name = \"weather\", on_receive = function(msg, ctx) ctx.ask(\"Which city?\") end }")
        engine.reload(name: "weather")
        XCTAssertEqual(replies(engine, "weather"), ["Which city?"])
        let silent = engine.reload(name: "weather")
        XCTAssertEqual(
            sentTexts(silent.actions),
            ["Tom: weather stopped waiting for your answer “Which city?” (the plugin was reloaded); please start again."])
        XCTAssertEqual(try fixture.store.keys(plugin: dialogStoreNamespace, prefix: "", now: fixture.clock.now), [])
    }

    func testARestartEndsRecordedDialogs() throws {
        let (fixture, engine) = engine(["weather.lua": Self.weather])
        XCTAssertEqual(replies(engine, "weather"), ["Which city? 哪个城市？"])
        // Stopping says nothing and keeps the record; the next process ends it and tells the member.
        XCTAssertEqual(sentTexts(engine.shutdown().actions), [])
        let restarted = PluginEngine(directory: fixture.plugins, store: fixture.store, limits: testLimits, clock: fixture.clock.clock)
        let report = restarted.loadAll()
        XCTAssertEqual(
            report.actions.compactMap { a -> String? in
                if case .send(let cid, let m, _) = a.kind { return "\(cid) \(m.text ?? "")" }
                return nil
            },
            ["lobby Tom: weather stopped waiting for your answer “Which city? 哪个城市？” (the bot restarted); please start again."])
        // The member's next message is an ordinary one.
        XCTAssertEqual(sentTexts(restarted.incoming(msg("Paris", cid: "lobby", from: "Tom")).actions), ["heard: Paris"])
    }

    func testOpenDialogsPerPluginAreCapped() {
        let (_, engine) = engine([
            "many.lua": "return { name = \"many\", on_receive = function(msg, ctx) ctx.ask(nil, { timeout = 600 }) end }"
        ])
        for i in 0..<maxDialogsPerPlugin {
            XCTAssertEqual(engine.incoming(msg("hi", cid: "lobby", from: "m\(i)")).errors, [])
        }
        XCTAssertEqual(engine.openDialogCount, maxDialogsPerPlugin)
        let refused = engine.incoming(msg("hi", cid: "lobby", from: "one-more")).errors.map { "\($0)" }.joined()
        XCTAssertTrue(refused.contains("ctx.ask: the plugin has 1000 open dialogs, the most it may hold"), refused)
    }
}
