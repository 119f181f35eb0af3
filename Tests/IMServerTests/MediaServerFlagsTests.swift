import Foundation
import HookbotTestSupport
import IMCore
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `hookbot server`'s media flags, on the real executable: the settings reach the server, bad values end in
/// exit status 64 with the flag's name.
final class MediaServerFlagsTests: XCTestCase {
    func testTheMediaFlagsReachTheServerAndBadValuesAreRefused() async throws {
        let binary = try XCTUnwrap(ServerProcess.binaryURL(), "the hookbot executable beside the tests")
        let directory = try makeTemporaryDirectory("hookbot-media-flags")
        let server = try await ServerProcess.launch(
            binary: binary,
            store: [
                "--db", directory.appendingPathComponent("flags.sqlite").path, "--master-key", "flag-key", "--public-url",
                "https://Chat.Example.com/im/", "--signed-urls", "--url-ttl", "120", "--max-upload-bytes", "1KiB", "--thumbnail-cache", "0",
            ])
        defer { server.kill() }
        let png = TestPNG.make(width: 6, height: 4)
        let stored = try await MediaRouteTests.call(
            server.port, "POST", "/media?name=a.png", headers: ["X-LC-Key": "flag-key,master"], body: png)
        XCTAssertEqual(stored.status, 201, String(decoding: stored.body, as: UTF8.self))
        // Absolute on the (normalised) public URL, signed, expiring in about 120 s.
        let url = try XCTUnwrap(URLComponents(string: try XCTUnwrap(stored.json["url"] as? String)))
        XCTAssertEqual(url.scheme, "https")
        XCTAssertEqual(url.host, "chat.example.com")
        let parts = url.path.split(separator: "/").map(String.init)
        XCTAssertEqual(parts.count, 5, url.path)
        XCTAssertEqual(parts[0], "im")
        let expires = try XCTUnwrap(Double(parts[3].split(separator: "-")[0]))
        XCTAssertEqual(expires, Date().timeIntervalSince1970 + 120, accuracy: 5)
        // The server's own path of it downloads; the unsigned one is refused.
        let path = "/" + parts.dropFirst().joined(separator: "/")
        let download = try await MediaRouteTests.call(server.port, "GET", path)
        XCTAssertEqual(download.body, png)
        let unsigned = try await MediaRouteTests.call(server.port, "GET", "/media/\(parts[2])/a.png")
        XCTAssertEqual(unsigned.status, 403)
        // --max-upload-bytes 1KiB: 1025 bytes are too many.
        let large = try await MediaRouteTests.call(
            server.port, "POST", "/media?name=b.bin", headers: ["X-LC-Key": "flag-key,master"], body: Data(count: 1025))
        XCTAssertEqual(large.json["code"] as? Int, 4601)
        // --thumbnail-cache 0: nothing kept.
        let thumbnail = try await MediaRouteTests.call(server.port, "GET", path + "?imageView/2/w/3")
        XCTAssertEqual(thumbnail.status, 200)
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.appendingPathComponent("media/thumbs").path))

        for (flags, message) in [
            (["--public-url", "ftp://files.example.com"], "--public-url must be an http:// or https:// URL"),
            (["--media-quota", "10 XB"], "--media-quota must be a size"),
            (["--thumbnail-jobs", "0"], "--thumbnail-jobs must be between 1 and 256"),
            (["--max-upload-bytes", "0"], "--max-upload-bytes must be a positive size"),
        ] {
            let (status, text) = try runProcess(
                binary, ["server", "--port", "0", "--db", directory.appendingPathComponent("bad.sqlite").path] + flags)
            XCTAssertEqual(status, 64, text)
            XCTAssertTrue(text.contains(message), text)
        }
    }
}
