import Foundation
import IMCore
import Logging
import XCTest

@testable import HookRuntime

/// `ctx.dm(uid, message)` and `ctx.dm_conversation(uid)` in a real Lua runtime: the action the host
/// carries out, the host's memory of 1:1 conversations, and clear errors for bad arguments.
final class DirectMessageTests: XCTestCase {
    private let plugin = """
        return {
          name = "probe",
          on_receive = function(msg, ctx)
            local uid = msg.attrs.uid
            if msg.text == "dm" then
              ctx.dm(uid, "要在 c1 发言，请回答：2 + 2 = ? 🤔")
              ctx.dm(uid, { text = "second", attrs = { k = 1 } })
            elseif msg.text == "where" then
              ctx.reply(tostring(ctx.dm_conversation(uid)))
            elseif msg.text == "bad" then
              local results = {}
              for _, call in ipairs({
                function() ctx.dm(nil, "x") end, function() ctx.dm("", "x") end, function() ctx.dm("modbot", "x") end,
                function() ctx.dm(string.rep("u", 65), "x") end, function() ctx.dm("Tom", function() end) end,
                function() ctx.dm_conversation({}) end,
              }) do
                local ok, err = pcall(call)
                results[#results + 1] = tostring(ok) .. ": " .. tostring(err)
              end
              ctx.reply(table.concat(results, "\\n"))
            end
          end,
        }
        """

    func testADirectMessageIsAnActionForTheHostAndBadArgumentsAreClearErrors() throws {
        let f = Fixture()
        f.write("probe.lua", plugin)
        let members = ConversationMembers()
        var quiet = Logger(label: "dm-test")
        quiet.logLevel = .critical
        let rt = PluginEngine(
            directory: f.plugins, store: f.store, clock: f.clock.clock, logger: quiet, botID: "modbot", members: members)
        XCTAssertEqual(rt.loadAll().errors, [])
        defer { rt.shutdown() }

        let sent = rt.receive(msg("dm", attrs: ["uid": "小明"])).actions.map(\.kind)
        XCTAssertEqual(sent.count, 2)
        guard case .directMessage(let user, let first) = sent[0], case .directMessage(_, let second) = sent[1] else {
            return XCTFail("\(sent)")
        }
        XCTAssertEqual(user, "小明")
        XCTAssertEqual(first.text, "要在 c1 发言，请回答：2 + 2 = ? 🤔")
        XCTAssertEqual(second.attrs["k"], .int(1))
        XCTAssertNil(sent[0].conversation, "the host finds the conversation")
        XCTAssertTrue(sent[0].sends)

        // What the host remembers is what the plugin reads.
        XCTAssertEqual(sentTexts(rt.receive(msg("where", attrs: ["uid": "小明"])).actions), ["nil"])
        members.setDirect("dm-1", with: "小明")
        XCTAssertEqual(sentTexts(rt.receive(msg("where", attrs: ["uid": "小明"])).actions), ["dm-1"])
        members.forget("dm-1")
        XCTAssertEqual(sentTexts(rt.receive(msg("where", attrs: ["uid": "小明"])).actions), ["nil"])

        let errors = sentTexts(rt.receive(msg("bad", attrs: ["uid": "x"])).actions).first?.split(separator: "\n") ?? []
        XCTAssertEqual(errors.count, 6, "\(errors)")
        XCTAssertTrue(errors[0].hasSuffix("ctx.dm: user id (a string) expected"), "\(errors)")
        XCTAssertTrue(errors[1].hasSuffix("ctx.dm: user id (a string) expected"), "\(errors)")
        XCTAssertTrue(errors[2].hasSuffix("ctx.dm: the bot cannot message itself"), "\(errors)")
        XCTAssertTrue(errors[3].hasSuffix("ctx.dm: user id longer than 64 bytes"), "\(errors)")
        XCTAssertTrue(errors[4].contains("ctx.dm: message must be a string or a table"), "\(errors)")
        XCTAssertTrue(errors[5].hasSuffix("ctx.dm_conversation: user id (a string) expected"), "\(errors)")
    }

    func testTheHostRemembersACappedNumberOfOneToOneConversations() {
        let members = ConversationMembers()
        for i in 0..<(ConversationMembers.directCap + 10) { members.setDirect("dm-\(i)", with: "user\(i)") }
        let known = (0..<(ConversationMembers.directCap + 10)).filter { members.direct(with: "user\($0)") != nil }.count
        XCTAssertEqual(known, ConversationMembers.directCap)
        XCTAssertEqual(members.direct(with: "user\(ConversationMembers.directCap + 9)"), "dm-\(ConversationMembers.directCap + 9)")
        XCTAssertTrue(members.claimQuery(of: "c1", now: 100, every: 1))
        XCTAssertFalse(members.claimQuery(of: "c1", now: 100.5, every: 1))
        XCTAssertTrue(members.claimQuery(of: "c1", now: 101, every: 1))
    }
}
