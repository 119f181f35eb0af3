import Foundation
import HookbotTestSupport
import IMClient
import XCTest

/// What a newcomer meets on the command line, through the built `hookbot` binary against a real
/// `hookbot server`: a refused interceptor login says what it needs, a bot the server does not list as its
/// interceptor warns, `plugins` and `reload` print tables (`--json` for scripts), `chat` says what its
/// commands sent, `--version` answers.
final class CLIFrictionTests: XCTestCase {
    private var directory: URL!
    private var binary: URL!

    override func setUp() async throws {
        binary = try XCTUnwrap(ServerProcess.binaryURL(), "hookbot is not built")
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-cli-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("plugins"), withIntermediateDirectories: true)
        try """
        return { name = "echo", on_receive = function(msg, ctx) if msg.text == "回声" then ctx.reply("回声 🔁") end end }
        """.write(to: directory.appendingPathComponent("plugins/echo.lua"), atomically: true, encoding: .utf8)
    }

    override func tearDown() async throws {
        try? FileManager.default.removeItem(at: directory)
    }

    /// A bot's configuration file in the test's folder: its client id, state and admin socket there, the
    /// console on a free port.
    private func writeConfiguration(clientID: String) throws {
        try """
        [bot]
        client_id = "\(clientID)"
        state = "state.sqlite"
        admin_socket = "admin.sock"

        [console]
        port = 0
        """.write(to: directory.appendingPathComponent("hookbot.toml"), atomically: true, encoding: .utf8)
    }

    private func server(_ extra: [String] = []) async throws -> ServerProcess {
        try await ServerProcess.launch(binary: binary, store: ["--db", directory.appendingPathComponent("im.sqlite").path] + extra)
    }

    func testVersion() async throws {
        let child = try LineProcess(binary: binary, arguments: ["--version"])
        let status = try await child.waitForExit()
        XCTAssertEqual(status, 0)
        XCTAssertTrue(child.printed.hasPrefix("hookbot 0."), child.printed)
    }

    func testAnInterceptorLoginWithoutOrWithAWrongSecretSaysWhatItNeeds() async throws {
        let server = try await server(["--interceptor", "modbot=S3cret-for-tests"])
        defer { server.kill() }
        try writeConfiguration(clientID: "modbot")
        let url = "ws://127.0.0.1:\(server.port)/ws"

        let without = try LineProcess(binary: binary, arguments: ["run", "--server", url, "--plugins", "plugins"], in: directory)
        let status = try await without.waitForExit(timeout: .seconds(20))
        XCTAssertNotEqual(status, 0)
        // The server's reason and the bot's log line both name the option.
        XCTAssertTrue(without.printed.contains("4102"), without.printed)
        XCTAssertTrue(without.printed.contains("is this server's interceptor (--interceptor modbot=SECRET)"), without.printed)
        XCTAssertTrue(without.printed.contains("start the bot with --interceptor-secret SECRET"), without.printed)

        let wrong = try LineProcess(
            binary: binary, arguments: ["run", "--server", url, "--plugins", "plugins", "--interceptor-secret", "not-it"], in: directory)
        _ = try await wrong.waitForExit(timeout: .seconds(20))
        XCTAssertTrue(wrong.printed.contains("signature does not match"), wrong.printed)
        XCTAssertTrue(wrong.printed.contains("is not the one the server has for modbot"), wrong.printed)
    }

    func testABotTheServerDoesNotListWarnsAndItsPluginsPrintAsTables() async throws {
        let server = try await server(["--interceptor", "modbot=S3cret-for-tests"])
        defer { server.kill() }
        try writeConfiguration(clientID: "helperbot")
        let bot = try LineProcess(
            binary: binary, arguments: ["run", "--server", "ws://127.0.0.1:\(server.port)/ws", "--plugins", "plugins"], in: directory)
        defer { bot.stop() }
        try await bot.waitFor("the server does not list this bot as its interceptor", timeout: .seconds(20))
        XCTAssertTrue(bot.printed.contains("moderation can only act after delivery"), bot.printed)
        try await bot.waitFor("is connected to", timeout: .seconds(20))

        let socket = directory.appendingPathComponent("admin.sock").path
        let plugins = try LineProcess(binary: binary, arguments: ["plugins", "--socket", socket])
        let pluginsStatus = try await plugins.waitForExit()
        XCTAssertEqual(pluginsStatus, 0, plugins.printed)
        let lines = plugins.printed.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.first?.split(separator: " ", omittingEmptySubsequences: true).prefix(3), ["PLUGIN", "STATE", "PRIORITY"])
        XCTAssertTrue(lines.dropFirst().first?.hasPrefix("echo    loaded") == true, plugins.printed)
        XCTAssertTrue(lines.dropFirst().first?.contains("on_receive") == true, plugins.printed)

        let json = try LineProcess(binary: binary, arguments: ["plugins", "--json", "--socket", socket])
        let jsonStatus = try await json.waitForExit()
        XCTAssertEqual(jsonStatus, 0, json.printed)
        let listed = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(json.printed.utf8)) as? [[String: Any]], json.printed)
        XCTAssertEqual(listed.map { $0["name"] as? String }, ["echo"])

        let reload = try LineProcess(binary: binary, arguments: ["reload", "--socket", socket])
        let reloadStatus = try await reload.waitForExit()
        XCTAssertEqual(reloadStatus, 0, reload.printed)
        XCTAssertEqual(reload.printed, "PLUGIN  RESULT\necho    reloaded\n")

        let stats = try LineProcess(binary: binary, arguments: ["plugins", "--stats", "--socket", socket])
        let statsStatus = try await stats.waitForExit()
        XCTAssertEqual(statsStatus, 0, stats.printed)
        XCTAssertTrue(stats.printed.hasPrefix("COUNTER"), stats.printed)
        XCTAssertTrue(stats.printed.contains("\nmessages "), stats.printed)
    }

    func testChatSaysWhatItsCommandsSent() async throws {
        let server = try await server()
        defer { server.kill() }
        let jerry = try await TestClient.login("Jerry", port: server.port)
        let lobby = try await jerry.startConversation(members: ["Jerry"], name: "午餐")
        addTeardownBlock(releasing: jerry) { await $0.close() }

        let chat = try LineProcess(binary: binary, arguments: ["chat", "--as", "Tom", "--conversation", lobby, "--port", "\(server.port)"])
        defer { chat.stop() }
        try await chat.waitFor("Logged in as Tom", timeout: .seconds(20))
        chat.type("/typing")
        try await chat.waitFor("* sent a transient \"typing…\" message (_lctype 1, not stored)")
        chat.type(#"/cmd wave {"times": 2}"#)
        try await chat.waitFor(#"* sent cmd message wave {"times":2} (not stored)"#)
        chat.type(#"/push {"alert": "Tom 找你"} 在吗？"#)
        try await chat.waitFor(#"* sent "在吗？" ("#)
        XCTAssertTrue(chat.printed.contains(#"with pushData {"alert": "Tom 找你"}"#), chat.printed)
        chat.type("/exit")
        let chatStatus = try await chat.waitForExit()
        XCTAssertEqual(chatStatus, 0, chat.printed)
    }
}
