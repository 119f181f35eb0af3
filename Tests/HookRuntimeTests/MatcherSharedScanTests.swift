import Foundation
import IMCore
import XCTest

@testable import HookRuntime

/// Matchers scanning one text after another share its normalised forms (TextMatcher.normalised): each
/// still finds exactly its own hits, for the same text, for another text of the same length, and across
/// plugins.
final class MatcherSharedScanTests: XCTestCase {
    func testMatchersInARowFindTheirOwnHits() {
        let (_, rt) = loaded([
            "probe.lua": """
            local a, b, r
            return {
              name = "probe",
              on_load = function(ctx)
                a = ctx.matcher{ keywords = { "scam", "诈骗" } }
                b = ctx.matcher{ keywords = { "spam" }, allow = { "spam musubi" } }
                r = ctx.matcher{ regex = { "free\\\\s+nitro" } }
              end,
              on_receive = function(msg, ctx)
                local function hit(m)
                  local h = m:find(msg.text)
                  return h and h.term or "-"
                end
                ctx.reply(hit(a) .. " " .. hit(b) .. " " .. hit(r) .. " " .. hit(a))
              end,
            }
            """,
            "other.lua": """
            local m
            return {
              name = "other",
              on_load = function(ctx) m = ctx.matcher{ keywords = { "s c a m" } } end,
              on_receive = function(msg, ctx)
                local h = m:find(msg.text)
                ctx.reply("other " .. (h and h.term or "-"))
              end,
            }
            """,
        ])
        defer { rt.shutdown() }
        let cases: [(String, [String])] = [
            ("a s.c.a.m here", ["scam - - scam", "other s c a m"]),
            ("a spam! here", ["- spam - -", "other -"]),
            ("a spam musubi", ["- - - -", "other -"]),
            ("FREE   NITRO 诈骗", ["诈骗 - free\\s+nitro 诈骗", "other -"]),
            ("free nitro scam", ["scam - free\\s+nitro scam", "other s c a m"]),
            ("free nitro spam", ["- spam free\\s+nitro -", "other -"]),
        ]
        for (text, expected) in cases {
            XCTAssertEqual(Set(sentTexts(rt.receive(msg(text)).actions)), Set(expected), text)
        }
    }
}
