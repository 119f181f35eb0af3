import Foundation
import PluginTester
import XCTest

/// `on_offline` in `hookbot test` scenarios (docs/PLUGINS.md, "on_offline"): `offline` steps feed a message's
/// offline receivers to the chain and `pushes` checks what each one gets; the chain rule, drops, failures,
/// overruns and invalid results as real Lua plugins produce them; the shipped example's scenarios.
final class OfflineHookScenarioTests: XCTestCase {
    private var folder: ScenarioFolder!

    override func setUpWithError() throws {
        folder = try ScenarioFolder(
            self,
            files: [
                "quiet.lua": """
                return {
                  name = "quiet",
                  priority = 10,
                  on_offline = function(msg, receivers, ctx)
                    if msg.text == "boom" then error("exploded") end
                    if msg.text == "spin" then while true do end end
                    if msg.text == "hush" then return false end
                    if msg.text == "stranger" then return { Nobody = false } end
                    if msg.text == "badge" then return { Jerry = { badge = "many" } } end
                    if msg.text == "index" then return { [2] = { title = "second" } } end
                    if msg.text == "far" then return { [9] = false } end
                    return { Spike = false, Jerry = { body = "psst", data = { n = #receivers } } }
                  end,
                }
                """,
                "tally.lua": """
                return {
                  name = "tally",
                  on_offline = function(msg, receivers, ctx)
                    local ids = {}
                    for _, r in ipairs(receivers) do ids[#ids + 1] = r.id .. (r.mentioned and "@" or "") end
                    ctx.log("info", "tally saw " .. table.concat(ids, ","))
                    return { [1] = { sound = "bell" } }
                  end,
                }
                """,
            ])
    }

    private func run(_ scenario: String) async throws -> (PluginTestRunner.Summary, String) {
        try await folder.report(scenario, as: "quiet.test.lua")
    }

    func testTheChainRewritesDropsAndEachPluginSeesThePreviousResult() async throws {
        let (summary, text) = try await run(
            """
            local three = { "Jerry", "Spike", "Tyke" }
            return { plugins = { "quiet", "tally" }, cases = {
              { name = "rewrite, drop, chain", steps = {
                { offline = { message = "cheese", receivers = three, mentions = { "Tyke" } },
                  expect = {
                    pushes = { Jerry = { body = "psst", sound = "bell", title = "c1", data = { n = 3, cid = "c1" } },
                               Spike = false, Tyke = { body = "Tom: cheese", sound = "default" } },
                    logs = { "tally saw Jerry,Tyke@" } } } } },
              { name = "false drops everyone and ends the chain", steps = {
                { offline = { message = "hush", receivers = three }, expect = { pushes = { Jerry = false, Spike = false, Tyke = false } } } } },
              { name = "list indices name the receivers as listed", steps = {
                { offline = { message = "index", receivers = three },
                  expect = { pushes = { Jerry = { sound = "bell" }, Spike = { title = "second", sound = "default" }, Tyke = true } } } } },
              { name = "a wrong expectation fails with the difference", steps = {
                { offline = { message = "hush", receivers = three }, expect = { pushes = { Jerry = true, Spike = false } } } } },
            } }
            """)
        XCTAssertEqual(summary.passed, 3, text)
        XCTAssertEqual(summary.failed, 1, text)
        XCTAssertTrue(text.contains("pushes.Jerry: expected true, got false"), text)
        XCTAssertTrue(text.contains("pushes.Tyke: expected no receiver, got false"), text)
    }

    func testFailuresOverrunsAndInvalidResultsLeaveThePreviousNotifications() async throws {
        let (summary, text) = try await run(
            """
            local two = { "Jerry", "Spike" }
            local function expect(text, err)
              return { offline = { message = text, receivers = two },
                expect = { pushes = { Jerry = { body = "Tom: " .. text, sound = "bell" }, Spike = { body = "Tom: " .. text } },
                           errors = { err }, logs = { "tally saw Jerry,Spike" } } }
            end
            return { plugins = { "quiet", "tally" }, cases = {
              { name = "an error", steps = { expect("boom", "exploded") } },
              { name = "an overrun", steps = { expect("spin", "on_offline") } },
              { name = "a receiver not listed", steps = { expect("stranger", "'Nobody', who is not among the receivers") } },
              { name = "a bad field", steps = { expect("badge", "badge must be an integer") } },
              { name = "an index past the list", steps = { expect("far", "index 9; there are 2 receivers") } },
            } }
            """)
        XCTAssertEqual(summary.failed, 0, text)
        XCTAssertEqual(summary.passed, 5, text)
    }

    /// docs/PUSH.md's worked example is the shipped plugin, as written.
    func testThePushDocsExampleIsTheShippedPlugin() throws {
        let docs = try String(contentsOf: packageRoot.appendingPathComponent("docs/PUSH.md"), encoding: .utf8)
        let section = try XCTUnwrap(docs.range(of: "## on_offline\n")).upperBound
        let start = try XCTUnwrap(docs.range(of: "```lua\n", range: section..<docs.endIndex)).upperBound
        let end = try XCTUnwrap(docs.range(of: "\n```\n", range: start..<docs.endIndex)).lowerBound
        let plugin = try String(
            contentsOf: packageRoot.appendingPathComponent("examples/OfflinePush/plugins/mentions-only.lua"), encoding: .utf8)
        XCTAssertTrue(plugin.contains(docs[start..<end]), "docs/PUSH.md's example differs from mentions-only.lua")
    }

    func testTheShippedMentionsOnlyExamplePasses() async {
        var lines: [String] = []
        let summary = await PluginTestRunner { lines.append($0) }
            .run(paths: [packageRoot.appendingPathComponent("examples/OfflinePush/plugins").path])
        XCTAssertEqual(summary.failed, 0, lines.joined(separator: "\n"))
        XCTAssertEqual(summary.passed, 4, lines.joined(separator: "\n"))
    }
}
