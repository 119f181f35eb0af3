import IMCore
import XCTest

@testable import HookRuntime

final class PipelineTests: XCTestCase {
    func testLoadsFileAndFolderPluginsWithStatus() {
        let f = Fixture()
        f.write("a.lua", #"return { name = "alpha", on_receive = function(msg, ctx) ctx.reply("a") end }"#)
        f.write("b/init.lua", #"return { priority = 3, on_receive = function(msg, ctx) ctx.reply("b") end }"#)
        f.write("lib/helper.lua", "return {}")
        f.write("notes.txt", "ignored")
        let rt = f.runtime()
        let r = rt.loadAll()
        XCTAssertEqual(Set(r.loaded), ["alpha", "b"])
        XCTAssertTrue(r.errors.isEmpty)
        XCTAssertEqual(rt.plugins.map(\.name), ["b", "alpha"])
        XCTAssertEqual(rt.status("alpha")?.hooks, ["on_receive"])
        XCTAssertEqual(rt.status("b")?.state, .loaded)
        XCTAssertEqual(sentTexts(rt.receive(msg("x")).actions), ["b", "a"])
    }

    func testPriorityOrderHigherFirstTiesByName() {
        let f = Fixture()
        for (name, prio) in [("zeta", 5), ("alpha", 5), ("mid", 7), ("low", -1), ("beta", 5)] {
            f.write(
                "\(name).lua",
                """
                return { name = "\(name)", priority = \(prio),
                  on_receive = function(msg, ctx) ctx.reply("\(name)") end }
                """)
        }
        let rt = f.runtime()
        rt.loadAll()
        let r = rt.receive(msg("hi"))
        XCTAssertEqual(sentTexts(r.actions), ["mid", "alpha", "beta", "zeta", "low"])
        XCTAssertEqual(r.actions.map(\.plugin), ["mid", "alpha", "beta", "zeta", "low"])
    }

    func testReplyCarriesConversationAndReplyTo() {
        let (_, rt) = loaded(
            "r.lua", #"return { on_receive = function(msg, ctx) ctx.reply({ text = "re: " .. msg.text, attrs = { q = msg.id } }) end }"#)
        let r = rt.receive(msg("hello", id: "m9", cid: "conv7"))
        guard case .send(let cid, let m, let replyTo)? = r.actions.first?.kind else { return XCTFail("\(r)") }
        XCTAssertEqual(cid, "conv7")
        XCTAssertEqual(replyTo, "m9")
        XCTAssertEqual(m.text, "re: hello")
        XCTAssertEqual(m.attrs["q"], "m9")
        XCTAssertEqual(r.actions.first?.plugin, "r")
    }

    func testMessageFieldsVisibleInLua() {
        let (_, rt) = loaded(
            "m.lua",
            #"""
            return { on_receive = function(msg, ctx)
              ctx.reply(table.concat({ msg.id, msg.cid, msg.from, tostring(msg.type), msg.type_name,
                tostring(msg.timestamp), tostring(msg.transient), msg.attrs.k, msg.file.url, tostring(msg.file.size),
                tostring(msg.location.latitude) }, "|"))
            end }
            """#)
        var m = msg(nil, id: "i1", cid: "c2", from: "bob", type: MessageType.image.rawValue, attrs: ["k": "v"])
        m.file = FileInfo(url: "http://x/y.png", size: 42)
        m.location = Location(latitude: 1.5, longitude: 2)
        let r = rt.receive(m)
        XCTAssertEqual(sentTexts(r.actions), ["i1|c2|bob|-2|image|1700000000000|false|v|http://x/y.png|42|1.5"])
    }

    func testModerationFirstNonAllowWinsAndStopsChain() {
        let (_, rt) = loaded([
            "a_allow.lua": #"return { priority = 10, moderation = function(msg, ctx) ctx.log("a saw") return ctx.allow() end }"#,
            "b_block.lua": #"""
            return { priority = 5, moderation = function(msg, ctx)
              if msg.text:find("spam") then return ctx.block("no spam", { code = 4001, silent = true, actions = { warn = "stop", mute = 60 } }) end
            end }
            """#,
            "c_replace.lua": #"""
            return { priority = 1, moderation = function(msg, ctx)
              ctx.log("c saw")
              if msg.text:find("darn") then return ctx.replace((msg.text:gsub("darn", "****"))) end
            end }
            """#,
        ])
        let blocked = rt.moderate(msg("buy spam darn", from: "eve"))
        XCTAssertEqual(blocked.verdict, .block(reason: "no spam", code: 4001, silent: true))
        XCTAssertEqual(blocked.decidedBy, "b_block")
        XCTAssertEqual(logMessages(blocked.actions), ["a saw"], "c_replace must not run after a block")
        XCTAssertTrue(blocked.actions.contains { $0.kind == .warn(cid: "c1", user: "eve", reason: "stop") })
        XCTAssertTrue(blocked.actions.contains { $0.kind == .mute(cid: "c1", user: "eve", seconds: 60, reason: "no spam") })

        let replaced = rt.moderate(msg("oh darn"))
        XCTAssertEqual(replaced.verdict, .replace(text: "oh ****"))
        XCTAssertEqual(replaced.decidedBy, "c_replace")

        let allowed = rt.moderate(msg("fine"))
        XCTAssertEqual(allowed.verdict, .allow)
        XCTAssertNil(allowed.decidedBy)
    }

    func testBlockedMessageNeverReachesOnReceive() {
        let (_, rt) = loaded([
            "mod.lua": #"""
            return { moderation = function(msg, ctx)
              if msg.text == "bad" then return ctx.block("bad", { actions = { kick = true } }) end
              if msg.text == "rude" then return ctx.replace("polite") end
            end }
            """#,
            "recv.lua": #"return { on_receive = function(msg, ctx) ctx.reply("got " .. msg.text) end }"#,
        ])
        let b = rt.incoming(msg("bad", from: "eve"))
        XCTAssertNil(b.delivered)
        XCTAssertEqual(sentTexts(b.actions), [])
        XCTAssertEqual(b.actions.map(\.kind), [.kick(cid: "c1", user: "eve", reason: "bad")])
        let r = rt.incoming(msg("rude"))
        XCTAssertEqual(r.delivered?.text, "polite")
        XCTAssertEqual(sentTexts(r.actions), ["got polite"])
        let ok = rt.incoming(msg("hi"))
        XCTAssertEqual(sentTexts(ok.actions), ["got hi"])
    }

    func testBeforeSendModifiesInOrderAndDrop() {
        let (_, rt) = loaded([
            "a.lua":
                #"return { priority = 2, before_send = function(msg, ctx) msg.text = msg.text .. "!" ; msg.attrs.a = 1 return msg end }"#,
            "b.lua": #"""
            return { priority = 1, before_send = function(msg, ctx)
              if msg.text:find("secret") then return ctx.drop("leak") end
              return { text = "[" .. msg.text .. "]" }
            end }
            """#,
            "c.lua": #"return { before_send = function(msg, ctx) ctx.log(msg.text) end }"#,
        ])
        let out = rt.beforeSend(msg("hi", id: "m1"))
        XCTAssertEqual(out.message?.text, "[hi!]")
        XCTAssertEqual(out.message?.id, "m1")
        XCTAssertEqual(out.message?.attrs["a"], 1)
        XCTAssertEqual(logMessages(out.actions), ["[hi!]"])
        XCTAssertNil(out.droppedBy)
        let d = rt.beforeSend(msg("a secret"))
        XCTAssertNil(d.message)
        XCTAssertEqual(d.droppedBy, "b")
        XCTAssertEqual(d.dropReason, "leak")
        XCTAssertEqual(logMessages(d.actions), [], "chain stops at a drop")
    }

    func testTranslateChainAndCache() throws {
        let (f, rt) = loaded([
            "t1.lua": #"""
            return { priority = 3, translate = function(text, from, to, ctx)
              ctx.state.incr("calls")
              if to == "xx" then return nil end
              return nil
            end }
            """#,
            "t2.lua": #"""
            return { priority = 2, translate = function(text, from, to, ctx)
              ctx.state.incr("calls")
              if to == "fr" then return "[fr:" .. tostring(from) .. "] " .. text end
            end }
            """#,
            "t3.lua": #"return { priority = 1, translate = function(text, from, to, ctx) ctx.state.incr("calls") return "t3:" .. to end }"#,
        ])
        let a = rt.translate(text: "hello", from: "en", to: "fr", messageID: "m1")
        XCTAssertEqual(a.text, "[fr:en] hello")
        XCTAssertEqual(a.plugin, "t2")
        XCTAssertFalse(a.cached)
        let b = rt.translate(text: "hello", from: "en", to: "fr", messageID: "m1")
        XCTAssertEqual(b.text, "[fr:en] hello")
        XCTAssertTrue(b.cached)
        XCTAssertEqual(b.plugin, "t2")
        let c = rt.translate(text: "hello", from: nil, to: "de", messageID: "m1")
        XCTAssertEqual(c.text, "t3:de")
        XCTAssertEqual(try f.store.get(plugin: "t1", key: "calls", now: f.clock.now), 2)
        XCTAssertEqual(try f.store.get(plugin: "t3", key: "calls", now: f.clock.now), 1)
        // the cache survives a new runtime
        let rt2 = f.runtime(store: try HookStateStore(path: f.dbPath))
        rt2.loadAll()
        XCTAssertTrue(rt2.translate(text: "hello", from: "en", to: "fr", messageID: "m1").cached)
        // without a message id nothing is cached
        XCTAssertFalse(rt.translate(text: "x", from: nil, to: "fr").cached)
        XCTAssertFalse(rt.translate(text: "x", from: nil, to: "fr").cached)
    }

    func testCommandsTransientAndConversationEvents() {
        let (f, rt) = loaded(
            "ev.lua",
            #"""
            local function j(t) local ks = {} for k, v in pairs(t) do ks[#ks + 1] = k .. "=" .. tostring(v) end table.sort(ks) return table.concat(ks, ",") end
            return {
              on_cmd = function(cmd, ctx) ctx.send_cmd(nil, "ack", { of = cmd.action, n = cmd.ext.n, ok = true }) ctx.log(cmd.from .. ":" .. j(cmd.ext)) end,
              on_transient = function(msg, ctx) ctx.log("typing " .. tostring(msg.transient)) end,
              on_member_joined = function(ev, ctx) ctx.reply("welcome " .. table.concat(ev.members, "&")) end,
              on_member_left = function(ev, ctx) ctx.log("left " .. ev.members[1] .. " by " .. tostring(ev.by)) end,
              on_invited = function(ev, ctx) ctx.reply("hi all") ctx.update_attr(nil, "bot", true) end,
              on_kicked = function(ev, ctx) ctx.state.set("kicked:" .. ev.cid, ev.by) end,
              on_conversation_updated = function(ev, ctx) ctx.log("topic " .. ev.attrs.topic) end,
              on_recall = function(ev, ctx) ctx.log("recalled " .. ev.id) ctx.recall(ev.cid, "echo-" .. ev.id) end,
            }
            """#)
        let c = rt.command(HookCommand(action: "ping", ext: ["n": 3, "s": "x"], cid: "c5", from: "bob"))
        XCTAssertEqual(
            c.actions.first?.kind,
            .sendCommand(cid: "c5", command: HookCommand(action: "ack", ext: ["of": "ping", "n": 3, "ok": true], cid: "c5")))
        XCTAssertEqual(logMessages(c.actions), ["bob:n=3,s=x"])
        XCTAssertEqual(logMessages(rt.transient(msg("...")).actions), ["typing true"])
        XCTAssertEqual(sentTexts(rt.memberJoined(cid: "c1", members: ["a", "b"]).actions), ["welcome a&b"])
        XCTAssertEqual(logMessages(rt.memberLeft(cid: "c1", members: ["a"], by: "adm").actions), ["left a by adm"])
        let inv = rt.invited(cid: "c9", by: "adm")
        XCTAssertEqual(
            inv.actions.map(\.kind),
            [
                .send(cid: "c9", message: HookMessage(cid: "c9", text: "hi all"), replyTo: nil),
                .updateAttribute(cid: "c9", key: "bot", value: true),
            ])
        XCTAssertTrue(rt.kicked(cid: "c3", by: "adm").errors.isEmpty)
        XCTAssertEqual(try f.store.get(plugin: "ev", key: "kicked:c3", now: 0), "adm")
        XCTAssertEqual(logMessages(rt.conversationUpdated(cid: "c1", attrs: ["topic": "cats"]).actions), ["topic cats"])
        let rc = rt.recalled(cid: "c1", messageID: "m3", by: "u1")
        XCTAssertEqual(rc.actions.map(\.kind), [.log(level: .info, message: "recalled m3"), .recall(cid: "c1", messageID: "echo-m3")])
    }

    func testAllActionKinds() {
        let (_, rt) = loaded(
            "acts.lua",
            #"""
            return { on_receive = function(msg, ctx)
              ctx.send("c2", "plain")
              ctx.send_transient("c2", { text = "typing" })
              ctx.recall(nil, msg.id)
              ctx.kick(nil, msg.from, "bye")
              ctx.mute("c3", "u9", 30)
              ctx.add("c3", "u8")
              ctx.warn(nil, msg.from)
              ctx.update_attr("c3", "topic", { a = 1 })
              ctx.log("warning", "careful")
            end }
            """#)
        let r = rt.receive(msg("x", id: "m1", from: "u1"))
        XCTAssertEqual(r.errors, [])
        XCTAssertEqual(
            r.actions.map(\.kind),
            [
                .send(cid: "c2", message: HookMessage(cid: "c2", text: "plain"), replyTo: nil),
                .sendTransient(cid: "c2", message: HookMessage(cid: "c2", text: "typing", transient: true)),
                .recall(cid: "c1", messageID: "m1"),
                .kick(cid: "c1", user: "u1", reason: "bye"),
                .mute(cid: "c3", user: "u9", seconds: 30, reason: nil),
                .add(cid: "c3", user: "u8"),
                .warn(cid: "c1", user: "u1", reason: nil),
                .updateAttribute(cid: "c3", key: "topic", value: ["a": 1]),
                .log(level: .warning, message: "careful"),
            ])
        XCTAssertTrue(r.actions.allSatisfy { $0.plugin == "acts" })
    }

    func testConfigDefaultsMergedWithHostConfig() {
        let (_, rt) = loaded(
            "cfg.lua",
            #"""
            return { name = "cfg", config = { greeting = "hi", limits = { max = 3, min = 1 } },
              on_receive = function(msg, ctx)
                ctx.reply(ctx.config.greeting .. " " .. ctx.config.limits.max .. " " .. ctx.config.limits.min .. " " .. ctx.plugin)
              end }
            """#, config: ["cfg": ["greeting": "hello", "limits": ["max": 9]]])
        XCTAssertEqual(sentTexts(rt.receive(msg("x")).actions), ["hello 9 1 cfg"])
        rt.setConfig([:])
        rt.reload(name: "cfg")
        XCTAssertEqual(sentTexts(rt.receive(msg("x")).actions), ["hi 3 1 cfg"])
    }

    func testBadReturnValuesAreErrorsNotCrashes() {
        let (_, rt) = loaded(
            "bad.lua",
            #"""
            return {
              moderation = function(msg, ctx) return { verdict = "maybe" } end,
              before_send = function(msg, ctx) return 42 end,
              translate = function() return {} end,
              on_receive = function(msg, ctx) ctx.reply(function() end) end,
            }
            """#)
        XCTAssertEqual(rt.moderate(msg("x")).verdict, .allow)
        XCTAssertEqual(rt.moderate(msg("x")).errors.first?.hook, "moderation")
        XCTAssertEqual(rt.beforeSend(msg("x")).message?.text, "x")
        XCTAssertNil(rt.translate(text: "x", from: nil, to: "fr").text)
        let r = rt.receive(msg("x"))
        XCTAssertEqual(r.errors.count, 1)
        XCTAssertEqual(r.errors.first?.line, 5)
    }
}
