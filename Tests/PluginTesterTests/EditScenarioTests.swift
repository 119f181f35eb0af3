import Foundation
import PluginTester
import XCTest

/// `hookbot test` scenarios can send an edit: the routing core reviews it like a send (a block refuses
/// it) and an allowed edit reaches `on_edit` with its new version.
final class EditScenarioTests: XCTestCase {
    func testAnEditIsReviewedAndReachesOnEdit() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("plugin-tester-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("tests"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try """
        return {
          name = "editwatch",
          moderation = function(msg, ctx)
            if (msg.text or ""):find("scam") then return { verdict = "block", reason = "no scams" } end
          end,
          on_edit = function(ev, ctx)
            ctx.send(ev.cid, "edited " .. ev.id .. " by " .. ev.from .. ": " .. ev.text .. " at " .. ev.edited_at)
          end,
        }
        """.write(to: dir.appendingPathComponent("editwatch.lua"), atomically: true, encoding: .utf8)
        try """
        return { cases = {
          { name = "allowed", steps = {
            { edit = { id = "m7", text = "fixed typo" },
              expect = { verdict = "allow", replies = { { text = "edited m7 by Tom: fixed typo at 1700000000000" } } } } } },
          { name = "blocked", steps = {
            { edit = { id = "m7", text = "a scam" }, expect = { verdict = "block", reason = "no scams", replies = {} } } } },
        } }
        """.write(to: dir.appendingPathComponent("tests/editwatch.test.lua"), atomically: true, encoding: .utf8)
        var lines: [String] = []
        let summary = await PluginTestRunner { lines.append($0) }.run(paths: [dir.path])
        let text = lines.joined(separator: "\n")
        XCTAssertEqual(summary.failed, 0, text)
        XCTAssertEqual(summary.passed, 2, text)
    }
}
