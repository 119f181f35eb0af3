import BotHost
import BotHub
import Foundation
import XCTest

@testable import IMServer

/// `[server] synchronous = "full" | "normal"`: read and checked in hookbot.toml, and down to the SQLite
/// connection that commits the embedded server's messages.
final class ServerSynchronousTests: XCTestCase {
    func testTheSettingIsReadAndChecked() throws {
        XCTAssertTrue(try BotConfiguration.parse("[server]\nport = 1").server.synchronousFull)
        XCTAssertTrue(try BotConfiguration.parse("[server]\nsynchronous = \"full\"").server.synchronousFull)
        XCTAssertFalse(try BotConfiguration.parse("[server]\nsynchronous = \"normal\"").server.synchronousFull)
        XCTAssertFalse(try BotConfiguration.parse("[server]\nsynchronous = \"NORMAL\"").server.synchronousFull)
        XCTAssertThrowsError(try BotConfiguration.parse("[server]\nsynchronous = \"off\"")) { error in
            XCTAssertEqual("\(error)", "hookbot.toml:2: server.synchronous: must be \"full\" or \"normal\"")
        }
        XCTAssertThrowsError(try BotConfiguration.parse("[server]\nsynchronous = 1")) { error in
            XCTAssertTrue("\(error)".contains("server.synchronous"), "\(error)")
        }
    }

    func testTheEmbeddedServerCommitsWithTheConfiguredLevel() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-sync-\(UUID().uuidString)")
        let plugins = directory.appendingPathComponent("plugins")
        try FileManager.default.createDirectory(at: plugins, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        for (level, expected) in [("normal", 1), ("full", 2)] {
            var configuration = try BotConfiguration.parse("[server]\nport = 0\nsynchronous = \"\(level)\"", relativeTo: directory)
            configuration.plugins.directory = plugins
            configuration.statePath = directory.appendingPathComponent("state-\(level).sqlite").path
            configuration.server.database = directory.appendingPathComponent("hub-\(level).sqlite").path
            configuration.adminSocketPath = nil
            let hub = try await EmbeddedHub.start(configuration: configuration)
            let store = try XCTUnwrap(hub.server.service.store as? SQLiteStore)
            let read = try await store.synchronousLevel()
            await hub.stop()
            XCTAssertEqual(read, expected, "synchronous = \"\(level)\"")
        }
    }
}
