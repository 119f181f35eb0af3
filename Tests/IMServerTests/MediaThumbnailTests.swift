import CVips
import Foundation
import HookbotTestSupport
import IMCore
import MediaImaging
import XCTest

@testable import IMServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `GET /media/<id>?imageView/…` on a real server: images libvips writes, uploaded with `POST /media`.
final class MediaThumbnailTests: XCTestCase {
    private func call(
        _ port: Int, _ method: String, _ path: String, headers: [String: String] = [:], body: Data? = nil
    ) async throws -> MediaRouteTests.Reply {
        try await MediaRouteTests.call(port, method, path, headers: headers, body: body)
    }

    private func upload(_ port: Int, token: String, name: String, _ bytes: Data) async throws -> String {
        let reply = try await call(port, "POST", "/media?name=\(name)", headers: ["X-LC-IM-Session-Token": token], body: bytes)
        XCTAssertEqual(reply.status, 201, String(decoding: reply.body, as: UTF8.self))
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: reply.body) as? [String: Any])
        return try XCTUnwrap(json["url"] as? String)
    }

    private func noise(_ directory: URL, _ name: String, _ width: Int, _ height: Int) throws -> Data {
        _ = try? Thumbnailer.header(path: "/dev/null") // starts libvips
        let path = directory.appendingPathComponent(name).path
        XCTAssertEqual(hb_vips_write_noise(path, Int32(width), Int32(height)), 0)
        return try Data(contentsOf: URL(fileURLWithPath: path))
    }

    private func json(_ body: Data) -> [String: Any] { (try? JSONSerialization.jsonObject(with: body) as? [String: Any]) ?? [:] }

    func testThumbnailURLsOfStoredImagesAsTheSDKsBuildThem() async throws {
        let server = try await startServer()
        let token = try await server.sessionToken("Tom")

        let url = try await upload(server.port, token: token, name: "photo.jpg", try noise(server.directory, "photo.jpg", 800, 600))
        // AV.File#thumbnailURL(100, 100): quality 100, mode 2, png.
        let png = try await call(server.port, "GET", url + "?imageView/2/w/100/h/100/q/100/format/png")
        XCTAssertEqual(png.status, 200, String(decoding: png.body, as: UTF8.self))
        XCTAssertEqual(png.headers["content-type"], "image/png")
        let pngPath = server.directory.appendingPathComponent("thumb.png").path
        try png.body.write(to: URL(fileURLWithPath: pngPath))
        let header = try Thumbnailer.header(path: pngPath)
        XCTAssertEqual([header.width, header.height], [100, 75])
        XCTAssertEqual(header.format, "png")
        let etag = try XCTUnwrap(png.headers["etag"])
        let again = try await call(
            server.port, "GET", url + "?imageView/2/w/100/h/100/q/100/format/png", headers: ["If-None-Match": etag])
        XCTAssertEqual(again.status, 304)
        // Crop to 64×64 in the source's format (JPEG): a different ETag.
        let crop = try await call(server.port, "GET", url + "?imageView/1/w/64/h/64")
        XCTAssertEqual(crop.status, 200)
        XCTAssertEqual(crop.headers["content-type"], "image/jpeg")
        XCTAssertEqual(Array(crop.body.prefix(3)), [0xFF, 0xD8, 0xFF])
        XCTAssertNotEqual(crop.headers["etag"], etag)
        // Without imageView the file itself.
        let original = try await call(server.port, "GET", url)
        XCTAssertEqual(original.headers["content-type"], "image/jpeg")
        XCTAssertGreaterThan(original.body.count, crop.body.count)

        // A malformed request, a file that is not an image, and a bomb: each a JSON error with its code.
        let bad = try await call(server.port, "GET", url + "?imageView/2/w/0")
        XCTAssertEqual(bad.status, 400)
        XCTAssertEqual(json(bad.body)["code"] as? Int, 4621)
        let text = try await upload(server.port, token: token, name: "notes.txt", Data("just text, not pixels".utf8))
        let notImage = try await call(server.port, "GET", text + "?imageView/2/w/50")
        XCTAssertEqual(notImage.status, 415)
        XCTAssertEqual(json(notImage.body)["code"] as? Int, 4622)
        let bomb = try await upload(
            server.port, token: token, name: "bomb.png", Data(MediaThumbnailTests.png(width: 50_000, height: 50_000)))
        let refused = try await call(server.port, "GET", bomb + "?imageView/2/w/50/h/50")
        XCTAssertEqual(refused.status, 422)
        XCTAssertEqual(json(refused.body)["code"] as? Int, 4623)
        XCTAssertEqual(json(refused.body)["reason"] as? String, "sourceTooLarge")
        // The server is still serving.
        let after = try await call(server.port, "GET", url + "?imageView/2/w/10")
        XCTAssertEqual(after.status, 200)
    }

    func testASecondRequestIsServedFromTheCacheWithoutAJobAlsoAfterARestart() async throws {
        let server = try await ServerHarness.start()
        let token = try await server.sessionToken("Tom")
        let url = try await upload(server.port, token: token, name: "photo.jpg", try noise(server.directory, "photo.jpg", 400, 300))
        let thumb = url + "?imageView/2/w/80/h/80/q/90/format/jpg"
        let thumbnails = server.server.service.mediaThumbnails
        let first = try await call(server.port, "GET", thumb)
        XCTAssertEqual(first.status, 200)
        XCTAssertEqual(first.headers["x-hookbot-thumbnail"], "miss")
        XCTAssertEqual(thumbnails.jobsStarted, 1)
        let second = try await call(server.port, "GET", thumb)
        XCTAssertEqual(second.status, 200)
        XCTAssertEqual(second.headers["x-hookbot-thumbnail"], "hit")
        XCTAssertEqual(second.headers["content-type"], "image/jpeg")
        XCTAssertEqual(second.body, first.body)
        XCTAssertEqual(thumbnails.jobsStarted, 1, "the second request ran no job")
        // The same request spelled qiniu's way is the same thumbnail.
        let spelled = try await call(server.port, "GET", url + "?imageView2/2/h/80/w/80/format/jpeg/q/90")
        XCTAssertEqual(spelled.headers["x-hookbot-thumbnail"], "hit")
        XCTAssertEqual(thumbnails.jobsStarted, 1)
        // Kept under the media directory's thumbs/, whole (no temporary file left).
        let thumbs = server.directory.appendingPathComponent("media/thumbs")
        let kept = try FileManager.default.subpathsOfDirectory(atPath: thumbs.path).filter { $0.hasSuffix(".jpeg") }
        XCTAssertEqual(kept.count, 1, "\(kept)")
        XCTAssertEqual(try Data(contentsOf: thumbs.appendingPathComponent(kept[0])), first.body)

        // After a restart the cache is still there: no job.
        let restarted = try await server.restarted()
        addTeardownBlock(releasing: restarted) { await $0.stop() }
        let third = try await call(restarted.port, "GET", thumb)
        XCTAssertEqual(third.headers["x-hookbot-thumbnail"], "hit")
        XCTAssertEqual(third.body, first.body)
        XCTAssertEqual(restarted.server.service.mediaThumbnails.jobsStarted, 0)
        // The cache directory removed while the server runs: made again, served as before.
        try FileManager.default.removeItem(at: thumbs)
        let fourth = try await call(restarted.port, "GET", thumb)
        XCTAssertEqual(fourth.status, 200)
        XCTAssertEqual(fourth.headers["x-hookbot-thumbnail"], "miss")
        XCTAssertEqual(restarted.server.service.mediaThumbnails.jobsStarted, 1)
        let fifth = try await call(restarted.port, "GET", thumb)
        XCTAssertEqual(fifth.headers["x-hookbot-thumbnail"], "hit")
    }

    /// A new image in a large group: every member asks for the same thumbnail at once. One job makes it (one slot,
    /// even with no queue), the others wait for it or read it from the cache.
    func testABurstOfTheSameThumbnailRunsOneJob() async throws {
        let server = try await startServer { configuration in
            configuration.media.thumbnails.maxConcurrentJobs = 1
            configuration.media.thumbnails.maxQueuedJobs = 0
        }
        let token = try await server.sessionToken("Tom")
        let url = try await upload(server.port, token: token, name: "big.jpg", try noise(server.directory, "big.jpg", 2000, 1500))
        let port = server.port
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<16 {
                group.addTask {
                    let request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(url)?imageView/2/w/64/h/64")!)
                    let (_, response) = try await URLSession.shared.data(for: request)
                    return (response as? HTTPURLResponse)?.statusCode ?? 0
                }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        XCTAssertEqual(statuses, Array(repeating: 200, count: 16))
        XCTAssertEqual(server.server.service.mediaThumbnails.jobsStarted, 1)
    }

    func testTheCacheKeepsItsByteCapEvictingTheLeastRecentlyUsed() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-thumbs-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = ThumbnailCache(directory: directory.path, capacity: 1000)
        let sha = String(repeating: "ab", count: 32)
        let keys = ["a", "b", "c"].map { ThumbnailCache.Key(sha256: sha, request: "2-w\($0)-h-q75-png") }
        let bytes = keys.indices.map { [UInt8](repeating: UInt8($0 + 1), count: 400) }
        await cache.put(keys[0], bytes: bytes[0], format: .png)
        try await Task.sleep(for: .milliseconds(20))
        await cache.put(keys[1], bytes: bytes[1], format: .png)
        try await Task.sleep(for: .milliseconds(20))
        // a is used again, so b is now the least recently used.
        let hit = await cache.get(keys[0])
        XCTAssertEqual(hit?.bytes, bytes[0])
        try await Task.sleep(for: .milliseconds(20))
        await cache.put(keys[2], bytes: bytes[2], format: .png)
        XCTAssertEqual(cache.totalBytes, 800)
        let missing = await cache.get(keys[1])
        XCTAssertNil(missing)
        let onDisk = try FileManager.default.subpathsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".png") }
        XCTAssertEqual(onDisk.count, 2, "\(onDisk)")
        // A thumbnail larger than the whole cache is not kept.
        await cache.put(ThumbnailCache.Key(sha256: sha, request: "big"), bytes: [UInt8](repeating: 9, count: 1001), format: .png)
        XCTAssertEqual(cache.totalBytes, 800)
        // A new cache on the same directory (a restart) finds what was kept.
        let reopened = ThumbnailCache(directory: directory.path, capacity: 1000)
        let a = await reopened.get(keys[0])
        let b = await reopened.get(keys[1])
        let c = await reopened.get(keys[2])
        XCTAssertEqual(a?.bytes, bytes[0])
        XCTAssertNil(b)
        XCTAssertEqual(c?.bytes, bytes[2])
        XCTAssertEqual(c?.format, .png)
        XCTAssertEqual(reopened.totalBytes, 800)
        // Capacity 0 keeps nothing.
        let off = ThumbnailCache(directory: directory.appendingPathComponent("off").path, capacity: 0)
        await off.put(keys[0], bytes: bytes[0], format: .png)
        let none = await off.get(keys[0])
        XCTAssertNil(none)
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.appendingPathComponent("off").path))
    }

    /// A PNG whose IHDR declares `width`×`height`, with one tiny IDAT.
    static func png(width: UInt32, height: UInt32) -> [UInt8] {
        PNGFile.file(width: width, height: height, colorType: 2, idat: [0x78, 0x9C, 0x63, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01])
    }
}
