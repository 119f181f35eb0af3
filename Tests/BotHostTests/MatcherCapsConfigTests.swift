import BotHost
import Foundation
import XCTest

/// The text matcher's caps set in `hookbot.toml` (`[plugins] matcher_*`): checked by the configuration
/// (`hookbot check`) with file, line, key and range, and applied to the plugins' `ctx.matcher`.
final class MatcherCapsConfigTests: XCTestCase {
    private static let plugin = """
        return { name = "words",
          on_load = function(ctx)
            words = ctx.matcher{ keywords = { "诈骗", "scam*" }, regex = { "\\\\bfree\\\\s+money\\\\s+now\\\\b", "[0-9]{6,}", "t\\\\.me/\\\\w+" } }
          end,
          moderation = function(msg, ctx)
            if words:find(msg.text or "") then return ctx.block("no") end
          end }
        """

    private func check(_ toml: String) throws -> [String] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-caps-\(UUID().uuidString)")
        let plugins = directory.appendingPathComponent("plugins")
        try FileManager.default.createDirectory(at: plugins, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Self.plugin.write(to: plugins.appendingPathComponent("words.lua"), atomically: true, encoding: .utf8)
        var configuration = try BotConfiguration.parse(
            "[plugins]\ndirectory = \"plugins\"\n" + toml, relativeTo: directory, fileName: "hookbot.toml")
        configuration.statePath = directory.appendingPathComponent("state.sqlite").path
        return try configuration.check().problems
    }

    func testTheCapsApplyToThePluginsMatchers() throws {
        XCTAssertEqual(try check(""), [], "three regular expressions are within the default of 10")
        XCTAssertEqual(try check("matcher_max_regexes = 3\nmatcher_max_text_kb = 64\nmatcher_regex_steps = 20000\n"), [])
        let problems = try check("matcher_max_regexes = 2\n")
        XCTAssertEqual(problems.count, 1, "\(problems)")
        XCTAssertTrue(problems.first?.contains("too many regular expressions (3; at most 2)") == true, "\(problems)")
        let short = try check("matcher_max_regex_bytes = 20\n")
        XCTAssertEqual(short.count, 1, "\(short)")
        XCTAssertTrue(short.first?.contains("longer than 20 bytes (22)") == true, "\(short)")
    }

    func testCapsOutOfRangeAreConfigurationErrorsNamingTheKey() throws {
        let cases: [(String, String)] = [
            ("matcher_max_regexes = 1000", "hookbot.toml:3: plugins.matcher_max_regexes: must be 0–100 (regular expressions per matcher)"),
            ("matcher_max_keywords = 0", "hookbot.toml:3: plugins.matcher_max_keywords: must be 1–100000 (keywords per matcher)"),
            ("matcher_max_text_kb = \"big\"", "hookbot.toml:3: plugins.matcher_max_text_kb: must be an integer"),
            (
                "matcher_regex_steps = 10",
                "hookbot.toml:3: plugins.matcher_regex_steps: must be 1000–10000000 (PCRE2 match steps per regular expression and text)"
            ),
        ]
        for (line, expected) in cases {
            XCTAssertThrowsError(try check(line), line) { error in
                XCTAssertEqual("\(error)", expected, line)
            }
        }
    }
}
