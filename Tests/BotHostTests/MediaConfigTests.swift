import BotHost
import BotHub
import Foundation
import HookbotConfig
import HookbotTestSupport
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
        XCTAssertEqual(set.server.mediaDirectory, "/etc/hookbot/files")
        XCTAssertEqual(set.server.maxUploadMB, 8)
        let unset = try BotConfiguration.parse("[server]\nport = 1", relativeTo: base)
        XCTAssertNil(unset.server.mediaDirectory)
        XCTAssertEqual(unset.server.maxUploadMB, 100)
        XCTAssertThrowsError(try BotConfiguration.parse("[server]\nmax_upload_mb = 0")) { error in
            XCTAssertEqual("\(error)", "hookbot.toml:2: server.max_upload_mb: must be at least 1")
        }
    }

    func testEveryMediaLimitIsASettingCheckedWithFileLineAndKey() throws {
        let text = """
            [server]
            media_quota = "2 GiB"
            thumbnail_max_pixels = 1000000
            thumbnail_jobs = 3
            thumbnail_queue = 0
            thumbnail_timeout_ms = 2500
            thumbnail_cache = "64MiB"
            public_url = "HTTPS://Chat.Example.com/im/"
            signed_urls = true
            url_ttl = 600
            """
        let settings = try BotConfiguration.parse(text).server.media
        XCTAssertEqual(settings.quotaBytes, 2 << 30)
        XCTAssertEqual(settings.thumbnailMaxPixels, 1_000_000)
        XCTAssertEqual(settings.thumbnailJobs, 3)
        XCTAssertEqual(settings.thumbnailQueue, 0)
        XCTAssertEqual(settings.thumbnailTimeoutMillis, 2500)
        XCTAssertEqual(settings.thumbnailCacheBytes, 64 << 20)
        XCTAssertEqual(settings.publicURL, "https://chat.example.com/im")
        XCTAssertTrue(settings.signedURLs)
        XCTAssertEqual(settings.urlTTL, 600)
        // Sizes: integers are bytes; decimal and binary units; 0 or "none" is no quota.
        XCTAssertEqual(try BotConfiguration.parse("[server]\nmedia_quota = 5000").server.media.quotaBytes, 5000)
        XCTAssertEqual(try BotConfiguration.parse("[server]\nmedia_quota = \"100 MB\"").server.media.quotaBytes, 100_000_000)
        XCTAssertNil(try BotConfiguration.parse("[server]\nmedia_quota = 0").server.media.quotaBytes)
        XCTAssertNil(try BotConfiguration.parse("[server]\nmedia_quota = \"none\"").server.media.quotaBytes)
        XCTAssertEqual(try BotConfiguration.parse("[server]\nthumbnail_cache = 0").server.media.thumbnailCacheBytes, 0)
        let refused: [(String, String)] = [
            (
                "media_quota = \"100 MBs\"",
                "server.media_quota: must be a size: bytes (an integer) or a string such as \"100 MiB\" or \"2 GB\", or \"none\""
            ),
            ("media_quota = -1", "server.media_quota: must be 0 or more"),
            (
                "thumbnail_cache = \"none\"",
                "server.thumbnail_cache: must be a size: bytes (an integer) or a string such as \"100 MiB\" or \"2 GB\""
            ),
            ("thumbnail_jobs = 0", "server.thumbnail_jobs: must be between 1 and 256"),
            ("thumbnail_queue = -1", "server.thumbnail_queue: must be 0 or more"),
            ("thumbnail_max_pixels = 0", "server.thumbnail_max_pixels: must be at least 1"),
            ("thumbnail_timeout_ms = 0", "server.thumbnail_timeout_ms: must be at least 1"),
            (
                "public_url = \"ftp://files.example.com\"",
                "server.public_url: must be an http:// or https:// URL (e.g. https://chat.example.com)"
            ),
            ("public_url = \"https://chat.example.com/?a=1\"", "server.public_url: may not carry credentials, a query or a fragment"),
            ("signed_urls = \"yes\"", "server.signed_urls: must be true or false"),
            ("url_ttl = 0", "server.url_ttl: must be at least 1 (seconds)"),
        ]
        for (line, message) in refused {
            XCTAssertThrowsError(try BotConfiguration.parse("[server]\nport = 1\n\(line)"), line) { error in
                XCTAssertEqual("\(error)", "hookbot.toml:3: \(message)")
            }
        }
    }

    /// BotHost repeats the server's defaults (it does not link the server): they must agree.
    func testRetentionAndContentPlaceAreSettings() throws {
        let settings = try BotConfiguration.parse("[server]\nmedia_grace = \"30m\"\nmedia_gc_interval = 0\nmedia_in_directory = true")
            .server.media
        XCTAssertEqual(settings.retentionGrace, .seconds(1800))
        XCTAssertEqual(settings.retentionInterval, .zero)
        XCTAssertTrue(settings.contentInDirectory)
        XCTAssertEqual(try BotConfiguration.parse("[server]\nmedia_grace = 90").server.media.retentionGrace, .seconds(90))
        XCTAssertThrowsError(try BotConfiguration.parse("[server]\nmedia_grace = \"1w\"")) { error in
            XCTAssertEqual(
                "\(error)", "hookbot.toml:2: server.media_grace: must be seconds (0 or more) or a string such as \"30m\", \"24h\" or \"7d\""
            )
        }
        var configuration = MediaConfiguration()
        configuration.apply(settings)
        XCTAssertEqual(configuration.retentionGrace, .seconds(1800))
        XCTAssertTrue(configuration.contentInDirectory)
    }

    func testDurationsAsSettingsTakeThem() {
        XCTAssertEqual(SettingValues.duration("24h"), .seconds(86_400))
        XCTAssertEqual(SettingValues.duration("90"), .seconds(90))
        XCTAssertEqual(SettingValues.duration(" 1.5m "), .seconds(90))
        XCTAssertEqual(SettingValues.duration("7d"), .seconds(7 * 86_400))
        XCTAssertEqual(SettingValues.duration("0"), .zero)
        for bad in ["", "h", "-1h", "soon", "1w", "1e20d", "nan"] { XCTAssertNil(SettingValues.duration(bad), bad) }
    }

    func testTheBotHostsDefaultsAreTheServers() {
        var applied = MediaConfiguration()
        applied.quotaBytes = 1
        applied.thumbnails.maxSourcePixels = 1
        applied.thumbnails.maxConcurrentJobs = 9
        applied.thumbnails.maxQueuedJobs = 9
        applied.thumbnails.timeLimit = .seconds(1)
        applied.thumbnailCacheBytes = 1
        applied.publicURL = "https://x.example"
        applied.signedURLs = true
        applied.urlTTL = 1
        applied.retentionGrace = .seconds(1)
        applied.retentionInterval = .zero
        applied.contentInDirectory = true
        applied.apply(ServerMediaSettings())
        XCTAssertEqual(applied, MediaConfiguration())
    }

    func testTheEmbeddedServerGetsThem() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-media-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("plugins"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = try BotConfiguration.parse(
            "[server]\nport = 0\nmedia = \"uploads\"\nmax_upload_mb = 3\nmedia_quota = \"5 MiB\"\nthumbnail_jobs = 1\n"
                + "public_url = \"https://hub.example.org\"\nthumbnail_cache = 1000",
            relativeTo: directory)
        configuration.plugins.directory = directory.appendingPathComponent("plugins")
        configuration.statePath = directory.appendingPathComponent("state.sqlite").path
        configuration.server.database = directory.appendingPathComponent("hub.sqlite").path
        configuration.adminSocketPath = nil
        configuration.appID = "media-app"
        configuration.masterKey = "media-key"
        let hub = try await EmbeddedHub.start(configuration: configuration)
        addTeardownBlock(releasing: hub) { await $0.stop() }
        XCTAssertEqual(hub.server.configuration.media.directory, directory.appendingPathComponent("uploads").path)
        XCTAssertEqual(hub.server.configuration.media.maxUploadBytes, 3 << 20)
        XCTAssertEqual(hub.server.configuration.media.quotaBytes, 5 << 20)
        XCTAssertEqual(hub.server.configuration.media.thumbnails.maxConcurrentJobs, 1)
        XCTAssertEqual(hub.server.configuration.media.thumbnailCacheBytes, 1000)
        XCTAssertEqual(hub.server.configuration.media.publicURL, "https://hub.example.org")
        // The operator's upload lands in that directory.
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(hub.port)/media?name=a.gif")!)
        request.httpMethod = "POST"
        request.setValue("media-key,master", forHTTPHeaderField: "X-LC-Key")
        let (data, response) = try await URLSession.shared.upload(
            for: request, from: Data(Array("GIF89a".utf8) + [4, 0, 3, 0, 0, 0, 0, 0x3B]))
        XCTAssertEqual((response as? HTTPURLResponse)?.statusCode, 201, String(decoding: data, as: UTF8.self))
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        XCTAssertEqual([json["width"] as? Int, json["height"] as? Int], [4, 3])
        // Its URL starts with the public URL.
        XCTAssertEqual(json["url"] as? String, "https://hub.example.org/media/\(try XCTUnwrap(json["id"] as? String))/a.gif")
        let sha = try XCTUnwrap(json["sha256"] as? String)
        let stored = directory.appendingPathComponent("uploads/objects/\(sha.prefix(2))/\(sha)").path
        XCTAssertTrue(FileManager.default.fileExists(atPath: stored), stored)
    }
}
