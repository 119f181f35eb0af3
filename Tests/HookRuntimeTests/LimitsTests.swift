import XCTest

@testable import HookRuntime

final class LimitsTests: XCTestCase {
    private func run(_ hookBody: String, limits: HookLimits = testLimits) -> (HookResult, PluginEngine, Fixture) {
        let (f, rt) = loaded(
            [
                "bad.lua": """
                return { name = "bad", priority = 10, on_receive = function(msg, ctx)
                \(hookBody)
                end }
                """,
                "good.lua": #"return { name = "good", on_receive = function(msg, ctx) ctx.reply("still here") end }"#,
            ], limits: limits)
        return (rt.receive(msg("x")), rt, f)
    }

    func testInfiniteLoopIsAbortedByInstructionBudget() {
        let (r, rt, _) = run("while true do end")
        XCTAssertEqual(r.errors.count, 1)
        XCTAssertEqual(r.errors.first?.reason, .instructionBudget)
        XCTAssertEqual(r.errors.first?.plugin, "bad")
        XCTAssertEqual(r.errors.first?.line, 2)
        XCTAssertEqual(sentTexts(r.actions), ["still here"], "other plugins still run (fail-open)")
        // the plugin's state is usable afterwards
        XCTAssertEqual(rt.status("bad")?.consecutiveFailures, 1)
    }

    func testInfiniteLoopIsAbortedByDeadline() {
        var limits = testLimits
        limits.instructionBudget = 0
        limits.deadline = 0.05
        let (r, _, _) = run("local x = 0 while true do x = x + 1 end", limits: limits)
        XCTAssertEqual(r.errors.first?.reason, .deadline)
        XCTAssertEqual(r.errors.first?.line, 2)
        XCTAssertEqual(sentTexts(r.actions), ["still here"])
    }

    func testPcallCannotSwallowTheAbort() {
        let (r, _, _) = run(
            """
            while true do pcall(function() while true do end end) end
            """)
        XCTAssertEqual(r.errors.first?.reason, .instructionBudget)
        let (r2, _, _) = run(
            """
            local co = coroutine.wrap(function() while true do end end)
            for i = 1, 1e9 do pcall(co) end
            """)
        XCTAssertEqual(r2.errors.first?.reason, .instructionBudget)
    }

    func testHugeAllocationIsRefused() {
        let (r, rt, _) = run("local t = {} for i = 1, 1e8 do t[i] = i end")
        XCTAssertEqual(r.errors.first?.reason, .memory)
        XCTAssertEqual(r.errors.first?.plugin, "bad")
        XCTAssertNotNil(r.errors.first?.line)
        XCTAssertEqual(sentTexts(r.actions), ["still here"])
        // memory is reclaimed; the plugin keeps working on the next event
        XCTAssertLessThan(rt.status("bad")!.memoryBytes, testLimits.memoryBytes)
    }

    func testStringRepMemoryBomb() {
        // beyond INT_MAX Lua refuses up front; below it the allocator refuses
        let (r0, _, _) = run("local s = string.rep('x', 1e10)")
        XCTAssertEqual(r0.errors.count, 1)
        XCTAssertEqual(r0.errors.first?.reason, .runtime("resulting string too large"))
        let (r, _, _) = run("local s = string.rep('x', 1e9)")
        XCTAssertEqual(r.errors.first?.reason, .memory)
        let (r2, _, _) = run("local s = 'x' for i = 1, 64 do s = s .. s end")
        XCTAssertEqual(r2.errors.first?.reason, .memory)
        let (r3, _, _) = run("local ok = pcall(string.rep, 'x', 1e9) while true do local t = {} end")
        XCTAssertEqual(r3.errors.first?.reason, .memory, "a caught memory error still aborts the hook")
    }

    func testErrorIsReportedWithPluginAndLine() {
        let (r, _, _) = run(
            """
            local x = 1
            error("boom")
            """)
        let e = r.errors.first
        XCTAssertEqual(e?.plugin, "bad")
        XCTAssertEqual(e?.hook, "on_receive")
        XCTAssertEqual(e?.line, 3)
        XCTAssertEqual(e?.source, "bad.lua")
        XCTAssertEqual(e?.reason, .runtime("boom"))
        XCTAssertEqual(sentTexts(r.actions), ["still here"])
        let (r2, _, _) = run("error({ code = 1 })")
        XCTAssertEqual(r2.errors.first?.reason, .runtime("(error object is a table value)"))
        let (r3, _, _) = run("local t = nil; return t.x")
        XCTAssertEqual(r3.errors.first?.line, 2)
    }

    func testErrorsFromCtxFunctionsPointAtPluginLine() {
        let (r, _, _) = run(
            """
            ctx.state.set("k", function() end)
            """)
        XCTAssertEqual(r.errors.first?.line, 2)
        XCTAssertEqual(r.errors.first?.source, "bad.lua")
    }

