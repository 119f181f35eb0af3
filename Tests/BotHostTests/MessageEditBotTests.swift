import BotHost
import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import IMServer
import Testing

/// Edits and binary messages through a real bot: the bot, as the server's interceptor, reviews an edit
/// like a send (its moderation blocks or rewrites it), and plugins get `on_edit` and `msg.binary`.
@Suite(.serialized) struct MessageEditBotTests {
    static let watcher = """
        return {
          name = "watcher",
          on_edit = function(ev, ctx)
            ctx.send(ev.cid, "seen edit of " .. ev.id .. " by " .. ev.from .. ": " .. (ev.text or "")
              .. (ev.edited_at >= ev.timestamp and " (later)" or " (earlier?)"))
          end,
          on_receive = function(msg, ctx)
            if msg.binary then ctx.reply("binary " .. msg.binary) end
          end,
        }
        """

    @Test(arguments: BotAttachment.allCases)
    func moderationReviewsEditsAndPluginsSeeThem(_ attachment: BotAttachment) async throws {
        try await BotHarness.start(attachment: attachment).whileRunning { harness in
            try harness.write("mod.lua", BotHostTests.moderation)
            try harness.write("watcher.lua", Self.watcher)
            let bot = try await harness.bot()
            let tom = harness.server.client("Tom")
            let jerry = harness.server.client("Jerry")
            let logs = try await openClients([tom, jerry])
            let conversation = try await tom.createConversation(members: ["Jerry", "modbot"])
            let hello = try await conversation.send(.text("hello"))
            _ = try await logs[1].message(in: conversation.id)

            // A blocked edit fails with 4405 and the moderation's reason; the old text stays.
            do {
                _ = try await conversation.update(hello, to: .text("a forbidden-word here"))
                Issue.record("a blocked edit must fail for its sender")
            } catch let error as IMError {
                #expect(error.code == 4405, "\(error)")
                #expect(error.reason == "MESSAGE_UPDATE_REJECTED_BY_APP")
                #expect(error.detail == "forbidden word")
                #expect(error.appCode == 7)
            }
            var history = try await conversation.messages(limit: 10)
            #expect(history.map(\.content.text) == ["hello"])
            #expect(history.first?.editedAt == nil)

            // A rewritten edit is stored as moderation rewrote it; Jerry gets it as an edit.
            let edited = try await conversation.update(hello, to: .text("oh darn"))
            #expect(edited.editedAt != nil)
            let event = try await logs[1].next("edit") { event -> IMMessage? in
                if case .edited(let message) = event { return message }
                return nil
            }
            #expect(event.id == hello.id)
            #expect(event.content.text == "oh ****")
            #expect(event.from == "Tom")
            #expect(event.timestamp == hello.timestamp)
            #expect(event.editedAt != nil)
            history = try await conversation.messages(limit: 10)
            #expect(history.first?.content.text == "oh ****")
            #expect(history.first?.editedAt == event.editedAt)

            // The blocked edit never reached on_edit; the allowed one did, with its new text.
            let seen = try await logs[1].message(in: conversation.id)
            #expect(seen.from == "modbot")
            #expect(seen.content.text == "seen edit of \(hello.id) by Tom: oh **** (later)")

            // Binary messages: bytes for the SDK, base64 in msg.binary for plugins.
            let bytes = Data([1, 2, 3, 0xFF])
            let sent = try await conversation.send(binary: bytes)
            #expect(sent.binary != nil)
            let received = try await logs[1].message(in: conversation.id)
            #expect(received.binary == bytes)
            #expect(received.id == sent.id)
            let answer = try await logs[1].message(in: conversation.id)
            #expect(answer.content.text == "binary " + bytes.base64EncodedString())
            let stray = await logs[1].settle().compactMap(\.receivedMessage)
            #expect(stray.isEmpty, "\(stray.map(\.content.text))")
            await bot.stop()
        }
    }
}
