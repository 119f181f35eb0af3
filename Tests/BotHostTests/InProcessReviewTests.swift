import Foundation
import HookbotTestSupport
import IMCore
import IMServer
import NIOCore
import Synchronization
import Testing

@testable import BotHost

/// The in-process bot answers the server's reviews by callback from its Lua thread, where the server applies the
/// verdict (issue 30, W2): the review crosses from the server's event loop to the Lua thread once, and no task on
/// Swift's pool carries the verdict on.
@Suite(.serialized) struct InProcessReviewTests {
    static let moderation = """
        return {
          name = "ads",
          moderation = function(msg, ctx)
            if (msg.text or ""):find("广告") then return { verdict = "block", reason = "不要发广告", code = 12 } end
          end,
        }
        """

    @Test func theVerdictIsAppliedOnTheBotsLuaThread() async throws {
        try await BotHarness.start(attachment: .inProcess).whileRunning { harness in
            try harness.write("ads.lua", Self.moderation)
            let bot = try await harness.bot()
            let loop = try #require(bot.runtime.executor as? any EventLoop)
            let luaThread = try await loop.submit { ObjectIdentifier(Thread.current) }.get()
            let tom = try await LocalRawClient.login("Tom", to: harness.server.server)
            let jerry = try await LocalRawClient.login("Jerry", to: harness.server.server)
            let cid = try await tom.startConversation(members: ["Jerry"])

            let allowed = try await tom.sendTextWithThread("大家好，周末愉快 😀", to: cid)
            #expect(allowed.command.code == nil)
            let refused = try await tom.sendTextWithThread("加我看广告，便宜 💰", to: cid)
            #expect(refused.command.code == 4402)
            #expect(refused.command.detail == "不要发广告")
            #expect(refused.command.appCode == 12)
            // A refusal is sent to the sender where the verdict is applied: on the Lua thread that gave it.
            #expect(refused.thread == luaThread, "the verdict was carried to another thread before it was applied")
            _ = try await tom.sendTextWithThread("@Jerry 明天见 👋", to: cid)

            var received: [String] = []
            while let delivered = await jerry.inbox.take(timeout: .milliseconds(500), where: { $0.command.cmd == .direct }) {
                received.append(delivered.command.msg.flatMap(TypedMessage.decode)?.text ?? "")
            }
            #expect(received == ["大家好，周末愉快 😀", "@Jerry 明天见 👋"])
            let stats = harness.server.server.interceptionStats
            #expect(stats.dropped == 1)
            #expect(stats.allowed == 2)
            #expect(stats.policyApplied == 0)
            tom.close()
            jerry.close()
            await bot.stop()
        }
    }

    /// The review starts in the first job the request puts on the Lua loop (issue 30, round 8: the loop's wake-up
    /// runs the review, not a job that only starts the review's task behind whatever else was queued meanwhile).
    @Test func theReviewRunsInTheJobTheRequestQueuesOnTheLuaLoop() async throws {
        try await BotHarness.start(attachment: .inProcess).whileRunning { harness in
            try harness.write("ads.lua", Self.moderation)
            let bot = try await harness.bot()
            let loop = try #require(bot.runtime.executor as? any EventLoop)
            let cid = "reviewed-in-order"
            // A known sender: the review asks the server for no members, so it runs to its verdict without waiting.
            bot.runtime.members.joined(["Tom"], in: cid, at: Date().timeIntervalSince1970, founding: false)
            let order = Order()
            let (done, finished) = AsyncStream<Void>.makeStream()
            // The Lua thread is held while the request and then another job are queued behind it.
            let gate = DispatchSemaphore(value: 0)
            loop.execute { gate.wait() }
            let request = HookRequest.message(
                cid: cid, from: "Tom", content: .text("加我看广告"), priority: nil, mentionPids: nil)
            bot.answer(request) { verdict in
                order.items.withLock { $0.append("verdict: \(verdict?.name ?? "none")") }
                finished.yield()
            }
            loop.execute {
                order.items.withLock { $0.append("the job queued after the request") }
                finished.yield()
            }
            gate.signal()
            var events = done.makeAsyncIterator()
            _ = await events.next()
            _ = await events.next()
            #expect(order.items.withLock { $0 } == ["verdict: drop", "the job queued after the request"])
            await bot.stop()
        }
    }
}

/// What happened, in order, as the threads that did it recorded it.
private final class Order: Sendable {
    let items = Mutex<[String]>([])
}
