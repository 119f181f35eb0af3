import BotHost
import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import NIOPosix
import Synchronization
import Testing

/// The bot host and its SDK client run on the Lua thread, their serial executor (issue 30, round 6), so an
/// event's way from the client through the hooks to the reply takes no hop. Anybody else who calls them — the
/// console, the admin socket, a program embedding the host — hops onto that thread for the call and must be
/// back on Swift's pool when it returns: never left on the Lua thread, a NIO event loop, where a blocking
/// `wait()` crashes and any caller's code would hold up the hooks (what sank round 5's task-executor routing).
@Suite struct BotExecutorTests {
    static let echo = """
        return {
          name = "echo",
          on_receive = function(msg, ctx) ctx.reply("回声 " .. msg.text) end,
        }
        """

    /// Whether the code running now is on an event loop thread (the Lua thread is one).
    static var onEventLoop: Bool { MultiThreadedEventLoopGroup.currentEventLoop != nil }

    final class Tally: Sendable {
        let calls = Atomic<Int>(0)
        let leftOnLoop = Atomic<Int>(0)

        func count() {
            calls.add(1, ordering: .relaxed)
            if BotExecutorTests.onEventLoop { leftOnLoop.add(1, ordering: .relaxed) }
        }
    }

    /// Calls the host, its client and the runtime again and again, counting each return onto an event loop.
    static func call(_ bot: BotHost, in cid: String, _ tally: Tally) async {
        for _ in 0..<40 {
            _ = await bot.client.state
            tally.count()
            _ = await bot.pluginViews()
            tally.count()
            _ = try? await bot.client.conversation(cid).countMembers()
            tally.count()
            _ = await bot.runtime.plugins
            tally.count()
        }
    }

    @Test(arguments: BotAttachment.allCases)
    func callersAreNeverLeftOnTheLuaThread(_ attachment: BotAttachment) async throws {
        try await BotHarness.start(attachment: attachment).whileRunning { harness in
            try harness.write("echo.lua", Self.echo)
            let bot = try await harness.bot { $0.replyLimit = 10_000 }
            let chat = try await harness.conversationWithBot()
            let cid = chat.conversation.id
            // The bot busy: Tom keeps 300 messages in flight (Chinese, emoji, a mention), each answered.
            let count = 300
            let sender = Task {
                var pending: [IMPendingMessage] = []
                for k in 0..<count {
                    pending.append(
                        try await chat.conversation.submit(.text("第 \(k) 条 🎈 @modbot"), options: IMSendOptions(mentionPids: ["modbot"])))
                }
                for message in pending { _ = try await message.message() }
            }
            // Meanwhile callers of the host, its client and the runtime, from plain and detached tasks: after each
            // await, the caller's own code must run off every event loop.
            let tally = Tally()
            var callers: [Task<Void, Never>] = []
            for _ in 0..<6 {
                callers.append(Task { await Self.call(bot, in: cid, tally) })
                callers.append(Task.detached { await Self.call(bot, in: cid, tally) })
            }
            for caller in callers { await caller.value }
            try await sender.value
            #expect(tally.calls.load(ordering: .relaxed) == 12 * 40 * 4)
            #expect(tally.leftOnLoop.load(ordering: .relaxed) == 0, "a caller's code ran on an event loop after its await")
            // The bot answered every message while it was being called.
            let replies = try await chat.logs[0].messages(count, in: cid)
            #expect(replies.allSatisfy { $0.from == "modbot" })
            #expect(replies.first?.content.text == "回声 第 0 条 🎈 @modbot")
            await bot.stop()
            #expect(!Self.onEventLoop)
        }
    }

    /// A hook that spins to its deadline holds the Lua thread for that long; what the console and the admin socket
    /// read of the host and its client meanwhile (the counters, the client's state: `GET /ready`) answers at once.
    @Test func aSpinningHookDoesNotHoldUpStatusReads() async throws {
        try await BotHarness.start(attachment: .inProcess).whileRunning { harness in
            try harness.write("spin.lua", "return { name = 'spin', on_receive = function(msg, ctx) while true do end end }")
            let bot = try await harness.bot {
                $0.plugins.limits.instructionBudget = 0
                $0.plugins.limits.deadline = 0.8
            }
            let chat = try await harness.conversationWithBot()
            for k in 1...3 { _ = try await chat.conversation.submit(.text("转圈 \(k) 🌀")) }
            // Sent: the Lua thread spins for about 2.4 s from now.
            try await Task.sleep(for: .milliseconds(200))
            var slowest = Duration.zero
            let until = ContinuousClock.now + .seconds(1.5)
            while ContinuousClock.now < until {
                let asked = ContinuousClock.now
                let state = await bot.client.state
                let stats = await bot.statistics
                slowest = max(slowest, asked.duration(to: .now))
                #expect(state == .opened)
                #expect(stats.verdicts >= 0)
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(slowest < .milliseconds(200), "status reads waited \(slowest) for the spinning hook")
            // The hook was in fact holding the Lua thread: the runtime answers only after it.
            let asked = ContinuousClock.now
            _ = await bot.runtime.plugins
            #expect(asked.duration(to: .now) > .milliseconds(100))
            await bot.stop()
        }
    }
}
