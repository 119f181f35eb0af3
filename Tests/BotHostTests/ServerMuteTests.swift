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
        defer { Task { await harness.server.stop() } }
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
}
