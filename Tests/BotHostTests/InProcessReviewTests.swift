import BotHost
import Foundation
import HookbotTestSupport
import IMCore
import IMServer
import NIOCore
import Testing

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
}
