import BotHost
import Foundation
import HookRuntime
import HookbotTestSupport
import IMClient
import IMCore
import XCTest

/// What a real bot host knows of its conversations' members against a real server: founders come as
/// `ev.founding`, `ctx.conv(cid).member(uid)` answers join times, roles and message counts (kept from
/// events and messages, and read again from the server by a restarted bot), and `ctx.conv(cid).lock()`
/// makes the server refuse outsiders until `unlock()`.
final class MemberKnowledgeTests: XCTestCase {
    static let plugin = """
        return {
          name = "probe",
          on_member_joined = function(ev, ctx)
            ctx.send(ev.cid, (ev.founding and "founders " or "joined ") .. table.concat(ev.members, ","))
          end,
          on_receive = function(msg, ctx)
            local conv = ctx.conv(msg.cid)
            local who = (msg.text or ""):match("^who (%w+)$")
            if who then
              local m = conv.member(who)
              if m == nil then return ctx.reply(who .. " unknown") end
              ctx.reply(string.format("%s %s %d %s %.3f", who, m.role, m.messages, tostring(m.founder), m.joined_at))
            elseif msg.text == "lock" then conv.lock("testing the lock")
            elseif msg.text == "unlock" then conv.unlock()
            elseif msg.text == "locked?" then ctx.reply("locked " .. tostring(conv.locked()))
            end
          end,
        }
        """

    /// The next text the bot sent to `cid`, as `log` saw it.
    private func botSaid(_ log: EventLog, in cid: String, _ what: String) async throws -> String {
        try await log.next(what) { event -> String? in
            if case .message(let message) = event, message.from == "modbot", message.conversationId == cid {
                message.content.text
            } else {
                nil
            }
        }
    }

    /// Messages each client sent through `ask`.
    private var asked: [String: Int] = [:]

    /// Asks the bot about `user` until its answer satisfies `done` (events reach the bot asynchronously).
    private func ask(
        _ user: String, from client: IMClient, _ log: EventLog, in cid: String, until done: (String) -> Bool = { _ in true }
    ) async throws -> String {
        var answer = ""
        for _ in 0..<50 {
            _ = try await client.conversation(cid).send(.text("who \(user)"))
            asked[client.clientId, default: 0] += 1
            answer = try await botSaid(log, in: cid, "the bot's answer about \(user)")
            if done(answer) { return answer }
            try await Task.sleep(for: .milliseconds(50))
        }
        return answer
    }

    func testFoundersJoinTimesRolesCountsAndTheLockThroughARealServer() async throws {
        let harness = try await BotHarness.start(attachment: .inProcess)
        addTeardownBlock(releasing: harness.server) { await $0.stop() }
        try harness.write("probe.lua", Self.plugin)
        let bot = try await harness.bot()
        let clients = ["Tom", "Jerry", "Eve", "Zed"].map { harness.server.client($0) }
        let logs = try await openClients(clients)
        let (tom, jerry, eve, zed) = (clients[0], clients[1], clients[2], clients[3])
        let conversation = try await tom.createConversation(members: ["Jerry", "modbot"])
        let cid = conversation.id
        let created = Double(try XCTUnwrap(conversation.createdAt)) / 1000

        // The creation is a founding, not a join.
        let founding = try await botSaid(logs[0], in: cid, "the founding event")
        XCTAssertEqual(founding, "founders Jerry,Tom,modbot")
        for text in ["hello", "again"] { _ = try await jerry.conversation(cid).send(.text(text)) }
        let aboutJerry = try await ask("Jerry", from: tom, logs[0], in: cid) { $0.hasPrefix("Jerry member 2 ") }
        XCTAssertEqual(aboutJerry, String(format: "Jerry member 2 true %.3f", created))
        let before = asked["Tom", default: 0]
        let aboutTom = try await ask("Tom", from: tom, logs[0], in: cid)
        XCTAssertEqual(aboutTom, String(format: "Tom owner %d true %.3f", before, created), "the message being handled is not counted yet")

        // A later join is a join; the joiner's time is when it joined.
        try await eve.conversation(cid).join()
        let joinedAt = Date().timeIntervalSince1970
        let joined = try await botSaid(logs[0], in: cid, "the join event")
        XCTAssertEqual(joined, "joined Eve")
        let aboutEve = try await ask("Eve", from: tom, logs[0], in: cid)
        let parts = aboutEve.split(separator: " ")
        XCTAssertEqual(parts.prefix(4).joined(separator: " "), "Eve member 0 nil", aboutEve)
        XCTAssertEqual(Double(parts.last ?? "") ?? 0, joinedAt, accuracy: 2)
        let aboutZed = try await ask("Zed", from: tom, logs[0], in: cid)
        XCTAssertEqual(aboutZed, "Zed unknown")

        // Role changes reach it.
        try await conversation.updateMemberRole("Jerry", to: .manager)
        let promoted = try await ask("Jerry", from: tom, logs[0], in: cid) { $0.hasPrefix("Jerry manager") }
        XCTAssertEqual(promoted, String(format: "Jerry manager 2 true %.3f", created))

        // The lock is the server's: outsiders are refused while it holds.
        _ = try await conversation.send(.text("lock"))
        var lockedAnswer = ""
        for _ in 0..<50 {
            _ = try await conversation.send(.text("locked?"))
            lockedAnswer = try await botSaid(logs[0], in: cid, "locked?")
            if lockedAnswer == "locked true" { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        XCTAssertEqual(lockedAnswer, "locked true")
        do {
            try await zed.conversation(cid).join()
            XCTFail("joined a locked conversation")
        } catch {
            XCTAssertEqual(error.knownCode, .conversationNotAllowed)
            XCTAssertTrue(error.detail?.contains("is locked (invite-only for now: testing the lock)") == true, "\(error)")
        }

        // A restarted bot reads it all from the server: join times, roles, founders, counts, the lock.
        await bot.stop()
        let again = try await harness.bot()
        let reread = try await ask("Jerry", from: tom, logs[0], in: cid)
        XCTAssertEqual(reread, String(format: "Jerry manager 2 true %.3f", created))
        let rereadEve = try await ask("Eve", from: tom, logs[0], in: cid)
        XCTAssertTrue(rereadEve.hasPrefix("Eve member 0 nil "), rereadEve)
        _ = try await conversation.send(.text("locked?"))
        let stillLocked = try await botSaid(logs[0], in: cid, "locked? after the restart")
        XCTAssertEqual(stillLocked, "locked true")
        _ = try await conversation.send(.text("unlock"))
        var opened = false
        for _ in 0..<50 {
            do {
                try await zed.conversation(cid).join()
                opened = true
                break
            } catch {
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        XCTAssertTrue(opened, "the unlock let outsiders in")
        await again.stop()
        for client in clients { await client.close() }
    }
}
