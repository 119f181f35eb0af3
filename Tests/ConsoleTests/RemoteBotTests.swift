import BotHost
import Console
import Foundation
import HookbotTestSupport
import IMClient
import IMServer
import Logging
import Telemetry
import XCTest

/// `hookbot server` and `hookbot run --server` as two parts: the server exports its own metrics on its
/// port; the bot serves the console, the admin API and the plugins' and bot's metrics on a port of its own.
final class RemoteBotTests: XCTestCase {
    func testServerAndRemoteBotEachExportTheirPart() async throws {
        let server = try await ServerHarness.start { configuration in
            configuration.interception.interceptors = [.init(clientID: "modbot", secret: "remote-secret")]
        }
        let remote = try await RemoteBotConsole.start(
            server: server, plugins: ConsoleHarness.plugins, interceptorSecret: "remote-secret")
        let base = remote.base

        // A blocked message from Tom, reviewed by the remote bot.
        let tom = server.client("Tom")
        try await tom.open()
        let conversation = try await tom.createConversation(name: "remote", members: ["modbot"])
        try await conversation.sendRefused("a scam")

        let botMetrics = try PrometheusText.parse(try await HTTPAnswer.fetch(base + "/metrics").text)
        XCTAssertEqual(botMetrics[#"hookbot_hook_calls_total{hook="moderation",plugin="moderation"}"#], 1)
        XCTAssertEqual(botMetrics[#"hookbot_plugin_loads_total{plugin="greeter",result="ok"}"#], 1)
        XCTAssertNil(botMetrics["hookbot_messages_stored_total"], "server metrics belong to the server's port")

        let serverMetrics = try PrometheusText.parse(try await HTTPAnswer.fetch("http://127.0.0.1:\(server.port)/metrics").text)
        XCTAssertEqual(serverMetrics[#"hookbot_interception_verdicts_total{verdict="drop"}"#], 1)
        XCTAssertEqual(serverMetrics[#"hookbot_sessions{format="json"}"#], 2, "the bot and Tom")
        XCTAssertNil(serverMetrics[#"hookbot_hook_calls_total{hook="moderation",plugin="moderation"}"#])

        let ready = try await HTTPAnswer.fetch(base + "/ready")
        XCTAssertEqual(ready.status, 200)
        let unauthorized = try await HTTPAnswer.fetch(base + "/api/plugins")
        XCTAssertEqual(unauthorized.status, 401)
        let plugins = try await HTTPAnswer.fetch(base + "/api/plugins", token: remote.console.token).array()
        XCTAssertEqual(Set(plugins.compactMap { $0["name"] as? String }), ["greeter", "moderation"])
        let interception = try await HTTPAnswer.fetch(base + "/api/interception", token: remote.console.token).object()
        XCTAssertEqual((interception["bot"] as? [String: Int])?["blocked"], 1)
        XCTAssertNil(interception["requests"], "a remote bot does not know the server's counters")
        let serverReady = try await HTTPAnswer.fetch("http://127.0.0.1:\(server.port)/ready")
        XCTAssertEqual(serverReady.status, 200)

        await tom.close()
        await remote.stop()
        let notReady = try? await HTTPAnswer.fetch(base + "/ready")
        XCTAssertNil(notReady, "the console's listener stopped")
        await server.stop()
    }

    /// A remote bot's console tells the page where the server is (the URL the bot was given), and the
    /// page's chat, served from the bot's port, logs in over the server's WebSocket in a real browser.
    func testRemoteBotsConsoleChatReachesTheServer() async throws {
        let server = try await ServerHarness.start()
        let remote = try await RemoteBotConsole.start(server: server)
        addTeardownBlock {
            await remote.stop()
            await server.stop()
        }
        let base = remote.base

        let info = try await HTTPAnswer.fetch(base + "/api/info").object()
        XCTAssertEqual(info["ws"] as? String, remote.serverURL)
        let page = try await HTTPAnswer.fetch(base + "/")
        XCTAssertEqual(page.status, 200)
        // The page may connect to its own origin and the server's WebSocket, nothing else.
        let connect = page.contentSecurityPolicy?.split(separator: ";").first { $0.contains("connect-src") }
        XCTAssertEqual(
            connect.map { $0.trimmingCharacters(in: .whitespaces) },
            "connect-src 'self' ws://127.0.0.1:\(remote.listener.port) wss://127.0.0.1:\(remote.listener.port) "
                + "ws://127.0.0.1:\(server.port) http://127.0.0.1:\(server.port)")

        try requireBrowser()
        try await withBrowser(screenshot: "remote-bot-chat") { browser in
            try await browser.open(base + "/")
            try await browser.logIn(as: "Tom")
            try await browser.waitUntil(
                "Tom to be logged in on the remote server",
                "return document.querySelector('#current-user')?.textContent.includes('Tom') === true")
            // The server itself has the page's session besides the bot's.
            let metrics = try PrometheusText.parse(try await HTTPAnswer.fetch("http://127.0.0.1:\(server.port)/metrics").text)
            XCTAssertEqual(metrics[#"hookbot_sessions{format="json"}"#], 2, "the bot and the page's Tom")
        }
    }
}
