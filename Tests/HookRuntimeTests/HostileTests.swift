import XCTest

@testable import HookRuntime

/// Plugins trying to hang, crash or flood the host.
final class HostileTests: XCTestCase {
    private func one(_ body: String, limits: HookLimits = testLimits) -> (HookResult, PluginEngine, Fixture) {
        let (f, rt) = loaded(
            [
                "h.lua": "return { name = \"h\", on_receive = function(msg, ctx)\n\(body)\nend }",
                "z.lua": #"return { on_receive = function(msg, ctx) ctx.reply("alive") end }"#,
            ], limits: limits)
        return (rt.receive(msg("x")), rt, f)
    }

    func testNonFiniteAndHugeTimestampsAreErrorsNotCrashes() {
        for value in ["0/0", "1/0", "-1/0", "1e300", "-1e300", "2^63"] {
            let (result, _, _) = one(#"ctx.send("c1", { text = "x", timestamp = "# + value + " })")
            XCTAssertEqual(result.errors.count, 1, value)
            XCTAssertTrue("\(result.errors.first?.reason as Any)".contains("timestamp"), "\(value): \(result.errors)")
            XCTAssertEqual(sentTexts(result.actions), ["alive"], "the other plugin still ran")
        }
        let (fine, _, _) = one(#"ctx.send("c1", { text = "x", timestamp = 1700000000000.0 })"#)
        XCTAssertEqual(fine.errors, [])
    }

    func testSharedSubtablesCannotExpandIntoHugeValues() {
        // 2^26 leaves described by 27 small tables: every path into the host is cut off by the budget.
        let bomb = "local t = {1, 1}; for i = 1, 26 do t = {t, t} end; "
        for use in [
            #"ctx.state.set("k", t)"#, #"ctx.send("c1", { text = "x", attrs = { big = t } })"#,
            #"ctx.update_attr("c1", "big", t)"#,
        ] {
            let (result, _, _) = one(bomb + use)
            XCTAssertEqual(result.errors.count, 1, use)
            XCTAssertTrue("\(result.errors)".contains("more than"), "\(use): \(result.errors)")
            XCTAssertEqual(sentTexts(result.actions), ["alive"], "the other plugin still ran")
        }
        // A large value built honestly still fits.
        let (fine, _, _) = one(#"local t = {}; for i = 1, 50000 do t[i] = i end; ctx.state.set("k", t)"#)
        XCTAssertEqual(fine.errors, [])
    }

    func testFinalizersAndCloseMetamethodsAreRefused() {
        // Lua runs finalizers with hooks off, so they could never be stopped
        let (r, _, _) = one("setmetatable({}, { __gc = function() while true do end end })")
        XCTAssertEqual(r.errors.count, 1)
        XCTAssertTrue(r.errors.first?.message.contains("__gc and __close") ?? false, "\(r.errors)")
        let (r2, _, _) = one("local x <close> = setmetatable({}, { __close = function() while true do end end })")
        XCTAssertEqual(r2.errors.count, 1)
        // adding them after setmetatable has no effect: the installed metatable is a copy
        let (r3, rt3, _) = one(
            """
            local mt = {}
            keep = setmetatable({}, mt)
            mt.__gc = function() while true do end end
            mt.__close = function() while true do end end
            assert(getmetatable(keep) == mt)
            local ok = pcall(function() local y <close> = keep end)
            ctx.reply(tostring(ok))
            """)
        XCTAssertEqual(r3.errors, [])
        XCTAssertEqual(sentTexts(r3.actions), ["false", "alive"])
        rt3.shutdown()
        // ordinary metatables keep working, including later additions to __index tables
        let (r4, _, _) = one(
            """
            local Class = {} Class.__index = Class
            local obj = setmetatable({ n = 2 }, Class)
            function Class:double() return self.n * 2 end
            local v = setmetatable({}, { __tostring = function() return "vec" end, __add = function() return 7 end })
            ctx.reply(obj:double() .. " " .. tostring(v) .. " " .. (v + v) .. " " .. tostring(getmetatable(obj) == Class))
            """)
        XCTAssertEqual(r4.errors, [])
        XCTAssertEqual(sentTexts(r4.actions), ["4 vec 7 true", "alive"])
    }

    func testCoroutineKilledByBudgetCannotRunCloseHandlers() {
        let (r, _, _) = one(
            """
            local co = coroutine.wrap(function() while true do end end)
            pcall(co)
            while true do end
            """)
        XCTAssertEqual(r.errors.first?.reason, .instructionBudget)
        XCTAssertEqual(sentTexts(r.actions), ["alive"])
    }

    func testRunawayRecursion() {
        let (r, _, _) = one("local function f(n) return 1 + f(n + 1) end return f(1)")
        XCTAssertEqual(r.errors.count, 1)
        XCTAssertEqual(sentTexts(r.actions), ["alive"])
        let (r2, _, _) = one("local function f() return f() end f()") // tail calls: a plain loop
        XCTAssertEqual(r2.errors.first?.reason, .instructionBudget)
    }

    func testActionFloodIsCapped() {
        let (r, _, _) = one("for i = 1, 1e6 do ctx.send('c', 'x') end")
        XCTAssertEqual(r.errors.count, 1)
        XCTAssertEqual(r.actions.filter { $0.plugin == "h" }.count, 1000)
    }

    func testTimerFloodIsCapped() {
        let (r, rt, _) = one("for i = 1, 1e6 do ctx.after(1, function() end) end")
        XCTAssertEqual(r.errors.count, 1)
        XCTAssertEqual(rt.timerCount, 1000)
    }

    func testCloseAndMessageHandlerLoops() {
        let (r, _, _) = one(
            """
            do local x <close> = setmetatable({}, { __close = function() while true do end end }) error("first") end
            """)
        XCTAssertEqual(r.errors.count, 1)
        let (r2, _, _) = one("xpcall(function() error('x') end, function() while true do end end) while true do end")
        XCTAssertEqual(r2.errors.first?.reason, .instructionBudget)
        XCTAssertEqual(sentTexts(r2.actions), ["alive"])
        let (r3, _, _) = one("xpcall(function() while true do end end, function() while true do end end)")
        XCTAssertEqual(r3.errors.first?.reason, .instructionBudget)
        let (r4, _, _) = one("local ok, m = xpcall(function() error('e') end, function(e) return 'handled ' .. e end) ctx.reply(m)")
        XCTAssertTrue(sentTexts(r4.actions).first?.hasSuffix(": e") ?? false, "\(r4)")
    }

    func testYieldAndWeirdErrorValues() {
        let (r, _, _) = one("coroutine.yield(1)")
        XCTAssertEqual(r.errors.count, 1)
        let (r2, _, _) = one("error(setmetatable({}, { __tostring = function() while true do end end }))")
        XCTAssertEqual(r2.errors.first?.reason, .runtime("(error object is a table value)"))
        let (r3, _, _) = one("error(nil)")
        XCTAssertEqual(r3.errors.count, 1)
    }

    func testMetatableTricksOnArguments() {
        // values with metamethods are read raw by the host, so no plugin code runs there
        let (r, _, _) = one(
            """
            local evil = setmetatable({}, { __index = function() while true do end end, __pairs = function() error("no") end })
            ctx.state.set("k", evil)
            ctx.reply(setmetatable({ text = "raw" }, { __index = function() error("boom") end }))
            """)
        XCTAssertEqual(r.errors, [])
        XCTAssertEqual(sentTexts(r.actions), ["raw", "alive"])
    }

    func testSlowLibraryCallCountsAsDeadlineFailure() {
        // quadratic pattern matching runs inside C where the count hook cannot
        // interrupt it; once it returns past the deadline it is a failure
        var limits = testLimits
        limits.deadline = 0.001
        let (r, _, _) = one("local s = string.rep('a', 20000) local i = s:find('a*b') ctx.reply('done')", limits: limits)
        XCTAssertEqual(r.errors.first?.reason, .deadline)
        XCTAssertEqual(sentTexts(r.actions).filter { $0 == "done" }.count, 1, "actions requested before the overrun are kept")
    }

    func testValuesTheHostReturnsCountAgainstTheMemoryCap() throws {
        let f = Fixture()
        try f.store.set(plugin: "h", key: "big", value: .string(String(repeating: "x", count: 2 << 20)), now: 0)
        f.write(
            "h.lua",
            """
            return { name = "h", on_receive = function(msg, ctx)
              keep = keep or {}
              for i = 1, 200 do
                local ok, err = pcall(function() keep[#keep + 1] = ctx.state.get("big") end)
              end
              ctx.reply("kept " .. #keep)
            end }
            """)
        f.write("z.lua", #"return { on_receive = function(msg, ctx) ctx.reply("alive") end }"#)
        let rt = f.runtime(limits: testLimits)
        XCTAssertEqual(rt.loadAll().errors, [])
        let r = rt.receive(msg("x"))
        XCTAssertEqual(r.errors.first?.reason, .memory, "\(r.errors)")
        XCTAssertEqual(sentTexts(r.actions), ["alive"], "pcall did not let the plugin go on")
        let used = rt.plugins.first { $0.name == "h" }?.memoryBytes ?? 0
        XCTAssertLessThan(used, testLimits.memoryBytes + (4 << 20))
    }

    func testTimersGetOnlyTheirShareOfTheLuaThread() {
        for share in [0.05, 0] {
            let f = Fixture()
            f.write(
                "busy.lua",
                """
                return { name = "busy",
                  on_load = function(ctx)
                    fired = 0
                    for i = 1, 100 do
                      ctx.every(0.001, function()
                        fired = fired + 1
                        local x = 0
                        for k = 1, 200000 do x = x + k end
                      end)
                    end
                  end,
                  on_receive = function(msg, ctx) ctx.reply(tostring(fired)) end }
                """)
            var limits = testLimits
            limits.timerShare = share
            let rt = f.runtime(limits: limits)
            XCTAssertEqual(rt.loadAll().errors, [])
            f.clock.advance(by: 0.01)
            let result = rt.fireDueTimers()
            let fired = Int(sentTexts(rt.receive(msg("count")).actions).first ?? "") ?? -1
            if share > 0 {
                XCTAssertLessThan(fired, 100, "every timer ran although they took more than their share")
                XCTAssertGreaterThan(fired, 0)
                XCTAssertEqual(result.errors.map(\.reason), [.timerBudget])
                // The others were put off, not dropped.
                XCTAssertNotNil(rt.nextTimerDue)
            } else {
                XCTAssertEqual(fired, 100)
                XCTAssertEqual(result.errors, [])
            }
        }
    }

    func testLibraryLoopsThatRanInCAreStoppedByTheLimits() {
        // Each of these ran for seconds to forever inside one C call before; now they end in an error
        // (the instruction budget, or the pattern cost check) and the other plugin still answers.
        let cases = [
            "table.move({}, 1, math.maxinteger // 2, 1, {})",
            "local t = {} for i = 1, 100000 do t[i] = (i * 7919) % 100003 end "
                + "table.sort(t, function(a, b) local x = 0 for k = 1, 50 do x = x + k end return a < b end)",
            "local s = string.rep('a', 65000) .. 'c'; s:find('(a*)*b')",
            "local s = string.rep('a', 500); s:match('.-.-.-.-b')",
            "local s = 'a' .. string.rep(' ', 20000) .. 'b'; s:match('^%s*(.-)%s*$')",
        ]
        for body in cases {
            let (result, _, _) = one(body)
            XCTAssertEqual(result.errors.count, 1, body)
            XCTAssertEqual(sentTexts(result.actions), ["alive"], body)
        }
        // The replacements behave like the library.
        let (fine, _, _) = one(
            """
            local t = { 5, 3, 9, 1, 7, 2, 8, 6, 4, 10, 12, 11 }
            table.sort(t)
            assert(table.concat(t, ",") == "1,2,3,4,5,6,7,8,9,10,11,12")
            table.sort(t, function(a, b) return a > b end)
            assert(t[1] == 12 and t[12] == 1)
            local words = { "b", "a", "c" }
            table.sort(words)
            assert(table.concat(words) == "abc")
            local m = table.move({ 1, 2, 3, 4, 5 }, 2, 4, 1)
            assert(table.concat(m, ",") == "2,3,4,4,5")
            local o = table.move({ 1, 2, 3 }, 1, 3, 3)
            assert(table.concat(o, ",") == "1,2,1,2,3")
            assert(("  hi  "):match("^%s*(.-)%s*$") == "hi")
            assert(string.find(string.rep("x", 100000) .. "y", "y", 1, true) == 100001)
            assert(select(2, string.gsub(string.rep("ab", 1000), "a", "")) == 1000)
            ctx.reply("ok")
            """)
        XCTAssertEqual(fine.errors, [])
        XCTAssertEqual(Set(sentTexts(fine.actions)), ["ok", "alive"])
    }

    func testRecoversMemoryAfterBomb() {
        let (r, rt, _) = one("big = {} for i = 1, 1e8 do big[i] = i end")
        XCTAssertEqual(r.errors.first?.reason, .memory)
        // the global holds what was allocated before the cap; the plugin still runs small hooks
        let r2 = rt.receive(msg("y"))
        XCTAssertEqual(r2.errors.first?.reason, .memory)
        XCTAssertEqual(sentTexts(r2.actions), ["alive"])
    }
}
