import BotHost
import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import Testing

/// Dialogs (`ctx.ask`) through a real server: a member answers a bot's question from a real client while
/// another member talks; then a question left open when the bot stops is ended by the next bot on the same
/// state file, and the member is told.
@Suite(.serialized) struct BotDialogTests {
    static let trip = """
        return { name = "trip", on_load = function(ctx)
          ctx.commands.add{ name = "trip", description = "plan a trip",
            run = function(args, msg, ctx)
              local where, why = ctx.ask("去哪儿？ Where to?", { timeout = 300 })
              if not where then return ctx.reply("trip off (" .. why .. ")") end
              local days = ctx.ask(where.text .. " 🧳 — how many days?", { timeout = 300 })
              if days then ctx.reply(msg.from .. ": " .. days.text .. " days in " .. where.text) end
            end }
        end,
        on_receive = function(msg, ctx) ctx.reply("echo " .. msg.text) end }
        """

    @Test(arguments: BotAttachment.allCases)
    func aMemberAnswersTheBot(_ attachment: BotAttachment) async throws {
        try await BotHarness.start(attachment: attachment).whileRunning { harness in
            try harness.write("trip.lua", Self.trip)
            try await harness.bot().whileRunning { bot in
                let chat = try await harness.conversationWithBot(["Jerry"])
                try await chat.expectReply(to: "!trip", "去哪儿？ Where to?")
                // Jerry talks meanwhile: an ordinary message, echoed.
                try await chat.say("我也想去", as: 1)
                try await chat.expectBot("echo 我也想去")
                // Tom's answers go to the waiting command, not to on_receive.
                try await chat.expectReply(to: "成都", "成都 🧳 — how many days?")
                try await chat.expectReply(to: "5", "Tom: 5 days in 成都")
                try await chat.expectReply(to: "thanks", "echo thanks")
            }
        }
    }

    /// The bot's timer driver ends a question nobody answers.
    @Test func anUnansweredQuestionTimesOut() async throws {
        try await BotHarness.start(attachment: .inProcess).whileRunning { harness in
            try harness.write(
                "quick.lua",
                """
                return { name = "quick", on_receive = function(msg, ctx)
                  local a, why = ctx.ask("快问：yes or no?", { timeout = 1 })
                  ctx.reply(a and ("got " .. a.text) or ("no answer: " .. why))
                end }
                """)
            try await harness.bot().whileRunning { bot in
                let chat = try await harness.conversationWithBot()
                try await chat.expectReply(to: "hi", "快问：yes or no?")
                let asked = ContinuousClock.now
                try await chat.expectBot("no answer: timeout")
                #expect(ContinuousClock.now - asked >= .milliseconds(500))
            }
        }
    }

    @Test func aDialogOpenAcrossARestartIsEndedAndTheMemberTold() async throws {
        try await BotHarness.start(attachment: .inProcess).whileRunning { harness in
            try harness.write("trip.lua", Self.trip)
            let first = try await harness.bot()
            let chat = try await harness.conversationWithBot()
            try await chat.expectReply(to: "!trip", "去哪儿？ Where to?")
            await first.stop()

            // A new bot host on the same state file: the question cannot be resumed; Tom is told.
            try await harness.bot().whileRunning { second in
                try await chat.expectBot(
                    "Tom: trip stopped waiting for your answer “去哪儿？ Where to?” (the bot restarted); please start again.")
                // Tom's next message is an ordinary one again.
                try await chat.expectReply(to: "成都", "echo 成都")
            }
        }
    }
}
