import BotHost
import BotHub
import Foundation
import XCTest

/// Settings no plugin takes, and sections for which there is no plugin, stop the bot from starting and are
/// what `hookbot check` reports, with file, line and key.
final class ConfigCheckTests: XCTestCase {
    private func configuration(_ toml: String, plugins: [String: String]) throws -> (BotConfiguration, URL) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-check-\(UUID().uuidString)")
        let pluginsDirectory = directory.appendingPathComponent("plugins")
        try FileManager.default.createDirectory(at: pluginsDirectory, withIntermediateDirectories: true)
        for (name, source) in plugins {
            try source.write(to: pluginsDirectory.appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
        var configuration = try BotConfiguration.parse(toml, relativeTo: directory, fileName: "hookbot.toml")
        configuration.statePath = directory.appendingPathComponent("state.sqlite").path
        configuration.server.database = directory.appendingPathComponent("hub.sqlite").path
        configuration.server.port = 0
        configuration.adminSocketPath = nil
        configuration.plugins.watchInterval = 0
        return (configuration, directory)
    }

    private static let greeter = """
        return { name = "greeter", config = { greeting = "hi" },
          on_receive = function(msg, ctx) ctx.reply(ctx.config.greeting) end }
        """

    private static let toml = """
        [plugins]
        directory = "plugins"

        [plugins.greeter]
        greting = "hello"

        [plugins.greeter2]
        greeting = "hey"
        """

    func testTheBotDoesNotStartWithSettingsNoPluginTakes() async throws {
        let (configuration, directory) = try configuration(Self.toml, plugins: ["greeter.lua": Self.greeter])
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let hub = try await EmbeddedHub.start(configuration: configuration)
            await hub.stop()
            XCTFail("the bot started with a typo in its configuration")
        } catch let problems as ConfigurationProblems {
            XCTAssertEqual(
                problems.errors.map(\.description),
                [
                    "hookbot.toml:5: plugins.greeter.greting: unknown setting (known: greeting)",
                    "hookbot.toml:7: plugins.greeter2: no plugin named greeter2 in \(directory.appendingPathComponent("plugins").path) (plugins: greeter)",
                ])
        }
    }

    func testCheckReportsConfigurationAndPluginProblems() throws {
        let (configuration, directory) = try configuration(
            Self.toml,
            plugins: [
                "greeter.lua": Self.greeter, "broken.lua": "return { name = \"broken\", on_receive = function( }",
            ])
        defer { try? FileManager.default.removeItem(at: directory) }
        let (plugins, problems) = try configuration.check()
        XCTAssertEqual(Set(plugins.map(\.name)), ["broken", "greeter"])
        XCTAssertEqual(problems.count, 3, "\(problems)")
        XCTAssertTrue(problems.contains("hookbot.toml:5: plugins.greeter.greting: unknown setting (known: greeting)"))
        XCTAssertTrue(problems.contains { $0.hasPrefix("hookbot.toml:7: plugins.greeter2: no plugin named greeter2") })
        XCTAssertTrue(problems.contains { $0.contains("broken") && $0.contains("compile error") }, "\(problems)")

        let (fixed, fixedDirectory) = try self.configuration(
            "[plugins.greeter]\ngreeting = \"hello\"\n[plugins]\ndirectory = \"plugins\"",
            plugins: ["greeter.lua": Self.greeter])
        defer { try? FileManager.default.removeItem(at: fixedDirectory) }
        XCTAssertEqual(try fixed.check().problems, [])
    }
}
