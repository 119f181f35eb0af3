import IMCore
import XCTest

@testable import HookRuntime

/// `ctx.card`, `ctx.card_update`, `on_action`: cards validated and signed, clicks checked against the card
/// as kept, forged clicks refused before any plugin sees them.
final class CardTests: XCTestCase {
    static let plugin = #"""
        return {
          name = "vote",
          on_cmd = function(cmd, ctx)
            if cmd.action == "poll" then
              local h = ctx.card{ id = cmd.ext.id, title = "午饭吃什么？ Lunch?", text = "Pick one 🍜",
                fields = { { name = "by", value = cmd.from, inline = true } },
                buttons = { { label = "🍕 Pizza", value = "pizza", style = "primary" }, { label = "寿司" },
                            { label = "Close", action = "close", only = { "Tom" }, style = "danger" } },
                selects = { { action = "rate", options = { "1", "2", { label = "three", value = 3 } } } } }
              ctx.log("sent " .. h.id .. " in " .. h.cid)
            elseif cmd.action == "bad" then
              local ok, err = pcall(ctx.card, cmd.ext.spec)
              ctx.log(err)
            elseif cmd.action == "handle" then
              local h = ctx.card{ title = "t" }
              local ok, err = pcall(h.update, h, { text = "x" })
              ctx.log(h.id .. ": " .. err)
            elseif cmd.action == "update" then
              local ok, err = pcall(ctx.card_update, cmd.ext.id, { text = "x" })
              ctx.log(err)
            end
          end,
          on_action = function(action, ctx)
            ctx.state.incr("actions")
            ctx.log(action.member .. " " .. action.name .. " " .. action.value .. " " .. (action.label or "") .. " " ..
                    action.card.id .. " " .. tostring(action.message_id) .. " " .. action.card.title)
            if action.name == "close" then
              ctx.card_update(action.card.id, { text = "closed by " .. action.member, disabled = true })
            else
              ctx.card_update(action.card.id, { text = action.member .. " voted " .. action.label, image = false })
            end
          end,
        }
        """#

    private func card(_ actions: [HookAction]) -> (message: HookMessage, card: [String: JSONValue])? {
        for a in actions {
            if case .send(_, let m, _) = a.kind, m.type == HookMessageTypes.card, let c = m.attrs["card"]?.objectValue { return (m, c) }
            if case .edit(_, _, _, let m) = a.kind, let c = m.attrs["card"]?.objectValue { return (m, c) }
        }
        return nil
    }

    private func click(
        _ card: [String: JSONValue], button: Int? = nil, select: (Int, Int)? = nil, from: String, cid: String = "c1",
        change: (inout [String: JSONValue]) -> Void = { _ in }
    ) -> HookCommand {
        var ext: [String: JSONValue] = ["plugin": card["plugin"]!, "card": card["id"]!]
        if let button, let b = card["buttons"]?.arrayValue?[button] {
            ext["action"] = b["action"]
            ext["value"] = b["value"]
            ext["token"] = b["token"] ?? .string("")
        }
        if let (s, o) = select, let sel = card["selects"]?.arrayValue?[s], let opt = sel["options"]?.arrayValue?[o] {
            ext["action"] = sel["action"]
            ext["value"] = opt["value"]
            ext["token"] = opt["token"]
        }
        change(&ext)
        return HookCommand(action: HookCards.clickAction, ext: ext, cid: cid, from: from)
    }

    private func sent(_ rt: PluginEngine, id: String = "lunch", cid: String = "c1") -> (HookMessage, [String: JSONValue]) {
        let r = rt.command(HookCommand(action: "poll", ext: ["id": .string(id)], cid: cid, from: "Tom"))
        XCTAssertEqual(r.errors, [])
        guard let (m, c) = card(r.actions) else {
            XCTFail("no card in \(r.actions)")
            return (HookMessage(), [:])
        }
        // What the host does once the server acknowledged the message.
        HookCards.recordSent(m, id: "m-\(id)", timestamp: 1_700_000_000_123, store: rt.store, now: rt.clock.now())
        return (m, c)
    }

    func testACardIsNormalisedSignedAndSentAsType100() throws {
        let (_, rt) = loaded("vote.lua", Self.plugin)
        let (m, c) = sent(rt)
        XCTAssertEqual(m.type, 100)
        XCTAssertEqual(rt.typeName(of: 100), "card")
        XCTAssertEqual(m.text, "午饭吃什么？ Lunch?\nPick one 🍜\nby: Tom\n[🍕 Pizza] [寿司] [Close]")
        XCTAssertEqual(c["id"], "lunch")
        XCTAssertEqual(c["plugin"], "vote")
        let buttons = try XCTUnwrap(c["buttons"]?.arrayValue)
        XCTAssertEqual(buttons.map { $0["value"]?.stringValue }, ["pizza", "寿司", "Close"])
        XCTAssertEqual(buttons.map { $0["action"]?.stringValue }, ["click", "click", "close"])
        XCTAssertEqual(buttons[2]["only"], .array(["Tom"]))
        let tokens = buttons.compactMap { $0["token"]?.stringValue }
        XCTAssertEqual(tokens.count, 3)
        XCTAssertEqual(Set(tokens).count, 3)
        XCTAssertTrue(tokens.allSatisfy { $0.count == 22 }, "\(tokens)")
        let options = try XCTUnwrap(c["selects"]?.arrayValue?.first?["options"]?.arrayValue)
        XCTAssertEqual(options.map { $0["value"]?.stringValue }, ["1", "2", "3"])
        XCTAssertEqual(options.compactMap { $0["token"]?.stringValue }.count, 3)
        // The card is kept for clicks and updates (not in the plugin's own keys).
        XCTAssertEqual(try rt.store.keys(plugin: "vote", prefix: "", now: rt.clock.now()), [])
        XCTAssertNotNil(try rt.store.get(plugin: "hookbot.card:vote", key: "lunch", now: rt.clock.now()))
        // A host-made id when the plugin gives none; a second card with a taken id is an error.
        let r = rt.command(HookCommand(action: "poll", ext: [:], cid: "c1", from: "Tom"))
        XCTAssertEqual(r.errors, [])
        let id = try XCTUnwrap(card(r.actions)?.card["id"]?.stringValue)
        XCTAssertTrue(id.hasPrefix("c") && id.count == 17, id)
        let again = rt.command(HookCommand(action: "poll", ext: ["id": "lunch"], cid: "c1", from: "Tom"))
        XCTAssertTrue(again.errors.first?.message.contains("there is a card 'lunch' already") == true, "\(again.errors)")
    }

    func testBadCardsGetErrorsNamingTheField() throws {
        let (_, rt) = loaded("vote.lua", Self.plugin)
        let many = JSONValue.array((1...26).map { .object(["label": .string("b\($0)")]) })
        let cases: [(JSONValue, String)] = [
            (.object(["buttons": .array([.object(["label": "a"])])]), "ctx.card: a card needs a title or a text"),
            (.object(["title": "t", "colour": "red"]), "ctx.card: unknown field 'colour'"),
            (.object(["title": "t", "buttons": many]), "ctx.card: buttons: at most 25 (26 given)"),
            (.object(["title": .string(String(repeating: "長", count: 257))]), "ctx.card: title: at most 256 characters (257 given)"),
            (
                .object(["title": "t", "buttons": .array([.object(["label": "a", "style": "pink"])])]),
                "buttons[1].style: 'pink' is not one of"
            ),
            (
                .object(["title": "t", "buttons": .array([.object(["label": "a"]), .object(["label": "a"])])]),
                "buttons[2]: another control already has action 'click' and value 'a'"
            ),
            (.object(["title": "t", "buttons": .array([.object(["value": "a"])])]), "buttons[1].label: missing"),
            (.object(["title": "t", "selects": .array([.object(["action": "x"])])]), "selects[1].options: a select needs 1 to 25 options"),
            (.object(["title": "t", "image": "ftp://x/y.png"]), "image: an http(s) URL"),
            (.object(["title": "t", "inputs": .array([.object(["name": "why"])])]), "inputs: a card with inputs needs a button"),
            (
                .object(["title": "t", "buttons": .array([.object(["label": "a", "action": "no spaces"])])]),
                "buttons[1].action: 'no spaces' must be"
            ),
            (.object(["title": "t", "id": "bad id"]), "ctx.card: id must be 1 to 64 letters"),
            (.object(["title": "t", "ttl": 0]), "ctx.card: ttl must be 1 to"),
        ]
        for (spec, expected) in cases {
            let r = rt.command(HookCommand(action: "bad", ext: ["spec": spec], cid: "c1", from: "Tom"))
            XCTAssertEqual(r.errors, [])
            let said = logMessages(r.actions).first ?? ""
            XCTAssertTrue(said.contains(expected), "\(spec): \(said)")
            XCTAssertNil(card(r.actions), "\(spec)")
        }
        // Update of a card never sent, and of one whose message id has not come back yet.
        let unknown = rt.command(HookCommand(action: "update", ext: ["id": "nope"], cid: "c1", from: "Tom"))
        XCTAssertTrue(logMessages(unknown.actions).first?.contains("ctx.card_update: no card 'nope'") == true, "\(unknown)")
        _ = rt.command(HookCommand(action: "poll", ext: ["id": "early"], cid: "c1", from: "Tom"))
        let early = rt.command(HookCommand(action: "update", ext: ["id": "early"], cid: "c1", from: "Tom"))
        XCTAssertTrue(logMessages(early.actions).first?.contains("has not been sent yet") == true, "\(early)")
        // handle:update is ctx.card_update of the handle's card.
        let handle = rt.command(HookCommand(action: "handle", cid: "c1", from: "Tom"))
        let said = logMessages(handle.actions).first ?? ""
        let id = try XCTUnwrap(card(handle.actions)?.card["id"]?.stringValue)
        XCTAssertTrue(said.hasPrefix("\(id): ") && said.contains("ctx.card_update: card '\(id)' has not been sent yet"), said)
    }

    func testAClickReachesOnActionAndTheCardIsEditedInPlace() throws {
        let (f, rt) = loaded("vote.lua", Self.plugin)
        let (_, c) = sent(rt)
        let r = rt.command(click(c, button: 0, from: "Jerry"))
        XCTAssertEqual(r.errors, [])
        XCTAssertEqual(logMessages(r.actions), ["Jerry click pizza 🍕 Pizza lunch m-lunch 午饭吃什么？ Lunch?"])
        guard case .edit(let cid, let mid, let ts, let edited)? = r.actions.last?.kind else { return XCTFail("\(r.actions)") }
        XCTAssertEqual([cid, mid], ["c1", "m-lunch"])
        XCTAssertEqual(ts, 1_700_000_000_123)
        XCTAssertEqual(edited.attrs["card"]?["text"], "Jerry voted 🍕 Pizza")
        XCTAssertEqual(edited.attrs["card"]?["title"], "午饭吃什么？ Lunch?")
        // A select's option, and the member-only button by its member, which disables the card.
        let rate = rt.command(click(c, select: (0, 2), from: "Spike"))
        XCTAssertEqual(logMessages(rate.actions).first, "Spike rate 3 three lunch m-lunch 午饭吃什么？ Lunch?")
        let close = rt.command(click(c, button: 2, from: "Tom"))
        let (_, closed) = try XCTUnwrap(card(close.actions))
        XCTAssertEqual(closed["text"], "closed by Tom")
        let buttons = try XCTUnwrap(closed["buttons"]?.arrayValue)
        XCTAssertTrue(buttons.allSatisfy { $0["disabled"] == .bool(true) && $0["token"] == nil }, "\(buttons)")
        XCTAssertEqual(try rt.store.get(plugin: "vote", key: "actions", now: rt.clock.now()), .int(3))
        // The old token of a button now disabled is refused.
        let stale = rt.command(click(c, button: 0, from: "Jerry"))
        XCTAssertEqual(logMessages(stale.actions), ["card click refused: Jerry in c1: '🍕 Pizza' is disabled"])
        // After a restart (a new engine on the same state file), a new card's clicks still verify.
        let (_, c2) = sent(rt, id: "dinner")
        rt.shutdown()
        let again = f.runtime()
        XCTAssertEqual(again.loadAll().errors, [])
        let later = again.command(click(c2, button: 1, from: "Jerry"))
        XCTAssertEqual(logMessages(later.actions).first, "Jerry click 寿司 寿司 dinner m-dinner 午饭吃什么？ Lunch?")
    }

    func testForgedAndStrayClicksAreRefusedBeforeAnyPlugin() throws {
        let (_, rt) = loaded("vote.lua", Self.plugin)
        let (_, lunch) = sent(rt)
        let (_, other) = sent(rt, id: "other", cid: "c2")
        let otherToken = other["buttons"]?.arrayValue?[0]["token"] ?? .null
        let cases: [(HookCommand, String)] = [
            (click(lunch, button: 0, from: "Jerry") { $0["token"] = "AAAAAAAAAAAAAAAAAAAAAA" }, "the token does not match"),
            // A value the card did not offer, with the token of a button that exists.
            (click(lunch, button: 0, from: "Jerry") { $0["value"] = "sushi" }, "has no control 'click' with that value"),
            (click(lunch, button: 1, from: "Jerry") { $0["value"] = "pizza" }, "the token does not match"),
            // The token of another card's button (replay).
            (click(lunch, button: 0, from: "Jerry") { $0["token"] = otherToken }, "the token does not match"),
            // A card of another conversation clicked here.
            (click(other, button: 0, from: "Jerry", cid: "c1"), "card 'other' is in another conversation"),
            // Tom's button, clicked by Jerry with Tom's token.
            (click(lunch, button: 2, from: "Jerry"), "'Close' is not for Jerry"),
            (click(lunch, button: 0, from: "Jerry") { $0["plugin"] = "nobody" }, "no plugin 'nobody' takes card clicks"),
            (click(lunch, button: 0, from: "Jerry") { $0["card"] = "gone" }, "no card 'gone' of vote"),
            (click(lunch, button: 0, from: "Jerry") { $0["token"] = nil }, "a click needs plugin, card, action and token"),
            (click(lunch, button: 0, from: "Jerry") { $0["form.why"] = "x" }, "the card has no input 'why'"),
        ]
        for (cmd, expected) in cases {
            let r = rt.command(cmd)
            XCTAssertEqual(r.errors, [])
            XCTAssertEqual(r.actions.count, 1, "\(expected): \(r.actions)")
            XCTAssertEqual(r.actions.first?.plugin, "hookbot.card")
            XCTAssertTrue(logMessages(r.actions).first?.contains(expected) == true, "\(expected): \(logMessages(r.actions))")
        }
        XCTAssertNil(try rt.store.get(plugin: "vote", key: "actions", now: rt.clock.now()), "on_action ran")
        // The honest click works.
        XCTAssertEqual(try XCTUnwrap(rt.command(click(lunch, button: 0, from: "Jerry")).actions.first).plugin, "vote")
    }

    func testFormInputsArriveWithTheClickWithinTheirLimit() throws {
        let (_, rt) = loaded(
            "ask.lua",
            #"""
            return {
              name = "ask",
              on_cmd = function(cmd, ctx)
                ctx.card{ id = "fb", text = "Feedback?", inputs = { { name = "why", label = "为什么", max = 10 } },
                          buttons = { { label = "Send", action = "send" } } }
              end,
              on_action = function(action, ctx) ctx.log("why=" .. action.form.why) end,
            }
            """#)
        let r = rt.command(HookCommand(action: "go", cid: "c1", from: "Tom"))
        let (_, c) = try XCTUnwrap(card(r.actions))
        XCTAssertEqual(c["inputs"]?.arrayValue?.first?["max"], .int(10))
        let ok = rt.command(click(c, button: 0, from: "Jerry") { $0["form.why"] = "太贵了 💸" })
        XCTAssertEqual(logMessages(ok.actions), ["why=太贵了 💸"])
        let empty = rt.command(click(c, button: 0, from: "Jerry"))
        XCTAssertEqual(logMessages(empty.actions), ["why="])
        let long = rt.command(click(c, button: 0, from: "Jerry") { $0["form.why"] = "0123456789x" })
        XCTAssertEqual(logMessages(long.actions), ["card click refused: Jerry in c1: input 'why' is longer than 10 characters"])
    }
}
