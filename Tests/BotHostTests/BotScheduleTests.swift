import BotHost
import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import XCTest

/// Schedules (`ctx.schedule`) through a real server and real time: jobs made before the bot host stops are
/// kept in its state file; the next bot host on that file runs them, and a member's client gets the
/// messages. A job due while no bot ran follows its missed-run policy.
final class BotScheduleTests: XCTestCase {
    static let plugin = """
        return { name = "alarm",
          on_load = function(ctx)
            ctx.commands.add{ name = "alarm", args = "<seconds:number> <policy> <text:text>",
              run = function(args, msg, ctx)
                -- more than half a second late is a missed run
                local opts = { missed = args.policy, grace = 0.5 }
                local id = ctx.schedule.at(ctx.now() + args.seconds, "ring", { cid = msg.cid, text = args.text }, opts)
                ctx.reply("alarm " .. id .. " set")
              end }
            ctx.commands.add{ name = "standup", run = function(args, msg, ctx)
              local id = ctx.schedule.cron("0 9 * * MON-FRI", "ring", { cid = msg.cid, text = "站会 standup" },
                { tz = "Asia/Shanghai", id = "standup" })
              ctx.reply("cron " .. id .. " set")
            end }
            ctx.commands.add{ name = "jobs", run = function(args, msg, ctx)
              local out = {}
              for _, j in ipairs(ctx.schedule.list()) do
                out[#out + 1] = j.id .. " " .. j.kind .. " " .. (j.kind == "cron" and j.spec or j.fn)
              end
              table.sort(out)
              ctx.reply(#out == 0 and "no jobs" or table.concat(out, "; "))
            end }
          end,
          on_receive = function(msg, ctx) if msg.text == "ping" then ctx.reply("pong") end end,
          schedules = {
            ring = function(data, ctx, info)
              ctx.send(data.cid, "⏰ " .. data.text .. (info.catch_up and " (late)" or ""))
            end,
          },
        }
        """

    /// A server and a bot host with the alarm plugin, and Tom's conversation with the bot.
    private func startAlarmBot() async throws -> (BotHarness, BotHost, BotConversation) {
        let harness = try await BotHarness.start(attachment: .inProcess)
        addTeardownBlock(releasing: harness.server) { await $0.stop() }
        try harness.write("alarm.lua", Self.plugin)
        let bot = try await harness.bot()
        return (harness, bot, try await harness.conversationWithBot())
    }

    func testAJobMadeBeforeARestartFiresAfterIt() async throws {
        let (harness, first, chat) = try await startAlarmBot()
        try await chat.expectReply(to: "!alarm 3 once drink water 🥤", "alarm 1 set")
        try await chat.expectReply(to: "!standup", "cron standup set")
        await first.stop()

        // The next bot host on the same state file, well before the alarm is due: it rings on time.
        let second = try await harness.bot()
        addTeardownBlock(releasing: second) { await $0.stop() }
        try await chat.expectReply(to: "!jobs", "1 at ring; standup cron 0 9 * * MON-FRI")
        try await chat.expectBot("⏰ drink water 🥤")
        try await chat.expectReply(to: "!jobs", "standup cron 0 9 * * MON-FRI")
    }

    func testJobsDueWhileNoBotRanFollowTheirPolicy() async throws {
        let (harness, first, chat) = try await startAlarmBot()
        try await chat.expectReply(to: "!alarm 1 skip 早会 skipped", "alarm 1 set")
        try await chat.expectReply(to: "!alarm 1 once tea", "alarm 2 set")
        await first.stop()
        // Both fall due while no bot runs; the next one starts two seconds late.
        try await Task.sleep(for: .milliseconds(2500))
        let second = try await harness.bot()
        addTeardownBlock(releasing: second) { await $0.stop() }
        // "once": run late, marked as a catch-up; "skip": dropped. The ping's pong comes after the one ring.
        try await chat.expectBot("⏰ tea (late)")
        try await chat.expectReply(to: "ping", "pong")
        try await chat.expectReply(to: "!jobs", "no jobs")
    }
}
