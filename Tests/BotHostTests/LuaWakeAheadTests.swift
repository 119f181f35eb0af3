import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import BotHost

/// The Lua thread woken ahead of an in-process review (`LuaWakeAhead`, issue 30, round 9): the server's heads-up queues
/// a job on the Lua loop that stays until the review's job is queued, bounded in time and in number.
@Suite(.serialized) struct LuaWakeAheadTests {
    static let moderation = InProcessReviewTests.moderation

    /// A loop of its own, as the plugin runtime's Lua loop is.
    private func withLoop(_ body: (any EventLoop) async throws -> Void) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do {
            try await body(group.next())
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        try await group.shutdownGracefully()
    }

    @Test func theWaitingJobReturnsWhenTheReviewsJobIsQueued() async throws {
        try await withLoop { loop in
            // A budget no test waits out: the job returns because the review's job was queued, or the test times out.
            let wake = LuaWakeAhead(loop: loop, budget: .seconds(60), restAfterMiss: .seconds(60))
            wake.headsUp()
            try await waitUntil("the waiting job to run") { wake.counts.waits == 1 }
            let ran = Atomic<Bool>(false)
            loop.execute { ran.store(true, ordering: .relaxed) } // the review's job, say
            wake.reviewQueued()
            try await waitUntil("the job queued behind the waiting one to run") { ran.load(ordering: .relaxed) }
            #expect(wake.counts == .init(waits: 1, reviewed: 1, missed: 0, ignored: 0))
        }
    }

    @Test func aHeadsUpNoReviewFollowsEndsAtTheBudgetAndTheNextOnesRest() async throws {
        try await withLoop { loop in
            let wake = LuaWakeAhead(loop: loop, budget: .milliseconds(2), restAfterMiss: .seconds(60))
            // A flood of heads-ups with no review: one job waits, the others are ignored.
            for _ in 0..<100 { wake.headsUp() }
            try await loop.submit {}.get() // the loop runs what is queued after the wait
            try await waitUntil("the wait to end") { wake.counts.missed == 1 }
            // After a wait in vain, heads-ups rest: none keeps the loop waiting again.
            for _ in 0..<100 { wake.headsUp() }
            try await loop.submit {}.get()
            #expect(wake.counts == .init(waits: 1, reviewed: 0, missed: 1, ignored: 199))
            // A review's job queued with no heads-up before it changes nothing.
            wake.reviewQueued()
            #expect(wake.counts.waits == 1)
        }
    }

    /// The whole way: a message a client sends over a WebSocket gives the in-process bot a heads-up, which wakes its
    /// Lua thread before the review's request; the verdicts are what they were.
    @Test func aMessageOverAWebSocketWakesTheBotsLuaThreadAheadOfItsReview() async throws {
        try await BotHarness.start(attachment: .inProcess).whileRunning { harness in
            try harness.write("ads.lua", Self.moderation)
            let bot = try await harness.bot()
            let wake = try #require(bot.reviewStart?.wakeAhead)
            #expect(wake.counts.waits == 0)
            try await harness.server.client("Tom").whileOpen { tom in
                let conversation = try await tom.createConversation(members: ["Jerry"])
                _ = try await conversation.send(.text("大家好，周末愉快 😀"))
                await #expect(throws: (any Error).self) { _ = try await conversation.send(.text("加我看广告，便宜 💰")) }
            }
            let counts = wake.counts
            #expect(counts.waits >= 1, "\(counts)")
            #expect(counts.waits == counts.reviewed + counts.missed, "\(counts)")
            let stats = harness.server.server.interceptionStats
            #expect(stats.dropped == 1)
            #expect(stats.policyApplied == 0)
            await bot.stop()
        }
    }
}
