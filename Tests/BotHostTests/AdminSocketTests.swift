import BotHost
import Foundation
import HookbotTestSupport
import XCTest

/// `hookbot reload`, `hookbot plugins` and `hookbot plugins --stats` reach a running bot through its admin
/// socket: one line in, one JSON document out — the same documents the console's admin API gives.
final class AdminSocketTests: XCTestCase {
    func testStatsPluginsAndReloadOverTheSocket() async throws {
        let harness = try await BotHarness.start(attachment: .inProcess)
        addTeardownBlock(releasing: harness.server) { await $0.stop() }
        try harness.write("echo.lua", "return { name = 'echo', on_receive = function(msg, ctx) ctx.reply(msg.text) end }")
        let bot = try await harness.bot()
        addTeardownBlock(releasing: bot) { await $0.stop() }
        let path = harness.server.directory.appendingPathComponent("admin-\(UUID().uuidString.prefix(8)).sock").path
        let socket = try await AdminSocket(path: path, bot: bot, logger: .init(label: "admin-test"))

        let plugins = try await AdminSocket.request("plugins", path: path)
        let listed = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(plugins.utf8)) as? [[String: Any]], plugins)
        XCTAssertEqual(listed.map { $0["name"] as? String }, ["echo"])
        let hooks = listed.first?["hooks"] as? [[String: Any]]
        XCTAssertEqual(hooks?.map { $0["name"] as? String }, ["on_receive"], "the console's PluginView, hooks with their usage")
        let stats = try await AdminSocket.request("stats", path: path)
        XCTAssertNotNil((try JSONSerialization.jsonObject(with: Data(stats.utf8)) as? [String: Any])?["messages"], stats)
        let reload = try await AdminSocket.request("reload", path: path)
        XCTAssertTrue(reload.contains("\"reloaded\""), reload)
        let unknown = try await AdminSocket.request("nonsense", path: path)
        XCTAssertTrue(unknown.contains("unknown request"), unknown)

        await socket.close()
        XCTAssertFalse(FileManager.default.fileExists(atPath: path))
        do {
            let answer = try await AdminSocket.request("stats", path: path)
            XCTFail("a closed socket answered: \(answer)")
        } catch let error as ConfigurationError {
            XCTAssertTrue(error.message.hasPrefix("no bot is listening on \(path)"), error.message)
        }
    }

    /// The real `hookbot plugins`, `hookbot plugins --json`, `--stats` and `hookbot reload` processes against
    /// a running bot that Tom and Jerry are chatting with (in Chinese, with emoji), one of its plugins failing.
    func testTheHookbotCommandsTalkToARunningBot() async throws {
        let harness = try await BotHarness.start(attachment: .inProcess)
        addTeardownBlock(releasing: harness.server) { await $0.stop() }
        try harness.write("echo.lua", "return { name = 'echo', on_receive = function(msg, ctx) ctx.reply('回声：' .. msg.text) end }")
        try harness.write(
            "fragile.lua", "return { name = 'fragile', on_receive = function(msg, ctx) error('不行 ' .. msg.text) end }")
        let bot = try await harness.bot()
        addTeardownBlock(releasing: bot) { await $0.stop() }
        let path = harness.server.directory.appendingPathComponent("admin-\(UUID().uuidString.prefix(8)).sock").path
        let socket = try await AdminSocket(path: path, bot: bot, logger: .init(label: "admin-test"))
        addTeardownBlock(releasing: socket) { await $0.close() }

        let tom = harness.server.client("Tom")
        let jerry = harness.server.client("Jerry")
        let logs = try await openClients([tom, jerry])
        let conversation = try await tom.createConversation(name: "茶水间", members: ["Jerry", "modbot"])
        _ = try await conversation.send(.text("大家好 👋"))
        let answer = try await logs[1].next("the bot's echo") { event -> String? in
            if case .message(let message) = event, message.from == "modbot" { return message.content.text }
            return nil
        }
        XCTAssertEqual(answer, "回声：大家好 👋")

        let table = try await runHookbot("plugins", "--socket", path)
        XCTAssertEqual(table.status, 0, table.output)
        let lines = table.output.split(separator: "\n").map(String.init)
        XCTAssertTrue(lines.first?.hasPrefix("PLUGIN") == true, table.output)
        let echo = try XCTUnwrap(lines.first { $0.hasPrefix("echo ") }, table.output)
        XCTAssertTrue(echo.contains("loaded") && echo.contains("on_receive") && echo.contains("0 in a row, 0 in all"), echo)
        let fragile = try XCTUnwrap(lines.first { $0.hasPrefix("fragile ") }, table.output)
        XCTAssertTrue(fragile.contains("1 in a row, 1 in all") && fragile.contains("不行 大家好 👋"), fragile)

        let json = try await runHookbot("plugins", "--json", "--socket", path)
        let listed = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [[String: Any]], json.output)
        XCTAssertEqual(Set(listed.compactMap { $0["name"] as? String }), ["echo", "fragile"])
        let echoHooks = listed.first { $0["name"] as? String == "echo" }?["hooks"] as? [[String: Any]]
        XCTAssertEqual(echoHooks?.first?["calls"] as? Int, 1, json.output)

        let stats = try await runHookbot("plugins", "--stats", "--socket", path)
        XCTAssertEqual(stats.status, 0, stats.output)
        XCTAssertTrue(stats.output.hasPrefix("COUNTER"), stats.output)
        XCTAssertNotNil(stats.output.split(separator: "\n").first { $0.hasPrefix("messages ") }, stats.output)

        let reload = try await runHookbot("reload", "--socket", path)
        XCTAssertEqual(reload.status, 0, reload.output)
        XCTAssertTrue(reload.output.contains("echo") && reload.output.contains("reloaded"), reload.output)

        let nobody = try await runHookbot("plugins", "--socket", path + ".missing")
        XCTAssertNotEqual(nobody.status, 0, nobody.output)
        XCTAssertTrue(nobody.output.contains("no bot is listening on \(path).missing"), nobody.output)
    }

    /// Runs the `hookbot` built beside this test bundle, off the test's task; its exit status and output.
    private func runHookbot(_ arguments: String...) async throws -> (status: Int32, output: String) {
        let binary = try builtHookbot()
        return try await Task.detached { try runProcess(binary, arguments) }.value
    }
}
