import BotHost
import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import Testing

/// What a member sends in a quick burst reaches the bot's hooks in the order sent, and the bot's replies
/// (sent one after the other from its hooks, none waiting for the previous one's ack) reach the member in
/// that order too: the in-process bot's deliveries, hooks and replies share its Lua thread (issue 30), the
/// WebSocket bot keeps its stream.
@Suite struct EventOrderTests {
    /// Numbers what `on_receive` sees, in the order it sees it, and answers each with its number.
    static let counter = """
        return {
          name = "order",
          on_receive = function(msg, ctx)
            local seen = (ctx.state.get("seen") or 0) + 1
            ctx.state.set("seen", seen)
            ctx.reply("收到 #" .. seen .. ": " .. msg.text)
          end,
        }
        """

    @Test(arguments: BotAttachment.allCases)
    func aBurstIsSeenAndAnsweredInOrder(_ attachment: BotAttachment) async throws {
        try await BotHarness.start(attachment: attachment).whileRunning { harness in
            try harness.write("order.lua", Self.counter)
            let bot = try await harness.bot { $0.replyLimit = 1000 }
            let chat = try await harness.conversationWithBot(["Jerry"])
            let (conversation, logs) = (chat.conversation, chat.logs)
            // Submitted back to back: each is handed to the connection before the next, no ack awaited.
            let count = 80
            let texts = (0..<count).map { "消息 \($0) 😀 @modbot" }
            var pending: [IMPendingMessage] = []
            for text in texts {
                pending.append(try await conversation.submit(.text(text), options: IMSendOptions(mentionPids: ["modbot"])))
            }
            for message in pending { _ = try await message.message() }
            // Jerry gets the burst and the replies, each reply after the message it answers.
            let seen = try await logs[1].messages(2 * count, in: conversation.id).map { ($0.from, $0.content.text ?? "") }
            #expect(seen.filter { $0.0 == "Tom" }.map(\.1) == texts, "the burst in the order sent")
            let expected = texts.enumerated().map { "收到 #\($0.offset + 1): \($0.element)" }
            #expect(seen.filter { $0.0 == "modbot" }.map(\.1) == expected, "every message seen and answered in order")
            for (k, text) in texts.enumerated() {
                let asked = seen.firstIndex { $0.1 == text }
                let answered = seen.firstIndex { $0.1 == expected[k] }
                #expect(asked != nil && answered != nil && asked! < answered!, "reply \(k) follows its message")
            }
            let extra = await logs[1].settle().compactMap(\.receivedMessage)
            #expect(extra.isEmpty, "one reply per message, nothing else")
            await bot.stop()
        }
    }
}
