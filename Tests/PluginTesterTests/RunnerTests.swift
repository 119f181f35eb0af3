import Foundation
import HookbotTestSupport
import PluginTester
import XCTest

/// The runner itself: failures are reported with a diff and counted, hook errors fail a step, bad
/// scenario files are reported, and `hookbot test` exits non-zero.
final class RunnerTests: XCTestCase {
    private var folder: ScenarioFolder!

    override func setUpWithError() throws {
        folder = try ScenarioFolder(
            self,
            files: [
                "echo.lua": """
                return {
                  name = "echo",
                  config = { prefix = "echo: " },
                  on_receive = function(msg, ctx)
                    if msg.text == "boom" then error("exploded") end
                    ctx.reply(ctx.config.prefix .. msg.text)
                    ctx.state.incr("seen")
                  end,
                }
                """
            ])
    }

    private func run(_ scenario: String) async throws -> (PluginTestRunner.Summary, [String]) {
        try folder.write("tests/echo.test.lua", scenario)
        return await folder.run()
    }

    func testPassingAndFailingCasesAreCountedWithADiff() async throws {
        let (summary, lines) = try await run(
            """
            return { cases = {
              { name = "good", steps = { { message = "hi", expect = { replies = { "echo: hi" }, state = { seen = 1 } } } } },
              { name = "bad", steps = {
                { message = "hi", expect = { replies = { "echo: hello", "more" }, verdict = "block" } } } },
            } }
            """)
        XCTAssertEqual(summary.passed, 1)
        XCTAssertEqual(summary.failed, 1)
        let text = lines.joined(separator: "\n")
        XCTAssertTrue(lines.contains("PASS echo: good"), text)
        XCTAssertTrue(lines.contains("FAIL echo: bad"), text)
        XCTAssertTrue(text.contains("step 1 (message \"hi\")"), text)
        XCTAssertTrue(text.contains("verdict: expected \"block\", got \"allow\""), text)
        XCTAssertTrue(text.contains("- \"echo: hello\""), text)
        XCTAssertTrue(text.contains("- \"more\""), text)
        XCTAssertTrue(text.contains("+ {cid = \"c1\", text = \"echo: hi\""), text)
        XCTAssertEqual(lines.last, "1 passed, 1 failed")
    }

    func testHookErrorsFailUnlessExpected() async throws {
        let (summary, lines) = try await run(
            """
            return { cases = {
              { name = "unexpected", steps = { { message = "boom" } } },
              { name = "expected", steps = { { message = "boom", expect = { errors = { "exploded" } } } } },
            } }
            """)
        XCTAssertEqual(summary.failed, 1, lines.joined(separator: "\n"))
        XCTAssertTrue(lines.contains("FAIL echo: unexpected"))
        XCTAssertTrue(lines.joined(separator: "\n").contains("+ \"plugin echo on_receive at echo.lua:5: "), lines.joined(separator: "\n"))
    }

    func testConfigStateAndTimeChecks() async throws {
        let (summary, lines) = try await run(
            """
            return { config = { prefix = "> " }, cases = {
              { name = "file config", steps = { { message = "a", expect = { replies = { "> a" } } } } },
              { name = "case config", config = { prefix = "# " }, steps = {
                { message = "a", expect = { replies = { { match = "^# %a$" } } } },
                { expect_state = { seen = 1 }, expect = { absent = { "other" } } },
                { set_state = { other = { 1, 2 } } },
                { expect_state = { other = { 1, 2 } } },
              } },
              { name = "state is fresh per case", steps = { { expect = { absent = { "seen", "other" } } } } },
            } }
            """)
        XCTAssertEqual(summary.failed, 0, lines.joined(separator: "\n"))
        XCTAssertEqual(summary.passed, 3)
    }

    func testTimersEventsAndReload() async throws {
        try folder.write(
            "ticker.lua",
            """
            return {
              on_load = function(ctx) ctx.every(60, function(ctx) ctx.send("ops", "tick " .. ctx.state.incr("ticks")) end) end,
              on_recall = function(ev, ctx) ctx.reply("recalled " .. ev.id .. " by " .. ev.by) end,
              on_conversation_updated = function(ev, ctx) ctx.update_attr(ev.cid, "seen", ev.attrs.topic) end,
              on_cmd = function(cmd, ctx) ctx.send_cmd(cmd.cid, "pong", { n = cmd.ext.n + 1 }) end,
            }
            """)
        try folder.write(
            "tests/ticker.test.lua",
            """
            return { cases = { { name = "all of it", steps = {
              { advance = 59, expect = { replies = {} } },
              { advance = 1, expect = { replies = { { cid = "ops", text = "tick 1" } } } },
              { advance = 3600, expect = { replies = { "tick 2" } } },
              { recall = { id = "m7", by = "Tom" }, expect = { replies = { "recalled m7 by Tom" } } },
              { update = { attrs = { topic = "cats" } }, expect = { actions = { { kind = "update_attr", key = "seen", value = "cats" } } } },
              { cmd = { action = "ping", ext = { n = 1 } }, expect = { commands = { { action = "pong", ext = { n = 2 } } } } },
              { reload = true, expect = { replies = {} } },
              { advance = 60, expect = { replies = { "tick 3" } } },
            } } } }
            """)
        let (summary, lines) = await folder.run("tests/ticker.test.lua")
        XCTAssertEqual(summary.failed, 0, lines.joined(separator: "\n"))
        XCTAssertEqual(summary.passed, 1)
    }

