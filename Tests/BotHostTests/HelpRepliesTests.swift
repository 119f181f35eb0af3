import BotHost
import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import Testing

/// `!help` through a real server: a plugin with a 100 KB command description cannot make the help reply
/// too large for the server (its message limit answers 4109), so every other plugin's commands still
/// reach the member who asked, page by page.
@Suite(.serialized) struct HelpRepliesTests {

    @Test(arguments: BotAttachment.allCases)
    func aHostileDescriptionLeavesEveryOtherCommandInHelp(_ attachment: BotAttachment) async throws {
        try await BotHarness.start(attachment: attachment).whileRunning { harness in
            try harness.writeShippedModeration()
            try harness.write(
                "hog.lua",
                """
                return { name = "hog", on_load = function(ctx)
                  ctx.commands.add{ name = "hog", description = string.rep("all about the hog. ", 5500),
                    run = function(args, msg, ctx) ctx.reply("oink") end }
                  for i = 1, 40 do
                    ctx.commands.add{ name = "hog" .. i, args = "[what:text]", description = string.rep("猪", 3000),
                      run = function(args, msg, ctx) ctx.reply("oink " .. i) end }
                  end
                end }
                """)
            try harness.write(
                "dice.lua",
                """
                return { name = "dice", on_load = function(ctx)
                  ctx.commands.add{ name = "roll", args = "[sides:integer]", description = "roll a die",
                    run = function(args, msg, ctx) ctx.reply("4") end }
                  ctx.commands.add{ name = "rig", args = "<user:user> <value:integer>", roles = "gm",
                    description = "fix someone's next rolls", run = function(args, msg, ctx) ctx.reply("done") end }
                end }
                """)
            // Asking for page after page is not flooding.
            let bot = try await harness.bot { $0.plugins.config["moderation"] = ["flood": false] }
            let tom = harness.server.client("Tom")
            let logs = try await openClients([tom])
            let conversation = try await tom.createConversation(members: ["modbot"])

            var pages: [String] = []
            var ask: String? = "!help"
            while let text = ask, pages.count < 20 {
                _ = try await conversation.send(.text(text))
                let reply = try await logs[0].message(in: conversation.id, timeout: .seconds(5))
                #expect(reply.from == "modbot")
                let page = reply.content.text ?? ""
                pages.append(page)
                ask = page.firstMatch(of: /; (!help \d+) for the next page\.$/).map { String($0.1) }
            }
            #expect(pages.count > 2)
            let lines = pages.flatMap { $0.split(separator: "\n").dropFirst().dropLast().map(String.init) }
            #expect(lines.count == 45, "\(lines.joined(separator: "\n"))")
            #expect(
                lines.contains(
                    "!mod [action] [target] [value] — pardon <user>, history <user>, rules, dryrun <rule> on|off, appeals, stats (moderator)"
                ), "\(lines)")
            #expect(lines.contains("!appeal <text:text> — ask the moderators to look again at an action taken against you"), "\(lines)")
            #expect(lines.contains("!roll [sides:integer] — roll a die"), "\(lines)")
            #expect(lines.contains("!rig <user:user> <value:integer> — fix someone's next rolls (gm)"), "\(lines)")
            for page in pages { #expect(page.utf8.count <= 4000) }

            _ = try await conversation.send(.text("!help hog"))
            let detail = try await logs[0].message(in: conversation.id, timeout: .seconds(5)).content.text ?? ""
            #expect(detail.hasPrefix("!hog — all about the hog. all about"), "\(detail)")
            #expect(detail.hasSuffix("…"), "\(detail)")
            #expect(detail.count == "!hog — ".count + 200)
            await bot.stop()
        }
    }
}
