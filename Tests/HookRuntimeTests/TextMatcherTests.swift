import Foundation
import XCTest

@testable import HookRuntime

/// `ctx.matcher` and `ctx.text` through real plugins on the real engine (Lua, PCRE2, preset files).
final class TextMatcherTests: XCTestCase {
    /// Lua helpers every probe has: `show(v)` renders a value with sorted keys.
    private static let prelude = #"""
        local function show(v)
          if type(v) ~= "table" then return tostring(v) end
          local keys = {}
          for k in pairs(v) do keys[#keys + 1] = k end
          table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
          local parts = {}
          for _, k in ipairs(keys) do
            if type(k) == "number" then parts[#parts + 1] = show(v[k])
            else parts[#parts + 1] = k .. "=" .. show(v[k]) end
          end
          return "{" .. table.concat(parts, ",") .. "}"
        end
        """#

    /// The shared `probe`, its result rendered by `show`.
    private func matcherProbe(
        _ body: String, files: [String: String] = [:], limits: HookLimits = testLimits, file: StaticString = #filePath,
        line: UInt = #line
    ) -> String {
        probe(body, prelude: Self.prelude, render: "show", files: files, limits: limits, file: file, line: line)
    }

    /// `ctx.text.normalise(s)` for each input, in one plugin call.
    private func normalised(_ inputs: [String]) -> [String] {
        let list = inputs.map { "\"" + luaEscaped($0) + "\"" }.joined(separator: ", ")
        let out = matcherProbe(
            """
            local r = {}
            for i, s in ipairs({ \(list) }) do r[i] = "[" .. ctx.text.normalise(s) .. "]" end
            return table.concat(r, "\\n")
            """)
        XCTAssertTrue(out.hasPrefix("true|"), out)
        return out.dropFirst(5).split(separator: "\n").map { String($0.dropFirst().dropLast()) }
    }

    func testNormalisationFoldsDisguises() {
        let cases: [(String, String)] = [
            ("s.c.a.m", "scam"), ("s c a m", "scam"), ("ｓｃａｍ", "scam"), ("5c4m", "scam"), ("S-C-A-M", "scam"),
            ("SCÄM", "scam"), ("ѕсаm", "scam"), ("s\u{200B}cam", "scam"), ("sc\u{0301}a\u{0308}m", "scam"),
            ("𝐬𝐜𝐚𝐦", "scam"), ("fuuuuuck", "fuck"), ("sh1t", "shit"), ("$h!t", "shit"), ("傻 逼", "傻逼"),
            ("Free   Money", "free money"), ("version 2024", "version 2024"), ("see you at 5", "see you at 5"),
            ("@alice hi", "@alice hi"), ("我们明天见", "我们明天见"), ("I am a b", "i am a b"),
            ("total s c a m!", "total scam!"), ("what a s.c.a.m", "what a scam"), ("s c  a m", "scam"),
            ("a b c d e f", "abcdef"), ("1 2 3 4", "1 2 3 4"),
        ]
        XCTAssertEqual(normalised(cases.map(\.0)), cases.map(\.1))
    }

    func testKeywordsMatchWholeWordsAndWildcards() {
        let out = matcherProbe(
            """
            local m = ctx.matcher{ keywords = { "scam", "casino*", "*coin", "free money" } }
            local r = {}
            for _, s in ipairs({ "a scam!", "scampi", "scammer", "best casinos here", "casino", "buy bitcoin now",
                                 "coins", "FREE MONEY", "freemoney", "win big c a s i n o s", "what a s c a m" }) do
              local h = m:find(s)
              r[#r + 1] = h and (h.kind .. ":" .. h.term .. ":" .. h.match .. ":" .. h.from .. "-" .. h.to) or "-"
            end
            return table.concat(r, " ")
            """)
        XCTAssertEqual(
            out,
            "true|keyword:scam:scam:3-6 - - keyword:casino*:casinos:6-12 keyword:casino*:casino:1-6 "
                + "keyword:*coin:bitcoin:5-11 - keyword:free money:FREE MONEY:1-10 - keyword:casino*:c a s i n o s:9-21 "
                + "keyword:scam:s c a m:8-14")
    }

    func testAllowListChineseAndFindAllOrder() {
        let out = matcherProbe(
            """
            local m = ctx.matcher{ keywords = { "*cunt*", "scam*", "傻逼", "代开发票" }, allow = { "scunthorpe", "scampi" } }
            local r = {}
            for _, s in ipairs({ "Scunthorpe United", "scampi and chips", "scams", "你是傻逼吗", "发生了什么", "傻 逼",
                                 "代开发票找我" }) do
              local h = m:find(s)
              r[#r + 1] = h and (h.term .. ":" .. h.match .. ":" .. h.from .. "-" .. h.to) or "-"
            end
            local all = m:find_all("scam one, 傻逼 two, scams three", 10)
            for _, h in ipairs(all) do r[#r + 1] = h.match .. "@" .. h.from end
            r[#r + 1] = #m:find_all("scam scam scam scam", 2)
            return table.concat(r, " ")
            """)
        XCTAssertEqual(
            out,
            "true|- - scam*:scams:1-5 傻逼:傻逼:7-12 - 傻逼:傻 逼:1-7 代开发票:代开发票:1-12 scam@1 傻逼@11 scams@23 2")
    }

    func testRegexesSeeTheLightForm() {
        let out = matcherProbe(
            #"""
            local m = ctx.matcher{ regex = { [[\b(?:bit\.ly|tinyurl\.com)/\w+]] }, keywords = { "spam" } }
            local r = {}
            for _, s in ipairs({ "see bit.ly/abc now", "ｂｉｔ．ｌｙ/xyz", "BIT.LY/Q", "bitly/x", "spam bit.ly/z" }) do
              local hits = m:find_all(s)
              local t = {}
              for _, h in ipairs(hits) do t[#t + 1] = h.kind .. ":" .. h.match .. ":" .. h.from .. "-" .. h.to end
              r[#r + 1] = #t > 0 and table.concat(t, ",") or "-"
            end
            return table.concat(r, " ")
            """#)
        XCTAssertEqual(
            out,
            "true|regex:bit.ly/abc:5-14 regex:ｂｉｔ．ｌｙ/xyz:1-22 regex:BIT.LY/Q:1-8 - keyword:spam:1-4,regex:bit.ly/z:6-13")
    }

    func testBadSpecificationsAreClearErrors() {
        let cases: [(String, String)] = [
            ("ctx.matcher{ regex = { \"(unclosed\" } }", "regex \"(unclosed\": missing closing parenthesis"),
            ("ctx.matcher{ regex = { \"a*\" } }", "regex \"a*\": matches the empty string"),
            ("ctx.matcher{ keywords = { \"sc*am\" } }", "keyword \"sc*am\": * is allowed only at the start or the end"),
            ("ctx.matcher{ keywords = { \"*\" } }", "keyword \"*\": nothing to match"),
            ("ctx.matcher{ keywords = { 42 } }", "keywords[1] must be a string"),
            ("ctx.matcher{ words = { \"x\" } }", "unknown field 'words'"),
            ("ctx.matcher{ presets = { \"../secret\" } }", "preset \"../secret\": not a preset name"),
            ("ctx.matcher{ presets = { \"en/nothing\" } }", "preset \"en/nothing\": not found"),
            ("ctx.matcher{ keywords = { string.rep(\"x\", 61) } }", "longer than 60 characters"),
            ("ctx.matcher{ regex = { string.rep(\"x\", 261) } }", "longer than 260 bytes"),
            ("ctx.matcher(\"scam\")", "ctx.matcher: expects a table"),
            (
                "local k = {} for i = 1, 1001 do k[i] = \"w\" .. i end ctx.matcher{ keywords = k }",
                "too many keywords (1001; at most 1000)"
            ),
            (
                "local k = {} for i = 1, 11 do k[i] = \"x\" .. i end ctx.matcher{ regex = k }",
                "too many regular expressions (11; at most 10)"
            ),
            ("ctx.matcher{ keywords = { \"x\" } }:find(42)", "matcher:find: text (a string) expected, got number"),
            ("ctx.matcher{ keywords = { \"x\" } }.find(\"x\")", "call it as m:find(text) on a matcher"),
            ("ctx.text.normalise(nil)", "ctx.text.normalise: text (a string) expected, got nil"),
        ]
        for (code, expected) in cases {
            let out = matcherProbe(code)
            XCTAssertTrue(out.hasPrefix("false|"), "\(code) -> \(out)")
            XCTAssertTrue(out.contains(expected), "\(code) -> \(out)")
            XCTAssertTrue(out.contains("probe.lua:"), "the error names the plugin's line: \(out)")
        }
        // 1,000 keywords and 10 regexes are fine
        XCTAssertEqual(
            matcherProbe(
                """
                local k, r = {}, {}
                for i = 1, 1000 do k[i] = "word" .. i end
                for i = 1, 10 do r[i] = "x" .. i .. "y" end
                local m = ctx.matcher{ keywords = k, regex = r }
                return m:find("here is word999 and x7y").term
                """), "true|word999")
        // the matcher's metatable is hidden
        XCTAssertEqual(matcherProbe("return getmetatable(ctx.matcher{ keywords = { \"x\" } })"), "true|false")
    }

    func testCatastrophicRegexGivesUpAtItsLimit() {
        let out = matcherProbe(
            """
            local m = ctx.matcher{ regex = { "(a+)+$" }, keywords = { "hello" } }
            local hit, problem = m:find(string.rep("a", 30) .. "b hello")
            return (hit and hit.term or "nil") .. " / " .. tostring(problem)
            """)
        XCTAssertEqual(
            out,
            "true|hello / regex \"(a+)+$\" gave up: it backtracked past its limit on this text (counted as no match)")
        // text that is not UTF-8 is matched too (each bad byte counts as U+FFFD), offsets stay byte offsets
        XCTAssertEqual(
            matcherProbe(
                """
                local h = ctx.matcher{ keywords = { "scam" }, regex = { "sc.m" } }:find_all("\\255\\254 scam")
                return #h .. " " .. h[1].kind .. "@" .. h[1].from .. " " .. h[2].kind .. "@" .. h[2].from
                """), "true|2 keyword@4 regex@4")
        // the same pattern still matches where it can
        XCTAssertEqual(matcherProbe("return ctx.matcher{ regex = { \"(a+)+$\" } }:find(\"baaa\").match"), "true|aaa")
    }

    func testURLsAndStats() {
        let out = matcherProbe(
            """
            local r = {}
            for _, u in ipairs(ctx.text.urls("see https://bit.ly/AbC, github.com/apple/swift and www.example.test/x. "
                .. "Mail bob@example.com, read README.md, ok.so then (https://en.wikipedia.org/wiki/Lua_(language)) ｂｉｔ．ｌｙ/x")) do
              r[#r + 1] = u.host .. "=" .. u.url
            end
            return table.concat(r, " ")
            """)
        XCTAssertEqual(
            out,
            "true|bit.ly=https://bit.ly/AbC github.com=github.com/apple/swift www.example.test=www.example.test/x "
                + "en.wikipedia.org=https://en.wikipedia.org/wiki/Lua_(language) bit.ly=ｂｉｔ．ｌｙ/x")
        func stats(_ text: String) -> String {
            matcherProbe(
                """
                local s = ctx.text.stats("\(luaEscaped(text))")
                s.caps = string.format("%.2f", s.caps)
                return s
                """)
        }
        // caps: 5 upper-case letters of 10 cased ones; é written as e and a combining accent is one character
        XCTAssertEqual(stats("HELLO the\u{301}re @42 👍🏽🎉 123"), "true|{caps=0.50,emoji=2,length=22,mentions=1,zalgo=1}")
        XCTAssertEqual(stats("z̷̢̛a̸̡͝l̵g̶o̷ mail@example.com @ alone"), "true|{caps=0.00,emoji=0,length=30,mentions=0,zalgo=9}")
        XCTAssertEqual(stats("🇫🇷 👨‍👩‍👧 ❤️ 1️⃣ ＡＢＣ"), "true|{caps=1.00,emoji=4,length=11,mentions=0,zalgo=0}")
    }

    func testPresetFilesAndTheirAllowList() {
        let files = ["presets/test/words.txt": "# a comment\nfoo*\n  bar baz  \n!foosball\n傻逼\n"]
        let out = matcherProbe(
            """
            local m = ctx.matcher{ presets = { "test/words" } }
            local r = {}
            for _, s in ipairs({ "foods", "foosball", "bar  baz", "你傻逼", "nothing" }) do
              local h = m:find(s)
              r[#r + 1] = h and (h.kind .. ":" .. h.preset .. ":" .. h.term) or "-"
            end
            return table.concat(r, " ")
            """, files: files)
        XCTAssertEqual(out, "true|preset:test/words:foo* - preset:test/words:bar baz preset:test/words:傻逼 -")
    }

    func testCompiledSizeCountsAgainstTheMemoryCap() {
        var small = testLimits
        small.memoryBytes = 2 * 1024 * 1024
        let out = matcherProbe(
            """
            local kept, k = {}, {}
            for i = 1, 1000 do k[i] = "w" .. i .. string.rep("y", 40) end
            for n = 1, 1000 do kept[n] = ctx.matcher{ keywords = k } end
            """, limits: small)
        XCTAssertTrue(out.hasPrefix("false|"), out)
        XCTAssertTrue(out.contains("ctx.matcher: the compiled matcher needs"), out)
        XCTAssertTrue(out.contains("over its cap of 2048 KiB"), out)
    }

    func testMatchersAreFreedWithThePluginVersionAndByTheCollector() {
        let f = Fixture()
        let base = liveTextMatchers.load(ordering: .relaxed)
        func source(_ v: Int) -> String {
            """
            local m
            return { on_load = function(ctx)
                m = ctx.matcher{ keywords = { "v\(v)", "scam" }, regex = { "x+y" } }
                ctx.every(1, function(ctx) ctx.log(m:find("a scam") and "timer hit" or "timer miss") end)
              end,
              on_receive = function(msg, ctx)
                for i = 1, 5 do ctx.matcher{ keywords = { "tmp" .. i } } end
                local h = m:find(msg.text)
                ctx.reply(h and h.term or "-")
              end }
            """
        }
        f.write("m.lua", source(0))
        let rt = f.runtime(limits: testLimits)
        XCTAssertEqual(rt.loadAll().errors, [])
        XCTAssertEqual(sentTexts(rt.receive(msg("say v0")).actions), ["v0"])
        f.clock.advance(by: 1.5)
        XCTAssertEqual(logMessages(rt.fireDueTimers().actions), ["timer hit"])
        for v in 1...100 {
            f.write("m.lua", source(v))
            XCTAssertEqual(rt.reload(name: "m").errors, [])
            XCTAssertEqual(sentTexts(rt.receive(msg("say v\(v)")).actions), ["v\(v)"])
        }
        // one matcher of the live version, plus at most the last call's temporary ones not yet collected
        let live = liveTextMatchers.load(ordering: .relaxed) - base
        XCTAssertGreaterThanOrEqual(live, 1)
        XCTAssertLessThanOrEqual(live, 6, "matchers of unloaded versions are freed")
        XCTAssertEqual(rt.unload(name: "m").errors, [])
        XCTAssertEqual(liveTextMatchers.load(ordering: .relaxed) - base, 0)
    }
}

/// `s` as the inside of a Lua double-quoted string.
func luaEscaped(_ s: String) -> String {
    var out = ""
    for u in s.utf8 {
        switch u {
        case 0x22: out += "\\\""
        case 0x5C: out += "\\\\"
        case 0x0A: out += "\\n"
        default:
            if u < 0x20 || u >= 0x80 { out += "\\" + String(format: "%03d", Int(u)) } else { out.unicodeScalars.append(Unicode.Scalar(u)) }
        }
    }
    return out
}