    func testBrokenScenarioFilesAreFailures() async throws {
        var (summary, lines) = try await run("return { cases = { { steps = { { mesage = 'typo' } } } } }")
        XCTAssertEqual(summary.failed, 1)
        XCTAssertTrue(lines.joined().contains("unknown field 'mesage'"), lines.joined(separator: "\n"))
        (summary, lines) = try await run("return { cases = {")
        XCTAssertEqual(summary.failed, 1)
        XCTAssertTrue(lines[0].hasPrefix("FAIL echo.test.lua:"), lines.joined(separator: "\n"))
        (summary, lines) = try await run("return { plugins = { 'missing' }, cases = { { steps = {} } } }")
        XCTAssertEqual(summary.failed, 1)
        XCTAssertTrue(lines.joined().contains("no plugin missing"), lines.joined(separator: "\n"))
    }

    /// Two bots echoing each other run through the same routing core as a running bot: the hop marker
    /// stops them, and lowering `max_hops` stops them sooner.
    func testBotsAnswerEachOtherUntilTheHopLimit() async throws {
        try folder.write(
            "parrot.lua",
            """
            return { on_receive = function(msg, ctx) if msg.from == "modbot" then ctx.reply("parrot: " .. msg.text) end end }
            """)
        let (summary, lines) = try await run(
            """
            return { max_hops = 4, bots = { { id = "parrot", plugins = "parrot" } },
              cases = {
                { name = "four hops", steps = { { message = "hi", expect = { replies = {
                  { text = "echo: hi", from = "modbot", hops = 1 },
                  { text = "parrot: echo: hi", from = "parrot", hops = 2, reply_to = "modbot-1" },
                  { text = "echo: parrot: echo: hi", from = "modbot", hops = 3 },
                  { text = "parrot: echo: parrot: echo: hi", from = "parrot", hops = 4 },
                } } } } },
              } }
            """)
        XCTAssertEqual(summary.failed, 0, lines.joined(separator: "\n"))
        let (bad, badLines) = try await run("return { bots = { { id = 'modbot', plugins = 'echo' } }, cases = { { steps = {} } } }")
        XCTAssertEqual(bad.failed, 1)
        XCTAssertTrue(badLines.joined().contains("bots[1].id 'modbot' is already a bot of this scenario"), badLines.joined(separator: "\n"))
    }

    /// Recorded HTTP responses answer `ctx.http`; an unrecorded URL fails as a value the plugin sees, and a
    /// body over the plugin's cap fails as too large.
    func testRecordedHTTPResponses() async throws {
        try folder.write(
            "fetch.lua",
            """
            return {
              on_receive = function(msg, ctx)
                local id, err = ctx.http.get(msg.text, function(res, ctx)
                  ctx.reply(res.ok and ("got " .. res.json.answer) or ("failed: " .. res.error))
                end)
                if not id then ctx.reply("refused: " .. err) end
              end,
            }
            """)
        try folder.write(
            "tests/fetch.test.lua",
            """
            return {
              http = { ["GET https://api.example.org/a"] = { body = { answer = 42 } },
                       ["GET https://api.example.org/big"] = { body = string.rep("x", 2 * 1024 * 1024) } },
              cases = { { name = "calls", steps = {
                { message = "https://api.example.org/a",
                  expect = { replies = { "got 42" }, http = { { url = "https://api.example.org/a", status = 200 } } } },
                { message = "https://api.example.org/b",
                  expect = { replies = { { match = "^failed: failed: no response recorded for GET" } } } },
                { message = "https://api.example.org/big", expect = { replies = { { match = "^failed: too large" } } } },
                { message = "https://other.example.org/a",
                  expect = { replies = { { contains = "not in this plugin's allowed hosts" } }, http = {} } },
              } } },
            }
            """)
        let (summary, lines) = await folder.run("tests/fetch.test.lua")
        XCTAssertEqual(summary.failed, 0, lines.joined(separator: "\n"))
        XCTAssertEqual(summary.passed, 1)
    }

    func testFilterSelectsCases() async throws {
        try folder.write("tests/echo.test.lua", "return { cases = { { name = 'one', steps = {} }, { name = 'two', steps = {} } } }")
        let (summary, _) = await folder.run(filter: "two")
        XCTAssertEqual(summary.results.map(\.name), ["echo: two"])
    }

    /// `hookbot test` prints the report and exits non-zero when a case fails.
    func testCommandExitStatus() throws {
        guard let binary = builtProduct("hookbot") else { throw XCTSkip("hookbot is not built") }
        try folder.write(
            "tests/echo.test.lua",
            """
            return { cases = { { name = "wrong", steps = { { message = "hi", expect = { replies = { "nope" } } } } } } }
            """)
        let (status, output) = try runProcess(binary, ["test", folder.url.path])
        XCTAssertNotEqual(status, 0)
        XCTAssertTrue(output.contains("FAIL echo: wrong"), output)
        XCTAssertTrue(output.contains("- \"nope\""), output)
        XCTAssertTrue(output.hasSuffix("0 passed, 1 failed\n"), output)

        let (okStatus, okOutput) = try runProcess(binary, ["test", packageRoot.appendingPathComponent("plugins").path])
        XCTAssertEqual(okStatus, 0, okOutput)
    }
}
