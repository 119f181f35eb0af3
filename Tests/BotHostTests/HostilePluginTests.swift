import BotHost
import Foundation
import HookRuntime
import HookbotTestSupport
import IMClient
import XCTest

/// Hostile plugins inside a running bot, on a real server: one that loops, one that allocates without end,
/// one that floods the state store and expands shared tables, while a moderation plugin and a ping plugin do
/// their jobs. The bot stays up, every forbidden message is refused before delivery, users' pings are
/// answered within a bounded time, the hostile plugins are stopped by their limits and reported (circuit
/// breaker, errors), and the process's memory stays under a ceiling.
final class HostilePluginTests: XCTestCase {
    /// Ceiling for the test process's resident memory growth during the attack (measured: about 40 MiB;
    /// each plugin's Lua state is capped at 64 MiB, and the hostile ones are disabled after 5 failures).
    static let memoryCeilingMiB = 256.0

    func testHostilePluginsAreStoppedWhileModerationAndRepliesKeepWorking() async throws {
        let harness = try await BotHarness.start(attachment: .inProcess)
        defer { Task { await harness.server.stop() } }
        try harness.write("mod.lua", BotHostTests.moderation)
        try harness.write(
            "ping.lua",
            """
            return { name = "ping", on_receive = function(msg, ctx)
              if msg.text and msg.text:match("^ping %d+$") then ctx.reply("pong " .. msg.text:sub(6)) end
            end }
            """)
        try harness.write("spin.lua", "return { name = 'spin', on_receive = function(msg, ctx) while true do end end }")
        try harness.write(
            "hog.lua",
            """
            return { name = 'hog', on_receive = function(msg, ctx)
              local t = {}
              for i = 1, 1e9 do t[i] = string.rep("x", 1024) .. i end
            end }
            """)
        try harness.write(
            "bomb.lua",
            """
            return { name = 'bomb', on_receive = function(msg, ctx)
              local t = { 1, 1 }
              for i = 1, 26 do t = { t, t } end
              ctx.state.set("k" .. msg.id, t)
            end }
            """)
        let bot = try await harness.bot()
        let before = try residentMemoryMiB()
        let tom = harness.server.client("Tom")
        let logs = try await openClients([tom])
        let conversation = try await tom.createConversation(members: ["modbot"])

        var slowest = Duration.zero
        for round in 1...8 {
            do {
                _ = try await conversation.send(.text("a forbidden-word, round \(round)"))
                XCTFail("round \(round): the forbidden message was delivered")
            } catch {
                XCTAssertEqual(error.code, 4402, "round \(round): \(error)")
            }
            let sent = ContinuousClock.now
            _ = try await conversation.send(.text("ping \(round)"))
            let replies = try await logs[0].messages(1, in: conversation.id, timeout: .seconds(10))
            slowest = max(slowest, ContinuousClock.now - sent)
            XCTAssertEqual(replies.map(\.content.text), ["pong \(round)"])
        }
        // While the hostile plugins ran, each ping was answered within a few hook deadlines (250 ms each).
        XCTAssertLessThan(slowest, .seconds(3), "slowest ping round trip")

        let statuses = await bot.runtime.plugins
        let plugins = Dictionary(uniqueKeysWithValues: statuses.map { ($0.name, $0) })
        for name in ["spin", "hog", "bomb"] {
            let status = try XCTUnwrap(plugins[name], name)
            XCTAssertEqual(status.state, .disabled, "\(name) is stopped by the circuit breaker: \(status)")
            XCTAssertEqual(status.disabledBy, .breaker, name)
            XCTAssertNotNil(status.lastError, "\(name)'s failure is reported")
        }
        XCTAssertEqual(plugins["mod"]?.state, .loaded)
        XCTAssertEqual(plugins["ping"]?.state, .loaded)
        let stats = await bot.statistics
        XCTAssertEqual(stats.blocked, 8)
        let grown = try residentMemoryMiB() - before
        XCTAssertLessThan(grown, Self.memoryCeilingMiB, "resident memory grew by \(grown) MiB")
        await bot.stop()
    }
}
