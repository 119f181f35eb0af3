import Foundation
import IMCore
import XCTest

@testable import HookRuntime

final class MiscTests: XCTestCase {
    /// A message a hook hands back is read field by field; bad attrs, file or location are refused with an
    /// error naming the field (and a good one still goes through, Chinese text, emoji and location intact).
    func testABadMessageFromAHookIsRefusedNamingTheField() {
        let (_, rt) = loaded(
            "shape.lua",
            """
            return { before_send = function(msg, ctx)
              if msg.text == "attrs" then msg.attrs = { 1, 2 } end
              if msg.text == "file" then msg.file = "cat.png" end
              if msg.text == "location" then msg.location = { latitude = "north" } end
              if msg.text == "好" then msg.location = { latitude = 31.23, longitude = 121.47 } end
              return msg
            end }
            """, limits: testLimits)
        for (text, expected) in [
            ("attrs", "message.attrs must be a table with string keys"), ("file", "message.file must be a table"),
            ("location", "message.location needs numeric latitude and longitude"),
        ] {
            let out = rt.beforeSend(msg(text))
            XCTAssertTrue(out.errors.contains { "\($0)".contains(expected) }, "\(text): \(out.errors)")
        }
        let good = rt.beforeSend(msg("好"))
        XCTAssertEqual(good.errors, [])
        XCTAssertEqual(good.message?.text, "好")
        XCTAssertEqual(good.message?.location, Location(latitude: 31.23, longitude: 121.47))
    }

    /// ctx.every and ctx.after share one Lua function in the prelude: their errors still name the function
    /// the plugin called and the plugin's line, and a good call still fires.
    func testTimerArgumentErrorsNameTheFunctionAndThePluginsLine() {
        let (f, rt) = loaded(
            "timers.lua",
            """
            return { on_receive = function(msg, ctx)
              local ok1, e1 = pcall(ctx.every, 60, "not a function")
              local ok2, e2 = pcall(function() ctx.after(-1, function() end) end)
              ctx.after(5, function() ctx.send("c1", "五秒到了 ⏰") end)
              ctx.reply(tostring(ok1) .. "|" .. e1 .. "|" .. tostring(ok2) .. "|" .. e2)
            end }
            """, limits: testLimits)
        let reply = sentTexts(rt.receive(msg("提醒我")).actions)
        XCTAssertEqual(
            reply, ["false|timers.lua:2: ctx.every: function expected|false|timers.lua:3: ctx.after: seconds must be a number >= 0"])
        f.clock.advance(by: 5)
        XCTAssertEqual(sentTexts(rt.fireDueTimers().actions), ["五秒到了 ⏰"])
    }

    func testJSONRoundTrip() throws {
        let v: JSONValue = [
            "s": "quote \" back \\ nl \n tab \t ctl \u{01} é 😀", "i": 42, "neg": -7, "d": 1.5,
            "whole": .double(3), "b": false, "n": .null, "a": [1, "two", [3.25]], "o": ["k": [:]],
        ]
        let back = try JSONValue(parsing: v.jsonString())
        XCTAssertEqual(back, v)
        XCTAssertEqual(try JSONValue(parsing: #"{"x": "\u00e9\ud83d\ude00"}"#), ["x": "é😀"])
        XCTAssertThrowsError(try JSONValue(parsing: "{"))
        XCTAssertThrowsError(try JSONValue(parsing: "[1,]x"))
        // Codable
        let data = try JSONEncoder().encode(v)
        XCTAssertEqual(try JSONDecoder().decode(JSONValue.self, from: data)["a"], [1, "two", [3.25]])
    }

    func testFloatsStayFloatsInState() {
        let (_, rt) = loaded(
            "n.lua",
            #"""
            return { on_receive = function(msg, ctx)
              ctx.state.set("f", 3.0) ctx.state.set("i", 3)
              ctx.reply(math.type(ctx.state.get("f")) .. " " .. math.type(ctx.state.get("i")))
            end }
            """#)
        XCTAssertEqual(sentTexts(rt.receive(msg("x")).actions), ["float integer"])
    }

    func testUnloadAndReloadAll() {
        let (_, rt) = loaded(
            [
                "a.lua":
                    #"return { on_receive = function(msg, ctx) ctx.reply("a") end, on_load = function(ctx) ctx.every(1, function() end) end }"#,
                "b.lua": #"return { on_receive = function(msg, ctx) error("x") end }"#,
            ], limits: testLimits)
        for _ in 0..<5 { _ = rt.receive(msg("x")) }
        XCTAssertEqual(rt.status("b")?.state, .disabled)
        XCTAssertEqual(rt.unload(name: "a").unloaded, ["a"])
        XCTAssertEqual(rt.timerCount, 0)
        XCTAssertEqual(rt.receive(msg("x")).actions, [])
        let r = rt.reloadAll()
        XCTAssertEqual(Set(r.loaded + r.reloaded), ["a", "b"])
        XCTAssertEqual(rt.status("b")?.state, .loaded)
        XCTAssertEqual(rt.status("b")?.generation, 2)
        XCTAssertEqual(sentTexts(rt.receive(msg("x")).actions), ["a"])
        XCTAssertEqual(rt.reload(name: "nope").errors.count, 1)
    }

    func testTimerDriverFiresThroughHandler() async {
        let f = Fixture()
        f.write("t.lua", #"return { on_load = function(ctx) ctx.after(0, function(ctx) ctx.send("c1", "fired") end) end }"#)
        let rt = f.threadedRuntime()
        await rt.loadAll()
        let got = expectation(description: "timer fired")
        let box = Shared(false)
        let task = rt.startTimerDriver(maxInterval: 0.01) { result in
            if sentTexts(result.actions) == ["fired"], !box.value {
                box.value = true
                got.fulfill()
            }
        }
        await fulfillment(of: [got], timeout: 20)
        task.cancel()
        let timers = await rt.timerCount
        XCTAssertEqual(timers, 0)
    }

    func testStatusReportsHooksMemoryAndFailures() {
        let f = Fixture()
        f.write("s.lua", #"return { priority = 4, moderation = function() end, on_receive = function() error("bad") end }"#)
        f.write("broken.lua", "return {")
        let rt = f.runtime(limits: testLimits)
        XCTAssertEqual(rt.loadAll().errors.map(\.plugin), ["broken"])
        _ = rt.receive(msg("x"))
        let st = rt.status("s")!
        XCTAssertEqual(st.hooks, ["moderation", "on_receive"])
        XCTAssertEqual(st.priority, 4)
        XCTAssertGreaterThan(st.memoryBytes, 0)
        XCTAssertEqual(st.totalFailures, 1)
        XCTAssertEqual(st.lastError?.line, 1)
        XCTAssertTrue(st.path.hasSuffix("s.lua"))
        let b = rt.status("broken")!
        XCTAssertEqual(b.state, .failed)
        XCTAssertNotNil(b.lastError)
    }

    func testErrorDescriptionNamesPluginHookAndLine() {
        let e = HookError(plugin: "p", hook: "on_receive", source: "p.lua", line: 3, reason: .runtime("boom"))
        XCTAssertEqual(e.description, "plugin p on_receive at p.lua:3: boom")
        XCTAssertEqual(splitLuaPosition("x/init.lua:12: oops: more").1, 12)
        XCTAssertEqual(splitLuaPosition("no position").2, "no position")
    }
}
