import Foundation
import IMCore
import XCTest

@testable import HookRuntime

/// `ctx.conv(cid).member(uid)`, `locked()`, `lock([reason])` and `unlock([reason])` in a real Lua runtime.
final class ConversationMembersTests: XCTestCase {
    private let plugin = """
        return {
          name = "probe",
          on_receive = function(msg, ctx)
            local c = ctx.conv(msg.cid)
            if msg.text == "who" then
              local m = c.member(msg.attrs.uid)
              if m == nil then return ctx.reply("nobody") end
              ctx.reply(string.format("%s joined %.1f role %s messages %d founder %s", msg.attrs.uid, m.joined_at, m.role,
                m.messages, tostring(m.founder)))
            elseif msg.text == "locked" then
              ctx.reply(tostring(c.locked()) .. " " .. tostring(ctx.conv("c2").locked()))
            elseif msg.text == "lock" then
              c.lock("join wave: 12 joins in 10 s")
              c.unlock()
            elseif msg.text == "bad" then
              c.lock({})
            end
          end,
        }
        """

    private func who(_ rt: PluginEngine, _ uid: String) -> [String] {
        sentTexts(rt.receive(msg("who", attrs: ["uid": .string(uid)])).actions)
    }

    func testMemberFieldsAsTheHostKnowsThem() {
        let (_, rt) = loaded("probe.lua", plugin)
        let members = rt.env.members
        XCTAssertEqual(who(rt, "Tom"), ["nobody"])
        members.replace(
            "c1",
            members: [
                "Spike": MemberInfo(joinedAt: 1_700_000_000.5, role: "owner", messages: 7, founder: true),
                "Tom": MemberInfo(joinedAt: 1_700_000_100),
            ], locked: false)
        XCTAssertEqual(who(rt, "Spike"), ["Spike joined 1700000000.5 role owner messages 7 founder true"])
        XCTAssertEqual(who(rt, "Tom"), ["Tom joined 1700000100.0 role member messages 0 founder nil"])
        members.counted("Tom", in: "c1")
        members.setRole("manager", of: "Tom", in: "c1")
        XCTAssertEqual(who(rt, "Tom"), ["Tom joined 1700000100.0 role manager messages 1 founder nil"])
        // A join of a known member keeps what is known; a new one starts at the given time.
        members.joined(["Tom", "Jerry"], in: "c1", at: 1_700_000_200, founding: false)
        XCTAssertEqual(who(rt, "Tom"), ["Tom joined 1700000100.0 role manager messages 1 founder nil"])
        XCTAssertEqual(who(rt, "Jerry"), ["Jerry joined 1700000200.0 role member messages 0 founder nil"])
        members.left(["Tom"], from: "c1")
        XCTAssertEqual(who(rt, "Tom"), ["nobody"])
        // Messages from somebody who is not a known member are not counted.
        members.counted("Tom", in: "c1")
        members.forget("c1")
        XCTAssertEqual(who(rt, "Jerry"), ["nobody"])
    }

    func testLockedIsTheHostsView() {
        let (_, rt) = loaded("probe.lua", plugin)
        XCTAssertEqual(sentTexts(rt.receive(msg("locked")).actions), ["false false"])
        rt.env.members.setLocked(true, "c2")
        XCTAssertEqual(sentTexts(rt.receive(msg("locked")).actions), ["false true"])
        rt.env.members.setLocked(true, "c1")
        rt.env.members.setLocked(false, "c2")
        XCTAssertEqual(sentTexts(rt.receive(msg("locked")).actions), ["true false"])
    }

    func testLockAndUnlockAreActions() {
        let (_, rt) = loaded("probe.lua", plugin)
        let actions = rt.receive(msg("lock")).actions.map(\.kind)
        XCTAssertEqual(
            actions, [.lock(cid: "c1", locked: true, reason: "join wave: 12 joins in 10 s"), .lock(cid: "c1", locked: false, reason: nil)])
        let bad = rt.receive(msg("bad"))
        XCTAssertEqual(bad.actions.filter { if case .lock = $0.kind { true } else { false } }, [])
        XCTAssertTrue(bad.errors.first?.message.contains("ctx.lock: reason must be a string") == true, "\(bad.errors)")
    }
}
