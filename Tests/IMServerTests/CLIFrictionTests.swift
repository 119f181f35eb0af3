import Foundation
import HookbotTestSupport
import IMClient
import XCTest

/// What a newcomer meets on the command line, through the built `hookbot` binary against a real
/// `hookbot server`: a refused interceptor login says what it needs, a bot the server does not list as its
/// interceptor warns, `plugins` and `reload` print tables (`--json` for scripts), `chat` says what its
/// commands sent, `--version` answers.
final class CLIFrictionTests: XCTestCase {
    /// A child process whose output (stdout and stderr together) is collected as it comes.
    final class Child: @unchecked Sendable {
        let process = Process()
        private let lock = NSLock()
        private var collected = Data()
        private let input = Pipe()

        init(_ binary: URL, _ arguments: [String], in directory: URL? = nil) throws {
            process.executableURL = binary
            process.arguments = arguments
            if let directory { process.currentDirectoryURL = directory }
            let output = Pipe()
            process.standardOutput = output
            process.standardError = output
            process.standardInput = input
            output.fileHandleForReading.readabilityHandler = { [weak self] handle in
                let data = handle.availableData
                guard let self, !data.isEmpty else { return }
                self.lock.withLock { self.collected.append(data) }
            }
            try process.run()
        }

        var output: String { lock.withLock { String(decoding: collected, as: UTF8.self) } }

        func send(_ line: String) { input.fileHandleForWriting.write(Data((line + "\n").utf8)) }

        /// Waits until the output contains `text` (or the process has ended and it does not).
        func waitFor(_ text: String, seconds: Double = 20) async throws {
            let deadline = ContinuousClock.now + .seconds(seconds)
            while ContinuousClock.now < deadline {
                if output.contains(text) { return }
                if !process.isRunning {
                    try await Task.sleep(for: .milliseconds(100))
                    if output.contains(text) { return }
                    break
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            throw TestFailure("no \"\(text)\" in:\n\(output)")
        }

        func waitForExit(seconds: Double = 20) async throws -> Int32 {
            let deadline = ContinuousClock.now + .seconds(seconds)
            while process.isRunning, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
            guard !process.isRunning else {
                stop()
                throw TestFailure("still running after \(seconds) s:\n\(output)")
            }
            return process.terminationStatus
        }

        func stop() {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
        }
    }

    struct TestFailure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

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
        let child = try Child(binary, ["--version"])
        let status = try await child.waitForExit()
        XCTAssertEqual(status, 0)
        XCTAssertTrue(child.output.hasPrefix("hookbot 0."), child.output)
    }

    func testAnInterceptorLoginWithoutOrWithAWrongSecretSaysWhatItNeeds() async throws {
        let server = try await server(["--interceptor", "modbot=S3cret-for-tests"])
        defer { server.kill() }
        try writeConfiguration(clientID: "modbot")
        let url = "ws://127.0.0.1:\(server.port)/ws"

        let without = try Child(binary, ["run", "--server", url, "--plugins", "plugins"], in: directory)
        let status = try await without.waitForExit()
        XCTAssertNotEqual(status, 0)
        // The server's reason and the bot's log line both name the option.
        XCTAssertTrue(without.output.contains("4102"), without.output)
        XCTAssertTrue(without.output.contains("is this server's interceptor (--interceptor modbot=SECRET)"), without.output)
        XCTAssertTrue(without.output.contains("start the bot with --interceptor-secret SECRET"), without.output)

        let wrong = try Child(binary, ["run", "--server", url, "--plugins", "plugins", "--interceptor-secret", "not-it"], in: directory)
        _ = try await wrong.waitForExit()
        XCTAssertTrue(wrong.output.contains("signature does not match"), wrong.output)
        XCTAssertTrue(wrong.output.contains("is not the one the server has for modbot"), wrong.output)
    }

    func testABotTheServerDoesNotListWarnsAndItsPluginsPrintAsTables() async throws {
        let server = try await server(["--interceptor", "modbot=S3cret-for-tests"])
        defer { server.kill() }
        try writeConfiguration(clientID: "helperbot")
        let bot = try Child(binary, ["run", "--server", "ws://127.0.0.1:\(server.port)/ws", "--plugins", "plugins"], in: directory)
        defer { bot.stop() }
        try await bot.waitFor("the server does not list this bot as its interceptor")
        XCTAssertTrue(bot.output.contains("moderation can only act after delivery"), bot.output)
        try await bot.waitFor("is connected to")

        let socket = directory.appendingPathComponent("admin.sock").path
        let plugins = try Child(binary, ["plugins", "--socket", socket])
        let pluginsStatus = try await plugins.waitForExit()
        XCTAssertEqual(pluginsStatus, 0, plugins.output)
        let lines = plugins.output.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.first?.split(separator: " ", omittingEmptySubsequences: true).prefix(3), ["PLUGIN", "STATE", "PRIORITY"])
        XCTAssertTrue(lines.dropFirst().first?.hasPrefix("echo    loaded") == true, plugins.output)
        XCTAssertTrue(lines.dropFirst().first?.contains("on_receive") == true, plugins.output)

        let json = try Child(binary, ["plugins", "--json", "--socket", socket])
        let jsonStatus = try await json.waitForExit()
        XCTAssertEqual(jsonStatus, 0, json.output)
        let listed = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [[String: Any]], json.output)
        XCTAssertEqual(listed.map { $0["name"] as? String }, ["echo"])

        let reload = try Child(binary, ["reload", "--socket", socket])
        let reloadStatus = try await reload.waitForExit()
        XCTAssertEqual(reloadStatus, 0, reload.output)
        XCTAssertEqual(reload.output, "PLUGIN  RESULT\necho    reloaded\n")

        let stats = try Child(binary, ["plugins", "--stats", "--socket", socket])
        let statsStatus = try await stats.waitForExit()
        XCTAssertEqual(statsStatus, 0, stats.output)
        XCTAssertTrue(stats.output.hasPrefix("COUNTER"), stats.output)
        XCTAssertTrue(stats.output.contains("\nmessages "), stats.output)
    }

    func testChatSaysWhatItsCommandsSent() async throws {
        let server = try await server()
        defer { server.kill() }
        let jerry = try await TestClient.login("Jerry", port: server.port)
        let lobby = try await jerry.startConversation(members: ["Jerry"], name: "午餐")
        addTeardownBlock { await jerry.close() }

        let chat = try Child(binary, ["chat", "--as", "Tom", "--conversation", lobby, "--port", "\(server.port)"])
        defer { chat.stop() }
        try await chat.waitFor("Logged in as Tom")
        chat.send("/typing")
        try await chat.waitFor("* sent a transient \"typing…\" message (_lctype 1, not stored)")
        chat.send(#"/cmd wave {"times": 2}"#)
        try await chat.waitFor(#"* sent cmd message wave {"times":2} (not stored)"#)
        chat.send(#"/push {"alert": "Tom 找你"} 在吗？"#)
        try await chat.waitFor(#"* sent "在吗？" ("#)
        XCTAssertTrue(chat.output.contains(#"with pushData {"alert": "Tom 找你"}"#), chat.output)
        chat.send("/exit")
        let chatStatus = try await chat.waitForExit()
        XCTAssertEqual(chatStatus, 0, chat.output)
    }
}
