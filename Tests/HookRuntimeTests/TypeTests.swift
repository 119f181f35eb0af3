import IMCore
import XCTest

@testable import HookRuntime

final class TypeTests: XCTestCase {
    func testRegisterBuildValidate() {
        let (f, rt) = loaded(
            "poll.lua",
            #"""
            return { name = "poll",
              on_load = function(ctx)
                ctx.types.register({ type = 7, name = "poll", fields = { question = "string", options = "table", closes = "integer?" } })
              end,
              on_cmd = function(cmd, ctx)
                local m = ctx.types.build("poll", { question = "Lunch?", options = { "pizza", "sushi" } }, { text = "poll" })
                assert(m.type == 7 and m.type_name == "poll")
                ctx.send(cmd.cid, m)
                local ok, err = pcall(function() return ctx.types.build("poll", { question = 1, options = {} }) end)
                ctx.log(err)
                ok, err = pcall(function() return ctx.types.build("poll", { question = "q", options = {}, extra = 1 }) end)
                ctx.log(err)
                ok, err = ctx.types.validate({ type = 7, attrs = { options = {} } })
                ctx.log(tostring(ok) .. " " .. err)
                ctx.log(tostring(ctx.types.validate({ type = 99, attrs = {} })))
                ctx.log(ctx.types.name(-2) .. " " .. ctx.types.name(7) .. " " .. ctx.types.number("poll"))
                ok, err = pcall(ctx.send, cmd.cid, { type = 7, attrs = { question = true } })
                ctx.log(tostring(ok))
              end,
              on_receive = function(msg, ctx) ctx.reply(msg.type_name .. ":" .. msg.attrs.question) end,
            }
            """#)
        XCTAssertEqual(rt.messageTypes.map(\.name), ["poll"])
        XCTAssertEqual(rt.typeName(of: 7), "poll")
        let r = rt.command(HookCommand(action: "go", cid: "c1"))
        XCTAssertEqual(r.errors, [])
        guard case .send(_, let m, _)? = r.actions.first?.kind else { return XCTFail("\(r)") }
        XCTAssertEqual(m.type, 7)
        XCTAssertEqual(m.attrs, ["question": "Lunch?", "options": ["pizza", "sushi"]])
        XCTAssertEqual(m.text, "poll")
        XCTAssertEqual(
            logMessages(r.actions),
            [
                "poll.lua:9: poll: field 'question' must be string",
                "poll.lua:11: poll: unknown field 'extra'",
                "false poll: missing field 'question'",
                "false",
                "image poll 7",
                "false",
            ])
        XCTAssertNil(rt.validate(m))
        XCTAssertNotNil(rt.validate(HookMessage(type: 7, attrs: ["question": 3])))
        // incoming custom messages carry their type name
        XCTAssertEqual(sentTexts(rt.receive(msg(nil, type: 7, attrs: ["question": "q", "options": []])).actions), ["poll:q"])
        // types disappear with their plugin
        f.remove("poll.lua")
        rt.sync()
        XCTAssertEqual(rt.messageTypes, [])
    }

    func testAFailedReloadKeepsTheRunningVersionsTypes() {
        let (f, rt) = loaded(
            "poll.lua",
            """
            return { name = "poll",
              on_load = function(ctx) ctx.types.register({ type = 7, name = "poll", fields = { question = "string" } }) end }
            """)
        f.write(
            "poll.lua",
            """
            return { name = "poll",
              on_load = function(ctx)
                ctx.types.register({ type = 7, name = "poll", fields = { question = "integer" } })
                error("the new version cannot start")
              end }
            """)
        let report = rt.reload(name: "poll")
        XCTAssertEqual(report.errors.count, 1)
        // The running version still serves, with its own type.
        XCTAssertEqual(rt.messageTypes.map(\.name), ["poll"])
        XCTAssertEqual(rt.messageTypes.first.flatMap { $0.fields["question"]?.type }, .string)
    }

    func testConflictsAndReloadReRegisters() {
        let f = Fixture()
        f.write(
            "a.lua",
            #"return { on_load = function(ctx) ctx.types.register({ type = 3, name = "note", fields = { title = "string" } }) end }"#)
        f.write("b.lua", #"return { on_load = function(ctx) ctx.types.register({ type = 3, name = "other" }) end }"#)
        f.write("c.lua", #"return { on_load = function(ctx) ctx.types.register({ type = -9, name = "neg" }) end }"#)
        f.write("d.lua", #"return { on_load = function(ctx) ctx.types.register({ type = 4, name = "text" }) end }"#)
        let rt = f.runtime()
        let r = rt.loadAll()
        XCTAssertEqual(r.loaded, ["a"])
        XCTAssertEqual(Set(r.errors.map(\.plugin)), ["b", "c", "d"])
        for _ in 0..<3 { XCTAssertEqual(rt.reload(name: "a").errors, []) }
        XCTAssertEqual(rt.messageTypes.map(\.name), ["note"])
    }
}
