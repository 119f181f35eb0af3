import BotHost
import Foundation
import HookRuntime
import HookbotTestSupport
import IMClient
import IMCore
import XCTest

/// A plugin's mutes and blocks are the server's (`ctx.conv(cid).mute/unmute/block/unblock/muted`): SDK
/// clients see them, the server refuses a muted member's messages itself, and a timed mute ends with the
/// bot stopped.
final class ServerMuteTests: XCTestCase {
    func testPluginMutesAndBlocksThroughTheServer() async throws {
        let harness = try await BotHarness.start(attachment: .inProcess)
        addTeardownBlock(releasing: harness.server) { await $0.stop() }
        try harness.write(
            "hush.lua",
            """
            return {
              name = "hush",
              on_receive = function(msg, ctx)
                local verb, user, seconds = (msg.text or ""):match("^(%a+) (%w+) ?(%d*)$")
                local conv = ctx.conv(msg.cid)
                if verb == "hush" then conv.mute(user, tonumber(seconds), "quiet please")
                elseif verb == "free" then conv.unmute(user)
                elseif verb == "ban" then conv.block(user)
                elseif msg.text == "who" then
                  local names = {}
                  for _, m in ipairs(conv.muted()) do names[#names + 1] = m.user end
                  ctx.reply("muted: " .. table.concat(names, ","))
                end
              end,
            }
            """)
        let bot = try await harness.bot()
        let clients = ["Tom", "Jerry", "Bob"].map { harness.server.client($0) }
        let logs = try await openClients(clients)
        let (tom, jerry, bob) = (clients[0], clients[1], clients[2])
        let conversation = try await tom.createConversation(members: ["Jerry", "Bob", "modbot"])
        let cid = conversation.id

        _ = try await conversation.send(.text("hush Jerry 2"))
        let mutedAt = ContinuousClock.now
        let muted = try await logs[1].next("muted by the bot") {
            if case .muted(cid, let by, let seconds, _) = $0 { "\(by ?? "") \(seconds ?? 0)" } else { nil }
        }
        XCTAssertEqual(muted, "modbot 2")
        do {
            _ = try await jerry.conversation(cid).send(.text("can I talk?"))
            XCTFail("the server let a muted member send")
        } catch {
            XCTAssertEqual(error.knownCode, .memberMuted)
            XCTAssertTrue(error.detail?.contains("quiet please") == true, "\(error)")
        }
        let page = try await conversation.mutedMembers()
        XCTAssertEqual(page.ids, ["Jerry"], "SDK clients see the bot's mute")
        _ = try await conversation.send(.text("who"))
        let answer = try await logs[0].next("the plugin's answer") { event -> String? in
            if case .message(let message) = event, message.from == "modbot" { message.content.text } else { nil }
        }
        XCTAssertEqual(answer, "muted: Jerry")

        _ = try await conversation.send(.text("ban Bob"))
        let blockedBy = try await logs[2].next("blocked by the bot") { if case .blocked(cid, let by) = $0 { by } else { nil } }
        XCTAssertEqual(blockedBy, "modbot")
        do {
            try await bob.conversation(cid).join()
            XCTFail("a blocked client joined")
        } catch {
            XCTAssertEqual(error.knownCode, .conversationBlacklisted)
        }

        // With the bot stopped, the mute still ends after its 2 s: the server alone lifts it.
        await bot.stop()
        try await Task.sleep(until: mutedAt + .milliseconds(2_300))
        _ = try await jerry.conversation(cid).send(.text("free at last"))
        let after = try await conversation.mutedMembers()
        XCTAssertEqual(after.ids, [])
        for client in clients { await client.close() }
    }

    /// `roles = {"manager"}` on a command: the managers and the owner of the conversation it is used in.
    func testCommandRolesFollowConversationRoles() async throws {
        let harness = try await BotHarness.start(attachment: .inProcess)
        addTeardownBlock(releasing: harness.server) { await $0.stop() }
        try harness.write(
            "mods.lua",
            """
            return {
              name = "mods",
              on_load = function(ctx)
                ctx.commands.add{ name = "pin", roles = { "manager" }, run = function(args, msg, ctx) ctx.reply("pinned by " .. msg.from) end }
              end,
            }
            """)
        let bot = try await harness.bot()
        let clients = ["Tom", "Jerry", "Bob"].map { harness.server.client($0) }
        let logs = try await openClients(clients)
        let (tom, jerry) = (clients[0], clients[1])
        let conversation = try await tom.createConversation(members: ["Jerry", "Bob", "modbot"])
        let cid = conversation.id
        // Every member sees every answer: take it from each log, so that the next one starts clean.
        func answer(to client: IMClient, _ log: EventLog) async throws -> String {
            _ = try await client.conversation(cid).send(.text("!pin"))
            var mine = ""
            for each in [logs[0], logs[1], logs[2]] {
                let text = try await each.next("the bot's answer") { event -> String? in
                    if case .message(let message) = event, message.from == "modbot", message.conversationId == cid {
                        message.content.text
                    } else {
                        nil
                    }
                }
                if each === log { mine = text }
            }
            return mine
        }
        // The bot learns who owns the conversation when it is invited (it reads the conversation).
        let ownerKey = ConversationRoles.key(cid, "Tom")
        for _ in 0..<100 {
            if (try? bot.router.plugins.store.get(plugin: "hookbot.host", key: ownerKey, now: Date().timeIntervalSince1970)) != nil {
                break
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let said1 = try await answer(to: jerry, logs[1])
        XCTAssertEqual(said1, "!pin is only for manager")
        let said2 = try await answer(to: tom, logs[0])
        XCTAssertEqual(said2, "pinned by Tom", "the owner holds every conversation role")
        try await conversation.updateMemberRole("Jerry", to: .manager)
        let managerKey = ConversationRoles.key(cid, "Jerry")
        for _ in 0..<100 {
            if (try? bot.router.plugins.store.get(plugin: "hookbot.host", key: managerKey, now: Date().timeIntervalSince1970)) != nil {
                break
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let said3 = try await answer(to: jerry, logs[1])
        XCTAssertEqual(said3, "pinned by Jerry")
        // Roles are per conversation: Jerry is no manager elsewhere.
        let other = try await tom.createConversation(members: ["Jerry", "modbot"])
        _ = try await jerry.conversation(other.id).send(.text("!pin"))
        let elsewhere = try await logs[1].next("the bot's answer elsewhere") { event -> String? in
            if case .message(let message) = event, message.from == "modbot", message.conversationId == other.id {
                message.content.text
            } else {
                nil
            }
        }
        XCTAssertEqual(elsewhere, "!pin is only for manager")
        await bot.stop()
        for client in clients { await client.close() }
    }
}
