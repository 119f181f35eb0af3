import Foundation
import PluginTester
import XCTest

/// `hookbot test` scenarios give the bots the members a running bot learns from the server (`members`),
/// joins with a time and founders (`join = {founding, at, ago}`), counts the messages it routes, and
/// records locks; bad member tables are errors that name the place.
final class MembersScenarioTests: XCTestCase {
    private var folder: ScenarioFolder!

    override func setUpWithError() throws {
        folder = try ScenarioFolder(
            self,
            files: [
                "probe.lua": """
                return {
                  name = "probe",
                  on_member_joined = function(ev, ctx)
                    for _, uid in ipairs(ev.members) do
                      local m = ctx.conv(ev.cid).member(uid)
                      ctx.reply(string.format("%s joined %s age %d", uid, ev.founding and "founding" or "later", ctx.now() - m.joined_at))
                    end
                  end,
                  on_receive = function(msg, ctx)
                    local conv = ctx.conv(msg.cid)
                    local who = (msg.text or ""):match("^who (%w+)$")
                    if who then
                      local m = conv.member(who)
                      if not m then return ctx.reply(who .. " unknown") end
                      ctx.reply(string.format("%s %s %d %s age %d", who, m.role, m.messages, tostring(m.founder), ctx.now() - m.joined_at))
                    elseif msg.text == "lock" then conv.lock("wave")
                    elseif msg.text == "locked?" then ctx.reply(tostring(conv.locked()))
                    end
                  end,
                }
                """
            ])
    }

    private func run(_ scenario: String) async throws -> (PluginTestRunner.Summary, String) {
        try await folder.report(scenario, as: "probe.test.lua")
    }

    func testMembersJoinTimesCountsFoundersAndLocks() async throws {
        let (summary, text) = try await run(
            """
            return {
              members = { c1 = { Spike = { ago = 86400, role = "owner", founder = true, messages = 40 }, Tom = { ago = 120 } } },
              cases = {
                { name = "members the bot knows",
                  steps = {
                    { message = "who Spike", expect = { replies = { "Spike owner 40 true age 86400" } } },
                    { message = "who Tom", expect = { replies = { "Tom member 1 nil age 120" } } },
                    { advance = 60 },
                    { message = { text = "who Tom", from = "Spike" }, expect = { replies = { "Tom member 2 nil age 180" } } },
                    { message = "who Jerry", expect = { replies = { "Jerry unknown" } } },
                  } },
                { name = "joins, founders and a join time in the past",
                  members = { c1 = { "Spike" } },
                  steps = {
                    { join = { members = { "Tyke" }, founding = true }, expect = { replies = { "Tyke joined founding age 0" } } },
                    { join = { members = { "Jerry" }, ago = 30 }, expect = { replies = { "Jerry joined later age 30" } } },
                    { message = "who Spike", expect = { replies = { "Spike member 0 nil age 0" } } },
                    { leave = { members = { "Jerry" } } },
                    { message = "who Jerry", expect = { replies = { "Jerry unknown" } } },
                  } },
                { name = "a lock is recorded and known",
                  steps = {
                    { message = "locked?", expect = { replies = { "false" } } },
                    { message = "lock", expect = { actions = { { kind = "lock", cid = "c1", reason = "wave" } } } },
                    { message = "locked?", expect = { replies = { "true" } } },
                  } },
              },
            }
            """)
        XCTAssertEqual(summary.failed, 0, text)
        XCTAssertEqual(summary.passed, 3, text)
    }

    func testBadMemberTablesAreErrors() async throws {
        for (members, error) in [
            (#"{ c1 = { Tom = { joined = 5 } } }"#, "members.c1.Tom: unknown field 'joined'"),
            (#"{ c1 = { Tom = { role = "admin" } } }"#, #"members.c1.Tom.role must be "owner", "manager" or "member""#),
            (#"{ c1 = { Tom = { ago = "long" } } }"#, "members.c1.Tom.ago must be a number"),
            (#"{ c1 = 3 }"#, "members.c1 must be a list of names or a table { [uid] = {...} }"),
        ] {
            let (summary, text) = try await run("return { members = \(members), cases = { { steps = {} } } }")
            XCTAssertEqual(summary.failed, 1, text)
            XCTAssertTrue(text.contains(error), "\(members): \(text)")
        }
    }
}
