import BotHost
import BotHub
import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import IMServer
import XCTest

/// `hookbot run` with `[bot] app_id` / `master_key`: the embedded server requires signatures, and the bot
/// (interceptor and member of the lobby) signs its own actions.
final class EmbeddedSignatureTests: XCTestCase {
    func testTheEmbeddedServerCanRequireSignaturesWithTheBotAsInterceptor() async throws {
        setenv("HOOKBOT_TEST_MASTER_KEY", "master-key", 1)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-embedded-\(UUID().uuidString)")
        let plugins = directory.appendingPathComponent("plugins")
        try FileManager.default.createDirectory(at: plugins, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try BotHostTests.moderation.write(to: plugins.appendingPathComponent("mod.lua"), atomically: true, encoding: .utf8)
        var configuration = try BotConfiguration.parse(
            """
            [bot]
            app_id = "app"
            master_key = "env:HOOKBOT_TEST_MASTER_KEY"
            [server]
            port = 0
            """, relativeTo: directory)
        XCTAssertEqual(configuration.masterKey, "master-key")
        configuration.plugins.directory = plugins
        configuration.statePath = directory.appendingPathComponent("state.sqlite").path
        configuration.server.database = directory.appendingPathComponent("hub.sqlite").path
        configuration.adminSocketPath = nil
        let hub = try await EmbeddedHub.start(configuration: configuration)
        let url = "ws://127.0.0.1:\(hub.port)/ws"

        let unsigned = IMClient(clientId: "Mallory", options: IMClientOptions(url: url))
        do {
            try await unsigned.open()
            XCTFail("an unsigned login succeeded")
        } catch {
            XCTAssertEqual(error.knownCode, .signatureFailed)
        }
        var options = IMClientOptions(url: url)
        options.signatureProvider = MasterKeySigner(signer: Signer(appID: "app", masterKey: "master-key"))
        let tom = IMClient(clientId: "Tom", options: options)
        try await tom.open()
        // Found by name, as `hookbot chat` looks for it, though Tom is not a member yet.
        let found = try await tom.conversations(matching: IMConversationQuery().whereKey("name", equalTo: "lobby"))
        XCTAssertEqual(found.map(\.id), [hub.lobbyID])
        let lobby = tom.conversation(hub.lobbyID)
        try await lobby.join()
        try await lobby.sendRefused("a forbidden-word here") // the bot's moderation applies
        XCTAssertTrue(hub.server.isInterceptorAttached("modbot"))
        await tom.close()
        await hub.stop()
    }
}
