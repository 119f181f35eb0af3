import XCTest

@testable import HookRuntime

/// The memory cap counts what Lua holds, and only that: freed blocks the sandbox's allocator keeps for reuse
/// (lua_sandbox.c) are neither counted against a plugin nor lost.
final class MemoryAccountingTests: XCTestCase {
    private let recorder = """
        local recent, n = {}, 0
        return { name = "recorder", on_receive = function(msg, ctx)
          n = n + 1
          -- what a plugin keeps (a ring of the last 50 messages) and what it throws away (a table per word)
          recent[n % 50] = { text = msg.text .. " ✓", from = msg.from, at = msg.timestamp, attrs = msg.attrs }
          for word in string.gmatch(msg.text, "%S+") do local _ = { word = word, len = utf8.len(word) } end
          if msg.text == "!memory" then
            collectgarbage("collect")
            ctx.reply(string.format("%d %.0f", n, collectgarbage("count") * 1024))
          end
        end }
        """

    func testChattyRoomStaysUnderASmallCapAndTheCountMatchesLuas() {
        var limits = testLimits
        limits.memoryBytes = 1 << 20
        let (_, rt) = loaded("recorder.lua", recorder, limits: limits)
        let texts = ["你好 @bot 今天的会议改到三点 🎉", "ok 👍", "see you at 3pm, @小明", "哈哈哈 😂😂", "ping"]
        for k in 0..<3000 {
            let r = rt.receive(msg(texts[k % texts.count], from: "member\(k % 7)"))
            XCTAssertEqual(r.errors, [], "message \(k)")
            if !r.errors.isEmpty { return }
        }
        let r = rt.receive(msg("!memory", from: "member0"))
        XCTAssertEqual(r.errors, [])
        let reply = sentTexts(r.actions).first?.split(separator: " ") ?? []
        XCTAssertEqual(reply.first, "3001")
        let luaCount = Int(reply.last ?? "") ?? -1
        let counted = rt.plugins.first { $0.name == "recorder" }?.memoryBytes ?? 0
        XCTAssertLessThan(counted, limits.memoryBytes)
        // Lua's own count (taken just before the reply's string was made) and the cap's count agree to within
        // that string and the call's bookkeeping; the blocks kept for reuse (at least 32 KB once garbage was
        // collected) are not in either.
        XCTAssertGreaterThan(luaCount, 0)
        XCTAssertLessThan(abs(counted - luaCount), 4096, "cap counts \(counted), Lua counts \(luaCount)")
    }

    func testAPluginThatKeepsEverythingStillStopsAtTheCap() {
        var limits = testLimits
        limits.memoryBytes = 1 << 20
        let (_, rt) = loaded(
            [
                "hoarder.lua": """
                local kept = {}
                return { name = "hoarder", on_receive = function(msg, ctx)
                  for i = 1, 100000 do kept[#kept + 1] = { msg.text, i } end
                end }
                """,
                "echo.lua": #"return { name = "echo", on_receive = function(msg, ctx) ctx.reply("收到 " .. msg.text) end }"#,
            ], limits: limits)
        let r = rt.receive(msg("你好 🎉"))
        XCTAssertEqual(r.errors.map(\.reason), [.memory])
        XCTAssertEqual(sentTexts(r.actions), ["收到 你好 🎉"], "the other plugin still ran")
        let counted = rt.plugins.first { $0.name == "hoarder" }?.memoryBytes ?? 0
        XCTAssertLessThanOrEqual(counted, limits.memoryBytes)
    }
}
