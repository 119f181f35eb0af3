import Foundation
import PluginTester
import XCTest

/// `hookbot test` answers `ctx.http` from recordings with the same redirect rules as a running bot: a
/// recorded 3xx to a recorded host is followed (each hop listed in the step's `http`), one to any other
/// host is refused with its 3xx and the reason, and nothing is asked of the refused host.
final class RecordedRedirectTests: XCTestCase {
    func testRecordedRedirectsFollowTheAllowList() async throws {
        let folder = try ScenarioFolder(
            self,
            files: [
                "fetch.lua": """
                return {
                  on_receive = function(msg, ctx)
                    ctx.http.get(msg.text, function(res, ctx)
                      ctx.reply(res.ok and ("got " .. res.body) or ("failed " .. tostring(res.status) .. ": " .. res.error))
                    end)
                  end,
                }
                """,
                "tests/fetch.test.lua": """
                return {
                  http = {
                    ["GET https://api.example.org/moved"] = { status = 301, headers = { Location = "/a" } },
                    ["GET https://api.example.org/a"] = { body = "the answer" },
                    ["GET https://api.example.org/away"] = { status = 302, headers = { location = "http://127.0.0.1:9/secret" } },
                    ["GET https://api.example.org/down"] = { status = 302, headers = { location = "http://api.example.org/a" } },
                  },
                  cases = { { name = "redirects", steps = {
                    { message = "https://api.example.org/moved",
                      expect = { replies = { "got the answer" }, http = {
                        { url = "https://api.example.org/moved", status = 301 }, { url = "https://api.example.org/a", status = 200 } } } },
                    { message = "https://api.example.org/away",
                      expect = { replies = {
                        "failed 302: redirect refused: 127.0.0.1:9 is not in this plugin's allowed hosts ([http.fetch] hosts)" },
                        http = { { url = "https://api.example.org/away", status = 302 } } } },
                    { message = "https://api.example.org/down",
                      expect = { replies = { { match = "^failed 302: redirect refused: from https down to http" } },
                        http = { { url = "https://api.example.org/down", status = 302 } } } },
                  } } },
                }
                """,
            ])
        let (summary, lines) = await folder.run("tests/fetch.test.lua")
        XCTAssertEqual(summary.failed, 0, lines.joined(separator: "\n"))
        XCTAssertEqual(summary.passed, 1)
    }
}
