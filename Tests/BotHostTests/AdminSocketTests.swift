import BotHost
import Foundation
import XCTest

/// `hookbot reload`, `hookbot plugins` and `hookbot plugins --stats` reach a running bot through its admin
/// socket: one line in, one JSON document out.
final class AdminSocketTests: XCTestCase {
    func testStatsPluginsAndReloadOverTheSocket() async throws {
        let harness = try await BotHarness.start(attachment: .inProcess)
        try harness.write("echo.lua", "return { name = 'echo', on_receive = function(msg, ctx) ctx.reply(msg.text) end }")
        let bot = try await harness.bot()
        let path = harness.server.directory.appendingPathComponent("admin-\(UUID().uuidString.prefix(8)).sock").path
        let socket = try await AdminSocket(path: path, bot: bot, logger: .init(label: "admin-test"))

        let plugins = try await Task.detached { try AdminSocket.request("plugins", path: path) }.value
        let listed = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(plugins.utf8)) as? [[String: Any]], plugins)
        XCTAssertEqual(listed.map { $0["name"] as? String }, ["echo"])
        let stats = try await Task.detached { try AdminSocket.request("stats", path: path) }.value
        XCTAssertNotNil((try JSONSerialization.jsonObject(with: Data(stats.utf8)) as? [String: Any])?["messages"], stats)
        let reload = try await Task.detached { try AdminSocket.request("reload", path: path) }.value
        XCTAssertTrue(reload.contains("\"reloaded\""), reload)
        let unknown = try await Task.detached { try AdminSocket.request("nonsense", path: path) }.value
        XCTAssertTrue(unknown.contains("unknown request"), unknown)

        await socket.close()
        XCTAssertFalse(FileManager.default.fileExists(atPath: path))
        XCTAssertThrowsError(try AdminSocket.request("stats", path: path))
        await bot.stop()
        await harness.server.stop()
    }
}
