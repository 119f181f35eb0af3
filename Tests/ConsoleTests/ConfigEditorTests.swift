import BotHost
import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `GET`/`PUT /api/plugins/{name}/config` with the shipped moderation plugin on a real embedded server:
/// the form's data, stale versions, refused settings naming their field, a change that takes effect on
/// the next message, and the overrides file read again at the next start (and by `hookbot check`).
final class ConfigEditorTests: XCTestCase {
    /// A hookbot.toml of its own in a temporary folder (so the overrides file lands there), with the
    /// repository's plugins.
    static func configFile() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let file = folder.appendingPathComponent("hookbot.toml")
        try """
        # the moderators' settings
        [plugins]
        directory = "\(ConsoleHarness.repository.appendingPathComponent("plugins").path)"

        [plugins.moderation]
        words = ["scam"]        # banned words
        moderators = ["alice"]
        """.write(to: file, atomically: true, encoding: .utf8)
        return file
    }

    func config(_ harness: ConsoleHarness) async throws -> [String: Any] {
        let answer = try await harness.admin("GET", "/api/plugins/moderation/config")
        XCTAssertEqual(answer.status, 200, answer.text)
        return try answer.object()
    }

    func field(_ view: [String: Any], _ key: String) -> [String: Any]? {
        (view["fields"] as? [[String: Any]])?.first { $0["key"] as? String == key }
    }

    func put(_ harness: ConsoleHarness, _ body: [String: Any]) async throws -> HTTPAnswer {
        try await harness.admin("PUT", "/api/plugins/moderation/config", body: JSONSerialization.data(withJSONObject: body))
    }

    func testEditValidateApplyAndSurviveARestart() async throws {
        let file = try Self.configFile()
        defer { try? FileManager.default.removeItem(at: file.deletingLastPathComponent()) }
        let overrides = file.deletingLastPathComponent().appendingPathComponent("hookbot.overrides.toml")
        var harness = try await ConsoleHarness.start(plugins: [:], base: try BotConfiguration.load(path: file.path))
        do {
            let view = try await config(harness)
            XCTAssertEqual(view["persisted"] as? Bool, true)
            XCTAssertEqual(view["overridesFile"] as? String, overrides.path)
            let words = try XCTUnwrap(field(view, "words"))
            XCTAssertEqual(words["value"] as? [String], ["scam"])
            XCTAssertEqual(words["source"] as? String, "file")
            XCTAssertEqual(field(view, "max_links")?["source"] as? String, "default")
            XCTAssertEqual(field(view, "max_links")?["default"] as? Int, 3)
            XCTAssertNotNil(field(view, "rules")?["default"] as? [Any])
            let version = try XCTUnwrap(view["version"] as? String)

            // Refused: the field is named, with the numeric code; nothing is written or applied.
            let wrongType = try await put(harness, ["version": version, "settings": ["max_links": "many"]])
            XCTAssertEqual(wrongType.status, 400, wrongType.text)
            let refusal = try wrongType.object()
            XCTAssertEqual(refusal["code"] as? Int, 400)
            XCTAssertEqual((refusal["errors"] as? [[String: Any]])?.first?["key"] as? String, "max_links")
            let badRule = try await put(harness, ["version": version, "settings": ["rules": [["name": "links", "actions": ["block"]]]]])
            XCTAssertEqual(badRule.status, 400, badRule.text)
            XCTAssertEqual((try badRule.object()["errors"] as? [[String: Any]])?.first?["key"] as? String, "rules", badRule.text)
            let unknown = try await put(harness, ["version": version, "settings": ["max_linkz": 2]])
            XCTAssertEqual(unknown.status, 400)
            XCTAssertEqual((try unknown.object()["errors"] as? [[String: Any]])?.first?["key"] as? String, "max_linkz")
            XCTAssertFalse(FileManager.default.fileExists(atPath: overrides.path))
            let value1 = try await harness.http("PUT", "/api/plugins/moderation/config", body: Data("{}".utf8)).status
            XCTAssertEqual(value1, 401)

            // Applied: a Chinese word joins the list; the next message with it is refused.
            let (tom, lobby, _) = try await harness.lobbyMember("Tom")
            _ = try await lobby.send(.text("有人卖菠菜吗? 🥬"))
            let saved = try await put(harness, ["version": version, "settings": ["words": ["scam", "菠菜"], "max_links": 3]])
            XCTAssertEqual(saved.status, 200, saved.text)
            let answer = try saved.object()
            XCTAssertEqual((answer["reload"] as? [String: Any])?["reloaded"] as? [String], ["moderation"])
            let fresh = try XCTUnwrap(answer["config"] as? [String: Any])
            XCTAssertEqual(field(fresh, "words")?["source"] as? String, "override")
            // max_links equals the default: no override is kept for it.
            XCTAssertEqual(field(fresh, "max_links")?["source"] as? String, "default")
            XCTAssertNotEqual(fresh["version"] as? String, version)
            try await lobby.sendRefused("有人卖菠菜吗? 🥬")
            let written = try String(contentsOf: overrides, encoding: .utf8)
            XCTAssertTrue(written.contains("菠菜"), written)
            XCTAssertFalse(written.contains("max_links"), written)
            XCTAssertTrue(try String(contentsOf: file, encoding: .utf8).contains("# banned words"), "hookbot.toml was rewritten")

            // The form of before is stale now, named in the body or in If-Match (the GET's ETag).
            let stale = try await put(harness, ["version": version, "settings": ["words": ["scam"]]])
            XCTAssertEqual(stale.status, 409, stale.text)
            XCTAssertEqual(try stale.object()["code"] as? Int, 409)
            var request = URLRequest(url: URL(string: harness.base + "/api/plugins/moderation/config")!)
            request.setValue("Bearer \(harness.console.token)", forHTTPHeaderField: "Authorization")
            let (_, got) = try await URLSession.shared.data(for: request)
            XCTAssertEqual((got as? HTTPURLResponse)?.value(forHTTPHeaderField: "ETag"), "\"\(fresh["version"] as? String ?? "")\"")
            request.httpMethod = "PUT"
            request.setValue("\"\(version)\"", forHTTPHeaderField: "If-Match")
            request.httpBody = Data(#"{"settings": {"words": ["scam"]}}"#.utf8)
            let (_, matched) = try await URLSession.shared.data(for: request)
            XCTAssertEqual((matched as? HTTPURLResponse)?.statusCode, 409)
            await tom.close()
        } catch {
            await harness.stop()
            throw error
        }
        await harness.stop()

        // The next start reads the overrides on top of hookbot.toml; `hookbot check` checks them.
        let again = try BotConfiguration.load(path: file.path)
        XCTAssertEqual(again.plugins.config["moderation"]?.objectValue?["words"], .array([.string("scam"), .string("菠菜")]))
        XCTAssertEqual(try again.check().problems, [])
        harness = try await ConsoleHarness.start(plugins: [:], base: again)
        do {
            let view = try await config(harness)
            XCTAssertEqual(field(view, "words")?["source"] as? String, "override")
            let (jerry, lobby, _) = try await harness.lobbyMember("Jerry")
            try await lobby.sendRefused("菠菜 cheap!")
            // Reset: the override goes, hookbot.toml's value is back.
            let reset = try await put(harness, ["version": view["version"] as? String ?? "", "reset": ["words"]])
            XCTAssertEqual(reset.status, 200, reset.text)
            _ = try await lobby.send(.text("菠菜 is spinach 🥬"))
            XCTAssertFalse(try String(contentsOf: overrides, encoding: .utf8).contains("菠菜"))
            await jerry.close()
        } catch {
            await harness.stop()
            throw error
        }
        await harness.stop()

        // A broken overrides file is a problem `hookbot check` locates in that file.
        try "[plugins.moderation]\nmax_links = \"many\"\n".write(to: overrides, atomically: true, encoding: .utf8)
        let broken = try BotConfiguration.load(path: file.path).check().problems
        XCTAssertEqual(broken.count, 1, "\(broken)")
        XCTAssertTrue(broken.first?.hasPrefix("\(overrides.path):2:") == true, "\(broken)")
        try "[server]\nport = 1\n".write(to: overrides, atomically: true, encoding: .utf8)
        XCTAssertThrowsError(try BotConfiguration.load(path: file.path)) { error in
            XCTAssertTrue("\(error)".contains("only [plugins.<name>] tables"), "\(error)")
        }
    }

    /// What the console writes is read back the same (lists of tables, nested tables, Unicode, numbers).
    func testOverridesFileRoundTrip() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-overrides-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("o.toml").path
        let rules: JSONValue = .array([
            .object([
                "name": .string("spinach"), "trigger": .object(["keywords": .array([.string("菠菜"), .string("🥬*")])]),
                "actions": .array([.string("block")]), "message": .string("no \"spinach\"\nplease"),
            ])
        ])
        let written = ConfigOverrides(
            path: path,
            plugins: ["moderation": ["rules": rules, "max_links": .int(2), "ratio": .double(0.75), "flood": .bool(false)]])
        try written.write()
        let read = try ConfigOverrides.read(path: path)
        XCTAssertEqual(read.plugins, written.plugins)
        XCTAssertThrowsError(try ConfigOverrides(path: path, plugins: ["x": ["k": .null]]).write())
    }
}