    func testModerationFailOpenAndFailClosed() {
        let (f, open) = loaded(
            [
                "m.lua": #"return { moderation = function(msg, ctx) error("db down") end }"#,
                "r.lua": #"return { on_receive = function(msg, ctx) ctx.reply("delivered") end }"#,
            ], limits: testLimits)
        let o = open.incoming(msg("x"))
        XCTAssertEqual(o.moderation.verdict, .allow)
        XCTAssertEqual(o.errors.count, 1)
        XCTAssertEqual(sentTexts(o.actions), ["delivered"])
        var closedLimits = testLimits
        closedLimits.moderationFailClosed = true
        let closed = f.runtime(limits: closedLimits)
        closed.loadAll()
        let c = closed.incoming(msg("x"))
        guard case .block = c.moderation.verdict else { return XCTFail("\(c.moderation.verdict)") }
        XCTAssertEqual(c.moderation.decidedBy, "m")
        XCTAssertNil(c.delivered)
        XCTAssertEqual(sentTexts(c.actions), [])
    }

    func testCircuitBreakerDisablesUntilReload() {
        let (_, rt) = loaded(
            "flaky.lua", #"return { on_receive = function(msg, ctx) if msg.text == "fail" then error("nope") end ctx.reply("ok") end }"#,
            limits: testLimits)
        for _ in 0..<4 { _ = rt.receive(msg("fail")) }
        XCTAssertEqual(rt.status("flaky")?.consecutiveFailures, 4)
        XCTAssertEqual(sentTexts(rt.receive(msg("good")).actions), ["ok"])
        XCTAssertEqual(rt.status("flaky")?.consecutiveFailures, 0, "success resets the count")
        for _ in 0..<5 { _ = rt.receive(msg("fail")) }
        let st = rt.status("flaky")
        XCTAssertEqual(st?.state, .disabled)
        XCTAssertEqual(st?.totalFailures, 9)
        XCTAssertEqual(st?.lastError?.reason, .runtime("nope"))
        XCTAssertEqual(rt.receive(msg("good")).actions, [], "disabled plugins are skipped")
        rt.reload(name: "flaky")
        XCTAssertEqual(rt.status("flaky")?.state, .loaded)
        XCTAssertEqual(sentTexts(rt.receive(msg("good")).actions), ["ok"])
    }

    func testLoadTimeFailuresAreReported() {
        let f = Fixture()
        f.write("loop.lua", "while true do end return {}")
        f.write("syntax.lua", "return { on_receive = function( }")
        f.write("notable.lua", "return 42")
        f.write("loaderr.lua", #"return { on_load = function(ctx) error("cannot start") end }"#)
        f.write("badhook.lua", "return { on_receive = 5 }")
        f.write("ok.lua", "return {}")
        let rt = f.runtime(limits: testLimits)
        let r = rt.loadAll()
        XCTAssertEqual(r.loaded, ["ok"])
        let byPlugin = Dictionary(uniqueKeysWithValues: r.errors.map { ($0.plugin, $0) })
        XCTAssertEqual(byPlugin["loop"]?.reason, .instructionBudget)
        if case .compile = byPlugin["syntax"]?.reason {} else { XCTFail("\(String(describing: byPlugin["syntax"]))") }
        XCTAssertEqual(byPlugin["syntax"]?.line, 1)
        if case .invalidPlugin = byPlugin["notable"]?.reason {} else { XCTFail() }
        XCTAssertEqual(byPlugin["loaderr"]?.reason, .runtime("cannot start"))
        if case .invalidPlugin = byPlugin["badhook"]?.reason {} else { XCTFail() }
        XCTAssertEqual(rt.plugins.filter { $0.state == .failed }.count, 5)
    }
}

final class ReviewBudgetTests: XCTestCase {
    /// A hook stopped by the caller's budget (an interception review running out of time) is reported,
    /// but does not count towards the circuit breaker: a busy host must not disable moderation.
    func testBudgetCutsAreReportedButDoNotTripTheBreaker() {
        var limits = HookLimits.default
        limits.breakerThreshold = 2
        let (_, rt) = loaded(
            "slow.lua",
            """
            return { moderation = function(msg, ctx)
              local started = ctx.now()
              while ctx.now() - started < 0.2 do local _ = string.rep("x", 1000) end
            end }
            """, limits: limits)
        for _ in 0..<4 {
            let outcome = rt.moderate(msg("x"), until: .now.advanced(by: .milliseconds(20)))
            XCTAssertEqual(outcome.errors.map(\.reason), [.deadline])
        }
        XCTAssertEqual(rt.status("slow")?.state, .loaded, "still enabled")
        XCTAssertEqual(rt.status("slow")?.totalFailures, 0)
    }
}
