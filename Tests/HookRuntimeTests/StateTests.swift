import IMCore
import XCTest

@testable import HookRuntime

final class StateTests: XCTestCase {
    func testGetSetIncrDeleteKeysAndValues() {
        let (f, rt) = loaded(
            "s.lua",
            #"""
            return { on_receive = function(msg, ctx)
              local st = ctx.state
              st.set("n", 1)
              st.set("f", 2.5)
              st.set("s", "str")
              st.set("b", false)
              st.set("t", { list = { 1, 2, "three" }, map = { x = { y = true } } })
              assert(st.get("missing") == nil)
              assert(st.incr("n") == 2)
              assert(st.incr("n", 10) == 12)
              assert(st.incr("fresh", 0.5) == 0.5)
              assert(math.type(st.get("n")) == "integer")
              assert(st.get("f") == 2.5 and st.get("s") == "str" and st.get("b") == false)
              local t = st.get("t")
              assert(t.list[3] == "three" and t.map.x.y == true)
              st.set("k:a", 1) st.set("k:b", 2) st.set("k;c", 3)
              local ks = st.keys("k:")
              assert(#ks == 2 and ks[1] == "k:a" and ks[2] == "k:b", table.concat(ks, ","))
              st.delete("k:a")
              assert(#st.keys("k:") == 1)
              st.set("k:b", nil)
              assert(#st.keys("k:") == 0)
              local ok, err = pcall(st.set, "bad", { 1, 2, x = 3 })
              assert(not ok and err:find("mixes"))
              ok, err = pcall(st.set, "bad", { [1] = 1, [3] = 3 })
              assert(not ok and err:find("holes"))
              local cyc = {} cyc.self = cyc
              ok, err = pcall(st.set, "bad", cyc)
              assert(not ok)
              ok, err = pcall(st.incr, "s")
              assert(not ok and err:find("not a number"), err)
              ctx.reply("ok")
            end }
            """#)
        let r = rt.receive(msg("x"))
        XCTAssertEqual(r.errors, [])
        XCTAssertEqual(sentTexts(r.actions), ["ok"])
        XCTAssertEqual(try f.store.get(plugin: "s", key: "t", now: 0), ["list": [1, 2, "three"], "map": ["x": ["y": true]]])
    }

    func testKeysWithNULBytesAreRefused() throws {
        let (_, rt) = loaded(
            "nul.lua",
            #"""
            return { on_receive = function(msg, ctx)
              local ok, err = pcall(ctx.state.set, "a\0b", 1)
              assert(not ok and err:find("NUL"), err)
              ok, err = pcall(ctx.state.get, "a\0c")
              assert(not ok, "get with NUL")
              ok, err = pcall(function() ctx.state.user("alice\0x").set("k", 1) end)
              assert(not ok, "scoped key with NUL")
              ctx.state.set("a", 1)
              ctx.reply(tostring(#ctx.state.keys("")))
            end }
            """#)
        let r = rt.receive(msg("x"))
        XCTAssertEqual(r.errors, [])
        XCTAssertEqual(sentTexts(r.actions), ["1"])
    }

    func testEachPluginsStateIsBoundedByTheQuota() throws {
        let f = Fixture()
        let store = try HookStateStore(path: f.dbPath, quota: .init(keys: 5, bytes: 2_000))
        f.write(
            "hog.lua",
            #"""
            return { on_receive = function(msg, ctx)
              local st = ctx.state
              for i = 1, 5 do st.set("k" .. i, i) end
              local ok, err = pcall(st.set, "k6", 6)
              assert(not ok and err:find("quota"), err)
              assert(st.get("k6") == nil, "a refused write changes nothing")
              st.set("k1", "replaced")                     -- overwriting does not add a key
              ok, err = pcall(st.incr, "k7")
              assert(not ok and err:find("quota"), err)
              st.delete("k5")
              st.set("k6", 6)                              -- room again after a delete
              ok, err = pcall(st.set, "k1", string.rep("x", 3000))
              assert(not ok and err:find("bytes"), err)
              assert(st.get("k1") == "replaced")
              ctx.reply("held")
            end }
            """#)
        f.write(
            "other.lua",
            #"""
            return { on_receive = function(msg, ctx)
              for i = 1, 5 do ctx.state.set("mine" .. i, i) end
              ctx.reply("other ok")
            end }
            """#)
        let rt = f.runtime(store: store)
        XCTAssertEqual(rt.loadAll().errors, [])
        let r = rt.receive(msg("x"))
        XCTAssertEqual(r.errors, [])
        XCTAssertEqual(Set(sentTexts(r.actions)), ["held", "other ok"])
        XCTAssertEqual(try store.usage(plugin: "hog").keys, 5)
        XCTAssertEqual(try store.usage(plugin: "other").keys, 5)
    }

    func testHostNamespacesAreReserved() throws {
        let f = Fixture()
        f.write("hookbot.host.lua", "return { on_receive = function(msg, ctx) ctx.state.set('mute:x', false) end }")
        f.write("sneaky.lua", "return { name = 'Hookbot.host', on_receive = function() end }")
        let rt = f.runtime()
        let report = rt.loadAll()
        XCTAssertEqual(report.errors.count, 2)
        XCTAssertTrue(report.errors.allSatisfy { "\($0)".contains("reserved") }, "\(report.errors)")
    }

    func testScopedHelpers() throws {
        let (f, rt) = loaded(
            "sc.lua",
            #"""
            return { on_receive = function(msg, ctx)
              local conv = ctx.state.conv(msg.cid)
              local user = ctx.state.user(msg.from)
              conv.incr("count")
              user.set("last", msg.text)
              user.set("seen:" .. msg.cid, true)
              ctx.reply(conv.get("count") .. " " .. user.get("last") .. " " .. table.concat(user.keys("seen:"), ","))
            end }
            """#)
        _ = rt.receive(msg("a", cid: "c1", from: "u1"))
        XCTAssertEqual(sentTexts(rt.receive(msg("b", cid: "c1", from: "u2")).actions), ["2 b seen:c1"])
        XCTAssertEqual(sentTexts(rt.receive(msg("c", cid: "c2", from: "u1")).actions), ["1 c seen:c1,seen:c2"])
        XCTAssertEqual(try f.store.keys(plugin: "sc", prefix: "conv:", now: 0), ["conv:c1:count", "conv:c2:count"])
        XCTAssertEqual(try f.store.get(plugin: "sc", key: "user:u1:last", now: 0), "c")
    }

    func testTTLExpiresWithFakeClock() {
        let (f, rt) = loaded(
            "ttl.lua",
            #"""
            return { on_cmd = function(cmd, ctx)
              if cmd.action == "set" then ctx.state.set("k", "v", 60) ctx.state.incr("hits", 1, 30) ctx.state.set("forever", 1) end
              if cmd.action == "incr" then ctx.state.incr("hits") end
              local ks = ctx.state.keys()
              ctx.log(tostring(ctx.state.get("k")) .. " " .. tostring(ctx.state.get("hits")) .. " " .. #ks)
            end }
            """#)
        XCTAssertEqual(logMessages(rt.command(HookCommand(action: "set")).actions), ["v 1 3"])
        f.clock.advance(by: 20)
        XCTAssertEqual(logMessages(rt.command(HookCommand(action: "incr")).actions), ["v 2 3"])
        f.clock.advance(by: 15) // t = 35: hits expired (incr kept its original ttl)
        XCTAssertEqual(logMessages(rt.command(HookCommand(action: "get")).actions), ["v nil 2"])
        f.clock.advance(by: 30) // t = 65
        XCTAssertEqual(logMessages(rt.command(HookCommand(action: "get")).actions), ["nil nil 1"])
        XCTAssertEqual(try f.store.purgeExpired(now: f.clock.now), 2)
    }

    /// A plugin that increments `ext.key` by 1 with `ext.ttl` and `ext.mode` and logs the new value.
    private func counter(_ f: Fixture) -> PluginEngine {
        f.write(
            "counter.lua",
            #"""
            return { on_cmd = function(cmd, ctx)
              local e = cmd.ext
              if cmd.action == "set" then ctx.state.set(e.key, e.value) return end
              local ok, v = pcall(ctx.state.incr, e.key, 1, e.ttl, e.mode)
              ctx.log(ok and tostring(v) or ("error: " .. v))
            end }
            """#)
        let rt = f.runtime()
        XCTAssertEqual(rt.loadAll().errors, [])
        return rt
    }

    /// The expiry of the counter plugin's only key.
    private func expiresAt(_ f: Fixture) async throws -> Double? {
        try await f.store.entries(plugin: "counter", now: f.clock.now).first?.expiresAt
    }

    private func incr(_ rt: PluginEngine, _ key: String, ttl: Double? = nil, mode: String? = nil) -> String {
        var ext: [String: JSONValue] = ["key": .string(key)]
        if let ttl { ext["ttl"] = .double(ttl) }
        if let mode { ext["mode"] = .string(mode) }
        return logMessages(rt.command(HookCommand(action: "incr", ext: ext)).actions).joined()
    }

    /// The first `incr` of a window sets the expiry; later ones with the same ttl keep it, so a counter
    /// incremented every 4 s still resets 10 s after its first increment (it used to move the expiry on
    /// every call, and never reset while the calls kept coming).
    func testIncrWithATTLCountsInAFixedWindow() async throws {
        let f = Fixture()
        let rt = counter(f)
        var seen: [String] = []
        for t in stride(from: 0.0, through: 28, by: 4) {
            f.clock.set(t)
            seen.append(incr(rt, "w", ttl: 10))
        }
        // t = 0, 4, 8 | 12, 16, 20 | 24, 28: windows opened at 0, 12 (0 + 10 passed) and 24.
        XCTAssertEqual(seen, ["1", "2", "3", "1", "2", "3", "1", "2"])
        let expiry = try await expiresAt(f)
        XCTAssertEqual(expiry, 34)
    }

    /// `"sliding"` moves the expiry on every call: the key lives until `ttl` seconds pass without one.
    func testIncrSlidingMovesTheExpiryOnEveryCall() async throws {
        let f = Fixture()
        let rt = counter(f)
        var seen: [String] = []
        for t in [0.0, 8, 16, 24, 35, 44] {
            f.clock.set(t)
            seen.append(incr(rt, "s", ttl: 10, mode: "sliding"))
        }
        XCTAssertEqual(seen, ["1", "2", "3", "4", "1", "2"])
        var expiry = try await expiresAt(f)
        XCTAssertEqual(expiry, 54)
        // Without a ttl a call keeps whatever expiry the key has, in either mode.
        f.clock.set(50)
        XCTAssertEqual(incr(rt, "s"), "3")
        expiry = try await expiresAt(f)
        XCTAssertEqual(expiry, 54)
        XCTAssertEqual(incr(rt, "s", ttl: 10, mode: "fixed"), "4")
        expiry = try await expiresAt(f)
        XCTAssertEqual(expiry, 54)
    }

    /// A key stored without an expiry gets one from the first `incr` with a ttl (a fixed window starts
    /// there); a bad mode is an error that names the two.
    func testIncrTTLOnAKeyWithoutExpiryAndBadModes() async throws {
        let f = Fixture()
        let rt = counter(f)
        f.clock.set(100)
        _ = rt.command(HookCommand(action: "set", ext: ["key": "n", "value": 5]))
        XCTAssertEqual(incr(rt, "n", ttl: 10), "6")
        f.clock.set(105)
        XCTAssertEqual(incr(rt, "n", ttl: 10), "7")
        let expiry = try await expiresAt(f)
        XCTAssertEqual(expiry, 110)
        f.clock.set(110)
        XCTAssertEqual(incr(rt, "n", ttl: 10), "1")
        for mode in ["slide", "FIXED", ""] {
            XCTAssertTrue(incr(rt, "n", ttl: 10, mode: mode).contains(#"the expiry mode must be "fixed" or "sliding""#))
        }
        XCTAssertEqual(incr(rt, "n", ttl: 10), "2")
    }

    func testOnePluginCannotReadAnothersState() {
        let (_, rt) = loaded([
            "a.lua":
                #"return { priority = 2, on_receive = function(msg, ctx) ctx.state.set("secret", "a-only") ctx.state.conv("c1").set("x", 1) end }"#,
            "b.lua": #"""
            return { priority = 1, on_receive = function(msg, ctx)
              ctx.reply(tostring(ctx.state.get("secret")) .. " " .. #ctx.state.keys() .. " " .. tostring(ctx.state.conv("c1").get("x")))
            end }
            """#,
        ])
        XCTAssertEqual(sentTexts(rt.receive(msg("x")).actions), ["nil 0 nil"])
    }

    func testStateSurvivesReloadAndProcessRestart() throws {
        let f = Fixture()
        let src = #"""
            return { name = "keeper", on_load = function(ctx) ctx.state.incr("loads") end,
              on_receive = function(msg, ctx) ctx.reply(ctx.state.incr("seen") .. "/" .. ctx.state.get("loads")) end }
            """#
        f.write("keeper.lua", src)
        let rt = f.runtime()
        rt.loadAll()
        XCTAssertEqual(sentTexts(rt.receive(msg("x")).actions), ["1/1"])
        f.write("keeper.lua", src + "\n-- v2")
        XCTAssertEqual(rt.sync().reloaded, ["keeper"])
        XCTAssertEqual(sentTexts(rt.receive(msg("x")).actions), ["2/2"])
        rt.shutdown()
        // a new store and runtime on the same file: a process restart
        let rt2 = f.runtime(store: try HookStateStore(path: f.dbPath))
        rt2.loadAll()
        XCTAssertEqual(sentTexts(rt2.receive(msg("x")).actions), ["3/3"])
    }

    func testWritesAreCommittedBeforeTheCallReturns() throws {
        let (f, rt) = loaded("w.lua", #"return { on_receive = function(msg, ctx) ctx.state.set("last", msg.text) end }"#)
        _ = rt.receive(msg("first"))
        // an independent connection sees the write immediately
        let other = try HookStateStore(path: f.dbPath)
        XCTAssertEqual(try other.get(plugin: "w", key: "last", now: 0), "first")
    }
}
