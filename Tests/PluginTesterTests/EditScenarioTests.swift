import Foundation
import PluginTester
import XCTest

/// `hookbot test` scenarios can send an edit: the routing core reviews it like a send (a block refuses
/// it) and an allowed edit reaches `on_edit` with its new version.
final class EditScenarioTests: XCTestCase {
    func testAnEditIsReviewedAndReachesOnEdit() async throws {
        let folder = try ScenarioFolder(
            self,
            files: [
                "editwatch.lua": """
                return {
                  name = "editwatch",
                  moderation = function(msg, ctx)
                    if (msg.text or ""):find("scam") then return { verdict = "block", reason = "no scams" } end
                  end,
                  on_edit = function(ev, ctx)
                    ctx.send(ev.cid, "edited " .. ev.id .. " by " .. ev.from .. ": " .. ev.text .. " at " .. ev.edited_at)
                  end,
                }
                """,
                "tests/editwatch.test.lua": """
                return { cases = {
                  { name = "allowed", steps = {
                    { edit = { id = "m7", text = "fixed typo" },
                      expect = { verdict = "allow", replies = { { text = "edited m7 by Tom: fixed typo at 1700000000000" } } } } } },
                  { name = "blocked", steps = {
                    { edit = { id = "m7", text = "a scam" }, expect = { verdict = "block", reason = "no scams", replies = {} } } } },
                } }
                """,
            ])
        let (summary, lines) = await folder.run()
        let text = lines.joined(separator: "\n")
        XCTAssertEqual(summary.failed, 0, text)
        XCTAssertEqual(summary.passed, 2, text)
    }
}
