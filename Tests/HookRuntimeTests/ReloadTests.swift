import Foundation
import XCTest

@testable import HookRuntime

final class ReloadTests: XCTestCase {
    func testCompileErrorKeepsOldVersion() {
        let (f, rt) = loaded("v.lua", #"return { on_receive = function(msg, ctx) ctx.reply("v1") end }"#, limits: testLimits)
        f.write("v.lua", #"return { on_receive = function(msg, ctx) ctx.reply("v2" end }"#)
        let r = rt.sync()
        XCTAssertEqual(r.reloaded, [])
        XCTAssertEqual(r.errors.count, 1)
        if case .compile = r.errors.first?.reason {} else { XCTFail("\(r)") }
        XCTAssertEqual(sentTexts(rt.receive(msg("x")).actions), ["v1"])
        XCTAssertEqual(rt.status("v")?.state, .loaded)
        // a failing on_load also keeps the old version
        f.write("v.lua", #"return { on_load = function() error("no") end, on_receive = function(msg, ctx) ctx.reply("v3") end }"#)
        XCTAssertEqual(rt.sync().errors.first?.reason, .runtime("no"))
        XCTAssertEqual(sentTexts(rt.receive(msg("x")).actions), ["v1"])
        // unchanged broken file is not retried on every sync
        XCTAssertTrue(rt.sync().isEmpty)
        f.write("v.lua", #"return { on_receive = function(msg, ctx) ctx.reply("v4") end }"#)
        XCTAssertEqual(rt.sync().reloaded, ["v"])
        XCTAssertEqual(sentTexts(rt.receive(msg("x")).actions), ["v4"])
    }

    func testNewFileLoadsDeletedFileUnloads() {
        let f = Fixture()
        f.write("a.lua", #"return { on_unload = function(ctx) ctx.log("a bye") end, on_receive = function(msg, ctx) ctx.reply("a") end }"#)
        let rt = f.runtime()
        XCTAssertEqual(rt.loadAll().loaded, ["a"])
        f.write("b.lua", #"return { on_load = function(ctx) ctx.log("b hi") end, on_receive = function(msg, ctx) ctx.reply("b") end }"#)
        let r1 = rt.sync()
        XCTAssertEqual(r1.loaded, ["b"])
        XCTAssertEqual(logMessages(r1.actions), ["b hi"])
        XCTAssertEqual(sentTexts(rt.receive(msg("x")).actions), ["a", "b"])
        f.remove("a.lua")
        let r2 = rt.sync()
        XCTAssertEqual(r2.unloaded, ["a"])
        XCTAssertEqual(logMessages(r2.actions), ["a bye"])
        XCTAssertEqual(sentTexts(rt.receive(msg("x")).actions), ["b"])
        XCTAssertEqual(rt.plugins.map(\.name), ["b"])
    }

    func testReloadOrderNewOnLoadBeforeOldOnUnload() {
        let f = Fixture()
        let src = { (v: Int) in
            """
            return { on_load = function(ctx) ctx.log("load v\(v)") end, on_unload = function(ctx) ctx.log("unload v\(v)") end }
            """
        }
        f.write("p.lua", src(1))
        let rt = f.runtime()
        rt.loadAll()
        f.write("p.lua", src(2))
        XCTAssertEqual(logMessages(rt.sync().actions), ["load v2", "unload v1"])
        XCTAssertEqual(logMessages(rt.reload(name: "p").actions), ["load v2", "unload v2"])
        XCTAssertEqual(logMessages(rt.shutdown().actions), ["unload v2"])
    }

    func testTimersNotDuplicatedAfterManyReloadsAndCancelledOnUnload() {
        let (f, rt) = loaded(
            "tick.lua",
            #"""
            return { on_load = function(ctx)
              ctx.every(10, function(ctx) ctx.log("tick") end)
              ctx.after(5, function(ctx) ctx.log("once") end)
            end }
            """#)
        for _ in 0..<25 { rt.reload(name: "tick") }
        XCTAssertEqual(rt.timerCount, 2)
        XCTAssertEqual(rt.status("tick")?.timers, 2)
        XCTAssertEqual(rt.status("tick")?.generation, 26)
        f.clock.advance(by: 5)
        XCTAssertEqual(logMessages(rt.fireDueTimers().actions), ["once"])
        f.clock.advance(by: 5)
        XCTAssertEqual(logMessages(rt.fireDueTimers().actions), ["tick"])
        XCTAssertEqual(logMessages(rt.fireDueTimers().actions), [])
        // a time jump fires a repeating timer once, then it continues from now
        f.clock.advance(by: 1000)
        XCTAssertEqual(logMessages(rt.fireDueTimers().actions), ["tick"])
        f.clock.advance(by: 10)
        XCTAssertEqual(logMessages(rt.fireDueTimers().actions), ["tick"])
        XCTAssertEqual(rt.nextTimerDue, f.clock.now + 10)
        f.remove("tick.lua")
        rt.sync()
        XCTAssertEqual(rt.timerCount, 0)
        f.clock.advance(by: 100)
        XCTAssertEqual(rt.fireDueTimers().actions, [])
    }

    func testTimerCancelAndErrorsAndOrder() {
        let (f, rt) = loaded(
            [
                "a.lua": #"""
                return { priority = 1, on_load = function(ctx)
                  local id
                  id = ctx.every(1, function(ctx)
                    local n = ctx.state.incr("n")
                    ctx.log("a" .. n)
                    if n == 2 then ctx.cancel(id) end
                  end)
                  ctx.after(1, function() error("timer boom") end)
                end }
                """#,
                "b.lua": #"return { priority = 2, on_load = function(ctx) ctx.every(1, function(ctx) ctx.send("c1", "b") end) end }"#,
            ], limits: testLimits)
        f.clock.advance(by: 1)
        let r = rt.fireDueTimers()
        XCTAssertEqual(r.actions.map(\.plugin), ["b", "a"])
        XCTAssertEqual(r.errors.first?.hook, "timer")
        XCTAssertEqual(r.errors.first?.line, 8)
        f.clock.advance(by: 1)
        XCTAssertEqual(logMessages(rt.fireDueTimers().actions), ["a2"])
        f.clock.advance(by: 1)
        XCTAssertEqual(logMessages(rt.fireDueTimers().actions), [])
        XCTAssertEqual(rt.timerCount, 1)
    }

    func testReloadUnderStreamOf10kEventsLosesAndDuplicatesNothing() async {
        let f = Fixture()
        let src: @Sendable (Int) -> String = { v in
            """
            -- version \(v)
            return { name = "stream",
              on_load = function(ctx) ctx.every(60, function() end) end,
              on_receive = function(msg, ctx) ctx.send("audit", msg.id .. "@v\(v)") end }
            """
        }
        f.write("stream.lua", src(0))
        f.write("other.lua", #"return { on_receive = function(msg, ctx) ctx.log(msg.id) end }"#)
        let rt = f.threadedRuntime()
        await rt.loadAll()
        let total = 10_000
        let stop = Shared(false)
        let reloads = Shared(0)
        let reloader = Task.detached {
            var v = 1
            while !stop.value {
                f.write("stream.lua", src(v))
                if v % 2 == 0 { await rt.reload(name: "stream") } else { await rt.sync() }
                reloads.update { $0 += 1 }
                v += 1
            }
        }
        var seen: [String: Int] = [:]
        var logged: [String: Int] = [:]
        var versions = Set<String>()
        for i in 0..<total {
            let id = "m\(i)"
            let r = await rt.receive(msg("x", id: id))
            XCTAssertEqual(r.errors, [])
            for t in sentTexts(r.actions) {
                let parts = t.split(separator: "@")
                seen[String(parts[0]), default: 0] += 1
                versions.insert(String(parts[1]))
            }
            for l in logMessages(r.actions) { logged[l, default: 0] += 1 }
            // make sure swaps interleave with the stream even on a busy machine
            if i % 1000 == 999 {
                let target = reloads.value + 1
                var spins = 0
                while reloads.value < target && spins < 4000 {
                    try? await Task.sleep(for: .milliseconds(5))
                    spins += 1
                }
            }
        }
        stop.value = true
        await reloader.value
        XCTAssertEqual(seen.count, total, "every event handled")
        XCTAssertTrue(seen.values.allSatisfy { $0 == 1 }, "no event handled twice")
        XCTAssertEqual(logged.count, total)
        XCTAssertTrue(logged.values.allSatisfy { $0 == 1 })
        XCTAssertGreaterThanOrEqual(reloads.value, 10)
        XCTAssertGreaterThanOrEqual(versions.count, 5, "events were served by several versions")
        let timers = await rt.timerCount
        let plugins = await rt.plugins.count
        XCTAssertEqual(timers, 1, "no duplicate timers")
        XCTAssertEqual(plugins, 2)
    }

    func testWatcherPicksUpChanges() async {
        let f = Fixture()
        f.write("w.lua", #"return { on_receive = function(msg, ctx) ctx.reply("w1") end }"#)
        let rt = f.threadedRuntime()
        await rt.loadAll()
        let changed = expectation(description: "reloaded")
        let once = Shared(false)
        await rt.startWatching(interval: 0.05) { report in
            if !report.reloaded.isEmpty, !once.value {
                once.value = true
                changed.fulfill()
            }
        }
        f.write("w.lua", #"return { on_receive = function(msg, ctx) ctx.reply("w2") end }"#)
        await fulfillment(of: [changed], timeout: 20)
        await rt.stopWatching()
        let result = await rt.receive(msg("x"))
        XCTAssertEqual(sentTexts(result.actions), ["w2"])
    }

    func testLibChangeReloadsPlugins() {
        let (f, rt) = loaded([
            "lib/greet.lua": #"return { word = "hello" }"#,
            "g.lua": #"local g = require("greet") return { on_receive = function(msg, ctx) ctx.reply(g.word) end }"#,
        ])
        XCTAssertEqual(sentTexts(rt.receive(msg("x")).actions), ["hello"])
        f.write("lib/greet.lua", #"return { word = "howdy" }"#)
        XCTAssertEqual(rt.sync().reloaded, ["g"])
        XCTAssertEqual(sentTexts(rt.receive(msg("x")).actions), ["howdy"])
    }

    func testDuplicateNamesAreRejected() {
        let f = Fixture()
        f.write("a.lua", #"return { name = "same" }"#)
        f.write("b.lua", #"return { name = "same" }"#)
        let rt = f.runtime()
        let r = rt.loadAll()
        XCTAssertEqual(r.loaded, ["same"])
        XCTAssertEqual(r.errors.count, 1)
    }
}
