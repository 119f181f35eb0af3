import BotHost
import BotHub
import Foundation
import IMServer
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `[server] media` and `max_upload_mb` in hookbot.toml, down to the embedded server's configuration.
final class MediaConfigTests: XCTestCase {
    func testMediaDirectoryAndUploadLimitAreReadAndChecked() throws {
        let base = URL(fileURLWithPath: "/etc/hookbot")
        let set = try BotConfiguration.parse("[server]\nmedia = \"files\"\nmax_upload_mb = 8", relativeTo: base)
        XCTAssertEqual(set.serverMedia, "/etc/hookbot/files")
        XCTAssertEqual(set.serverMaxUploadMB, 8)
        let unset = try BotConfiguration.parse("[server]\nport = 1", relativeTo: base)
        XCTAssertNil(unset.serverMedia)
        XCTAssertEqual(unset.serverMaxUploadMB, 100)
        XCTAssertThrowsError(try BotConfiguration.parse("[server]\nmax_upload_mb = 0")) { error in
            XCTAssertEqual("\(error)", "hookbot.toml:2: server.max_upload_mb: must be at least 1")
        }
    }

    func testTheEmbeddedServerGetsThem() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-media-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("plugins"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = try BotConfiguration.parse(
            "[server]\nport = 0\nmedia = \"uploads\"\nmax_upload_mb = 3", relativeTo: directory)
        configuration.pluginsDirectory = directory.appendingPathComponent("plugins")
        configuration.statePath = directory.appendingPathComponent("state.sqlite").path
        configuration.serverDatabase = directory.appendingPathComponent("hub.sqlite").path
        configuration.adminSocketPath = nil
        configuration.appID = "media-app"
        configuration.masterKey = "media-key"
        let hub = try await EmbeddedHub.start(configuration: configuration)
        defer { Task { await hub.stop() } }
        XCTAssertEqual(hub.server.configuration.media.directory, directory.appendingPathComponent("uploads").path)
        XCTAssertEqual(hub.server.configuration.media.maxUploadBytes, 3 << 20)
        // The operator's upload lands in that directory.
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(hub.port)/media?name=a.gif")!)
        request.httpMethod = "POST"
        request.setValue("media-key,master", forHTTPHeaderField: "X-LC-Key")
        let (data, response) = try await URLSession.shared.upload(
            for: request, from: Data(Array("GIF89a".utf8) + [4, 0, 3, 0, 0, 0, 0, 0x3B]))
        XCTAssertEqual((response as? HTTPURLResponse)?.statusCode, 201, String(decoding: data, as: UTF8.self))
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        XCTAssertEqual([json["width"] as? Int, json["height"] as? Int], [4, 3])
        let sha = try XCTUnwrap(json["sha256"] as? String)
        let stored = directory.appendingPathComponent("uploads/objects/\(sha.prefix(2))/\(sha)").path
        XCTAssertTrue(FileManager.default.fileExists(atPath: stored), stored)
    }
}
