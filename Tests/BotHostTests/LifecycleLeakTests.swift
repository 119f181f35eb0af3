import BotHost
import BotHub
import Foundation
import HookRuntime
import HookbotTestSupport
import IMClient
import IMServer
import Logging
import XCTest

/// A server and its bot are freed once stopped: their threads end and their files close. Three cycles kept them:
/// a WebSocket session and its transport held each other (through the transport's writer), and the transport held
/// its server; a bot's plugin runtime and its router held each other (the router as the runtime's `onAsyncResults`
/// handler), and through the router the bot's client, and through that, attached in process, the server; a
/// cancelled integrity-check deadline held the server's SQLite pool for 30 s. Each stopped server kept its message
/// pipeline's writer thread and its database open, each bot its Lua thread and state file: a whole test run reached
/// ~4,800 open descriptors, and Foundation's `Process.run` crashes more often the more a process has open.
final class LifecycleLeakTests: XCTestCase {
    static let greeter = """
        return {
          name = "greeter",
          on_receive = function(msg, ctx)
            if msg.text == "你好 👋" then ctx.reply("你好，" .. msg.from .. "！🎉") end
          end,
        }
        """

    /// Tom and Jerry talk with the bot, over each attachment; then everything stops, three times over.
    func testAStoppedServerAndItsBotAreFreed() async throws {
        for attachment in BotAttachment.allCases {
            try await expectFreed("a server and its bot (\(attachment))") { try await self.conversation(attachment) }
        }
    }

    /// `hookbot run`'s hub (what the console tests start), the bot attached in process and over a WebSocket.
    func testAStoppedEmbeddedHubIsFreed() async throws {
        for attachment in BotAttachment.allCases {
            try await expectFreed("an embedded hub (\(attachment))") { try await self.hub(attachment) }
        }
    }

    /// A server with the bot as its interceptor; Tom says hello in Chinese to the bot and Jerry, and the bot answers.
    private func conversation(_ attachment: BotAttachment) async throws -> @Sendable () -> [String] {
        let harness = try await BotHarness.start(attachment: attachment)
        try harness.write("greeter.lua", Self.greeter)
        let bot = try await harness.bot()
        let chat = try await harness.conversationWithBot(["Jerry"])
        try await chat.expectReply(to: "你好 👋", "你好，Tom！🎉")
        let freed = WeakReferences(
            [
                "server": harness.server.server, "bot": bot, "plugin runtime": bot.runtime, "bot's client": bot.client,
                "Tom": chat.clients[0],
                "Jerry": chat.clients[1],
            ])
        for client in chat.clients { await client.close() }
        await bot.stop()
        await harness.server.stop()
        return { freed.alive }
    }

    /// An embedded hub; Tom joins its lobby and says hello.
    private func hub(_ attachment: BotAttachment) async throws -> @Sendable () -> [String] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-leak-\(UUID().uuidString)")
        let plugins = directory.appendingPathComponent("plugins")
        try FileManager.default.createDirectory(at: plugins, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Self.greeter.write(to: plugins.appendingPathComponent("greeter.lua"), atomically: true, encoding: .utf8)
        var configuration = BotConfiguration()
        configuration.plugins.directory = plugins
        configuration.plugins.watchInterval = 0
        configuration.statePath = directory.appendingPathComponent("state.sqlite").path
        configuration.server.database = directory.appendingPathComponent("hub.sqlite").path
        configuration.server.port = 0
        configuration.server.attachment = attachment
        configuration.adminSocketPath = nil
        var logger = Logger(label: "leak-test-hub")
        logger.logLevel = .critical
        let hub = try await EmbeddedHub.start(configuration: configuration, logger: logger)
        var options = IMClientOptions(port: hub.port)
        options.requestTimeout = .seconds(10)
        let tom = IMClient(clientId: "Tom", options: options)
        let events = EventLog(tom)
        try await tom.open()
        let lobby = tom.conversation(hub.lobbyID)
        try await lobby.join()
        _ = try await lobby.send(.text("你好 👋"))
        let answer = try await events.message(from: hub.bot.configuration.clientID, in: hub.lobbyID)
        XCTAssertEqual(answer.content.text, "你好，Tom！🎉")
        let freed = WeakReferences(
            ["server": hub.server, "bot": hub.bot, "plugin runtime": hub.bot.runtime, "bot's client": hub.bot.client, "Tom": tom])
        await tom.close()
        await hub.stop()
        return { freed.alive }
    }
}
