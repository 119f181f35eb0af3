import Foundation
import HookbotTestSupport
import IMCore
import XCTest

@testable import IMServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Container headers laid out as the formats define them, for the sniffer.
enum MediaFixtures {
    static func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
    static func le32(_ v: UInt32) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24)] }
    static func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
    static func be16(_ v: UInt16) -> [UInt8] { [UInt8(v >> 8), UInt8(v & 0xFF)] }
    static func ascii(_ s: String) -> [UInt8] { Array(s.utf8) }

    static func png(width: UInt32, height: UInt32, padding: Int = 64) -> [UInt8] {
        [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + be32(13) + ascii("IHDR") + be32(width) + be32(height)
            + [8, 6, 0, 0, 0] + [0, 0, 0, 0] + [UInt8](repeating: 7, count: padding)
    }

    static func gif(width: UInt16, height: UInt16) -> [UInt8] { ascii("GIF89a") + le16(width) + le16(height) + [0, 0, 0, 0x3B] }

    /// SOI, an APP0 (JFIF) segment, a DQT, then SOF2 (progressive).
    static func jpeg(width: UInt16, height: UInt16) -> [UInt8] {
        let app0: [UInt8] = [0xFF, 0xE0] + be16(16) + ascii("JFIF") + [0, 1, 1, 0, 0, 1, 0, 1, 0, 0]
        let dqt: [UInt8] = [0xFF, 0xDB] + be16(67) + [UInt8](repeating: 1, count: 65)
        let sof: [UInt8] = [0xFF, 0xC2] + be16(17) + [8] + be16(height) + be16(width) + [3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]
        return [0xFF, 0xD8] + app0 + dqt + sof + [0xFF, 0xD9]
    }

    static func webpLossy(width: UInt16, height: UInt16) -> [UInt8] {
        let frame: [UInt8] = [0x30, 0x01, 0x00, 0x9D, 0x01, 0x2A] + le16(width) + le16(height) + [0, 0]
        return ascii("RIFF") + le32(UInt32(4 + 8 + frame.count)) + ascii("WEBPVP8 ") + le32(UInt32(frame.count)) + frame
    }

    static func webpLossless(width: UInt32, height: UInt32) -> [UInt8] {
        let bits = (width - 1) | (height - 1) << 14
        let body: [UInt8] = [0x2F] + le32(bits) + [0, 0, 0]
        return ascii("RIFF") + le32(UInt32(4 + 8 + body.count)) + ascii("WEBPVP8L") + le32(UInt32(body.count)) + body
    }

    /// 16-bit mono PCM at `rate`, `seconds` long (silence), with a LIST chunk before `data`.
    static func wav(rate: UInt32, seconds: Double) -> [UInt8] {
        let dataBytes = UInt32(Double(rate) * seconds) * 2
        let fmt = ascii("fmt ") + le32(16) + le16(1) + le16(1) + le32(rate) + le32(rate * 2) + le16(2) + le16(16)
        let list = ascii("LIST") + le32(4) + ascii("INFO")
        let data = ascii("data") + le32(dataBytes) + [UInt8](repeating: 0, count: Int(dataBytes))
        return ascii("RIFF") + le32(UInt32(4 + fmt.count + list.count + data.count)) + ascii("WAVE") + fmt + list + data
    }

    static func box(_ type: String, _ body: [UInt8]) -> [UInt8] { be32(UInt32(8 + body.count)) + ascii(type) + body }

    /// ftyp, a large mdat before moov (as most recorders write), moov/mvhd (version 0).
    static func mp4(brand: String, timescale: UInt32, duration: UInt32) -> [UInt8] {
        let mvhd = box("mvhd", [0, 0, 0, 0] + be32(0) + be32(0) + be32(timescale) + be32(duration) + [UInt8](repeating: 0, count: 80))
        return box("ftyp", ascii(brand) + be32(0) + ascii(brand) + ascii("isom")) + box("mdat", [UInt8](repeating: 9, count: 5000))
            + box("moov", box("mvhd", []).isEmpty ? [] : mvhd)
    }

    /// ID3v2 tag, then an MPEG-1 layer III frame (128 kb/s, 44.1 kHz, stereo) holding a Xing header.
    static func mp3(frames: UInt32) -> [UInt8] {
        let id3 = ascii("ID3") + [3, 0, 0, 0, 0, 0, 20] + [UInt8](repeating: 0, count: 20)
        var frame: [UInt8] = [0xFF, 0xFB, 0x90, 0x00] + [UInt8](repeating: 0, count: 32)
        frame += ascii("Xing") + be32(1) + be32(frames)
        frame += [UInt8](repeating: 0, count: 417 - frame.count)
        return id3 + frame + frame
    }

    static func oggPage(granule: UInt64, sequence: UInt32, packet: [UInt8], first: Bool) -> [UInt8] {
        ascii("OggS") + [0, first ? 2 : 4] + le32(UInt32(granule & 0xFFFF_FFFF)) + le32(UInt32(granule >> 32)) + le32(1) + le32(sequence)
            + le32(0) + [1, UInt8(packet.count)] + packet
    }

    /// A Vorbis identification page, a filler page and the last page with `samples` as its granule.
    static func oggVorbis(rate: UInt32, samples: UInt64) -> [UInt8] {
        let id: [UInt8] = [1] + ascii("vorbis") + le32(0) + [2] + le32(rate) + le32(0) + le32(128_000) + le32(0) + [0xB8, 1]
        return oggPage(granule: 0, sequence: 0, packet: id, first: true)
            + oggPage(granule: samples / 2, sequence: 1, packet: [UInt8](repeating: 5, count: 200), first: false)
            + oggPage(granule: samples, sequence: 2, packet: [UInt8](repeating: 6, count: 100), first: false)
    }
}

final class MediaSnifferTests: XCTestCase {
    func testImagesGiveTypeAndDimensions() {
        let images: [(bytes: [UInt8], mime: String, format: String, width: Int, height: Int)] = [
            (MediaFixtures.png(width: 640, height: 480), "image/png", "png", 640, 480),
            (MediaFixtures.gif(width: 300, height: 2), "image/gif", "gif", 300, 2),
            (MediaFixtures.jpeg(width: 4032, height: 3024), "image/jpeg", "jpeg", 4032, 3024),
            (MediaFixtures.webpLossy(width: 1000, height: 750), "image/webp", "webp", 1000, 750),
            (MediaFixtures.webpLossless(width: 16383, height: 1), "image/webp", "webp", 16383, 1),
        ]
        for image in images {
            XCTAssertEqual(
                MediaSniffer.sniff(bytes: image.bytes),
                .init(mime: image.mime, format: image.format, width: image.width, height: image.height),
                "\(image.format) \(image.width)x\(image.height)")
        }
    }

    func testAudioAndVideoGiveDuration() throws {
        let wav = MediaSniffer.sniff(bytes: MediaFixtures.wav(rate: 8000, seconds: 1.5))
        XCTAssertEqual(wav.mime, "audio/wav")
        XCTAssertEqual(try XCTUnwrap(wav.duration), 1.5, accuracy: 0.001)

        let m4a = MediaSniffer.sniff(bytes: MediaFixtures.mp4(brand: "M4A ", timescale: 44100, duration: 44100 * 7))
        XCTAssertEqual([m4a.mime, m4a.format], ["audio/mp4", "m4a"])
        XCTAssertEqual(try XCTUnwrap(m4a.duration), 7, accuracy: 0.001)
        let mp4 = MediaSniffer.sniff(bytes: MediaFixtures.mp4(brand: "isom", timescale: 1000, duration: 12_345))
        XCTAssertEqual(mp4.mime, "video/mp4")
        XCTAssertEqual(try XCTUnwrap(mp4.duration), 12.345, accuracy: 0.001)

        let mp3 = MediaSniffer.sniff(bytes: MediaFixtures.mp3(frames: 383)) // 383 × 1152 / 44100 s
        XCTAssertEqual(mp3.mime, "audio/mpeg")
        XCTAssertEqual(try XCTUnwrap(mp3.duration), 383 * 1152 / 44100, accuracy: 0.001)

        let ogg = MediaSniffer.sniff(bytes: MediaFixtures.oggVorbis(rate: 48000, samples: 48000 * 3 + 24000))
        XCTAssertEqual(ogg.mime, "audio/ogg")
        XCTAssertEqual(try XCTUnwrap(ogg.duration), 3.5, accuracy: 0.001)
    }

    func testExecutablesAndJunkAreNotImages() {
        XCTAssertEqual(
            MediaSniffer.sniff(bytes: [0x7F, 0x45, 0x4C, 0x46, 2, 1, 1, 0] + [UInt8](repeating: 0, count: 56)).mime,
            "application/x-executable")
        XCTAssertEqual(MediaSniffer.sniff(bytes: Array("hello, world".utf8)).mime, "application/octet-stream")
        XCTAssertEqual(MediaSniffer.sniff(bytes: []).mime, "application/octet-stream")
        // Truncated headers answer the type without dimensions rather than crash.
        for cut in [9, 17, 25] {
            XCTAssertEqual(MediaSniffer.sniff(bytes: Array(MediaFixtures.png(width: 5, height: 5).prefix(cut))).mime, "image/png")
            XCTAssertEqual(
                MediaSniffer.sniff(bytes: Array(MediaFixtures.webpLossy(width: 5, height: 5).prefix(cut))).mime,
                cut >= 12 ? "image/webp" : "application/octet-stream")
            _ = MediaSniffer.sniff(bytes: Array(MediaFixtures.jpeg(width: 5, height: 5).prefix(cut * 4)))
            _ = MediaSniffer.sniff(bytes: Array(MediaFixtures.mp3(frames: 3).prefix(cut * 3)))
            _ = MediaSniffer.sniff(bytes: Array(MediaFixtures.wav(rate: 8000, seconds: 0.01).prefix(cut * 2)))
            _ = MediaSniffer.sniff(bytes: Array(MediaFixtures.oggVorbis(rate: 8000, samples: 8).prefix(cut * 3)))
        }
    }
}

/// `POST /media`, `GET /media/<id>[/<name>]`, `DELETE /media/<id>` against a real server on loopback.
final class MediaRouteTests: XCTestCase {
    struct Reply {
        var status: Int
        var headers: [String: String]
        var body: Data
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: body) as? [String: Any]) ?? [:] }
    }

    func call(
        _ port: Int, _ method: String, _ path: String, token: String? = nil, headers: [String: String] = [:], body: Data? = nil
    ) async throws -> Reply {
        try await Self.call(port, method, path, token: token, headers: headers, body: body)
    }

    static func call(
        _ port: Int, _ method: String, _ path: String, token: String? = nil, headers: [String: String] = [:], body: Data? = nil
    ) async throws -> Reply {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.httpMethod = method
        if let token { request.setValue(token, forHTTPHeaderField: "X-LC-IM-Session-Token") }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let data: Data
        let response: URLResponse
        if let body {
            (data, response) = try await URLSession.shared.upload(for: request, from: body)
        } else {
            (data, response) = try await URLSession.shared.data(for: request)
        }
        let http = try XCTUnwrap(response as? HTTPURLResponse)
        var fields: [String: String] = [:]
        for (name, value) in http.allHeaderFields { fields[String(describing: name).lowercased()] = String(describing: value) }
        return Reply(status: http.statusCode, headers: fields, body: data)
    }

    /// What the server's content backend keeps: the media directory's `objects/` and `tmp/` (SQLite), or the
    /// PostgreSQL blobs, committed and pending.
    func inventory(_ server: ServerHarness) async throws -> MediaContentInventory {
        try await Self.inventory(server)
    }

    static func inventory(_ server: ServerHarness) async throws -> MediaContentInventory {
        let store = try XCTUnwrap(server.server.media as? ContentAddressedMediaStore)
        return try await store.inventory()
    }

    func testUploadComputesMetadataAndServesRangesAndETags() async throws {
        let server = try await startServer()
        let tom = try await server.sessionToken("Tom")
        let png = Data(MediaFixtures.png(width: 640, height: 480, padding: 4000))
        // The declared type is wrong: the server answers what the bytes are.
        let up = try await call(
            server.port, "POST", "/media?name=../../etc/holiday%20photo.png", token: tom, headers: ["Content-Type": "application/pdf"],
            body: png)
        XCTAssertEqual(up.status, 201, String(decoding: up.body, as: UTF8.self))
        let json = up.json
        let id = try XCTUnwrap(json["id"] as? String)
        XCTAssertEqual(id.count, 22)
        XCTAssertEqual(json["mime"] as? String, "image/png")
        XCTAssertEqual(json["width"] as? Int, 640)
        XCTAssertEqual(json["height"] as? Int, 480)
        XCTAssertEqual(json["size"] as? Int, png.count)
        XCTAssertEqual(json["name"] as? String, "holiday photo.png")
        let sha = try XCTUnwrap(json["sha256"] as? String)
        XCTAssertFalse(id.contains(sha.prefix(8)))
        XCTAssertEqual(json["url"] as? String, "/media/\(id)/holiday%20photo.png")

        let whole = try await call(server.port, "GET", try XCTUnwrap(json["url"] as? String))
        XCTAssertEqual(whole.status, 200)
        XCTAssertEqual(whole.body, png)
        XCTAssertEqual(whole.headers["content-type"], "image/png")
        XCTAssertEqual(whole.headers["etag"], "\"\(sha)\"")
        XCTAssertEqual(whole.headers["accept-ranges"], "bytes")
        XCTAssertTrue(whole.headers["cache-control"]?.contains("max-age") == true)
        XCTAssertEqual(whole.headers["content-disposition"], "inline; filename=\"holiday photo.png\"; filename*=UTF-8''holiday%20photo.png")

        let part = try await call(server.port, "GET", "/media/\(id)", headers: ["Range": "bytes=16-23"])
        XCTAssertEqual(part.status, 206)
        XCTAssertEqual(part.headers["content-range"], "bytes 16-23/\(png.count)")
        XCTAssertEqual(part.body, png[16..<24])
        let tail = try await call(server.port, "GET", "/media/\(id)", headers: ["Range": "bytes=-10"])
        XCTAssertEqual(tail.body, png.suffix(10))
        let outside = try await call(server.port, "GET", "/media/\(id)", headers: ["Range": "bytes=\(png.count)-"])
        XCTAssertEqual(outside.status, 416)
        XCTAssertEqual(outside.headers["content-range"], "bytes */\(png.count)")

        let head = try await call(server.port, "HEAD", "/media/\(id)")
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.headers["content-length"], String(png.count))
        XCTAssertTrue(head.body.isEmpty)

        let cached = try await call(server.port, "GET", "/media/\(id)", headers: ["If-None-Match": "\"\(sha)\""])
        XCTAssertEqual(cached.status, 304)
        XCTAssertTrue(cached.body.isEmpty)

        let missing = try await call(server.port, "GET", "/media/AAAAAAAAAAAAAAAAAAAAAA")
        XCTAssertEqual(missing.status, 404)
        XCTAssertEqual(missing.json["code"] as? Int, 4604)
    }

    func testSameContentIsStoredOnceAndGoesWithItsLastRecord() async throws {
        let server = try await startServer()
        let tom = try await server.sessionToken("Tom")
        let jerry = try await server.sessionToken("Jerry")
        let bytes = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let first = try await call(server.port, "POST", "/media?name=a.bin", token: tom, body: bytes).json
        let second = try await call(server.port, "POST", "/media?name=b.bin", token: jerry, body: bytes).json
        let (a, b) = (try XCTUnwrap(first["id"] as? String), try XCTUnwrap(second["id"] as? String))
        XCTAssertNotEqual(a, b)
        XCTAssertEqual(first["sha256"] as? String, second["sha256"] as? String)
        XCTAssertEqual(first["mime"] as? String, "application/octet-stream")
        let kept1 = try await inventory(server)
        XCTAssertEqual(kept1.contents.count, 1)
        XCTAssertEqual(kept1.pending, 0)

        let notHis = try await call(server.port, "DELETE", "/media/\(a)", token: jerry)
        XCTAssertEqual(notHis.status, 403)
        XCTAssertEqual(notHis.json["code"] as? Int, 4607)
        let anonymous = try await call(server.port, "DELETE", "/media/\(a)")
        XCTAssertEqual(anonymous.status, 401)
        XCTAssertEqual(anonymous.json["code"] as? Int, 4112)

        let answer1 = try await call(server.port, "DELETE", "/media/\(a)", token: tom).status
        XCTAssertEqual(answer1, 200)
        let answer2 = try await call(server.port, "GET", "/media/\(a)").status
        XCTAssertEqual(answer2, 404)
        let kept2 = try await inventory(server)
        XCTAssertEqual(kept2.contents.count, 1, "Jerry's record still uses the content")
        let answer3 = try await call(server.port, "GET", "/media/\(b)").body
        XCTAssertEqual(answer3, bytes)
        let answer4 = try await call(server.port, "DELETE", "/media/\(b)", token: jerry).status
        XCTAssertEqual(answer4, 200)
        let kept3 = try await inventory(server)
        XCTAssertEqual(kept3.contents, [])
    }

    func testSizeCapQuotaAndTokenAreEnforced() async throws {
        let server = try await startServer { configuration in
            configuration.media.maxUploadBytes = 10_000
            configuration.media.quotaBytes = 15_000
        }
        let tom = try await server.sessionToken("Tom")

        let noToken = try await call(server.port, "POST", "/media", body: Data([1, 2, 3]))
        XCTAssertEqual(noToken.status, 401)
        XCTAssertEqual(noToken.json["code"] as? Int, 4112)
        let badToken = try await call(server.port, "POST", "/media", token: "nope", body: Data([1, 2, 3]))
        XCTAssertEqual(badToken.status, 401)

        let big = try await call(server.port, "POST", "/media", token: tom, body: Data(count: 10_001))
        XCTAssertEqual(big.status, 413)
        XCTAssertEqual(big.json["code"] as? Int, 4601)

        let answer5 = try await call(server.port, "POST", "/media", token: tom, body: Data(repeating: 1, count: 9_000)).status
        XCTAssertEqual(answer5, 201)
        let over = try await call(server.port, "POST", "/media", token: tom, body: Data(repeating: 2, count: 9_000))
        XCTAssertEqual(over.status, 413)
        XCTAssertEqual(over.json["code"] as? Int, 4602)
        let kept4 = try await inventory(server)
        XCTAssertEqual(kept4.contents.count, 1)
        XCTAssertEqual(kept4.pending, 0)
    }

    func testAnExecutableCalledPNGIsServedAsWhatItIsAndRecordsSurviveARestart() async throws {
        let first = try await ServerHarness.start()
        let tom = try await first.sessionToken("Tom")
        let elf = Data([0x7F, 0x45, 0x4C, 0x46, 2, 1, 1, 0] + [UInt8](repeating: 0x90, count: 2000))
        let up = try await call(first.port, "POST", "/media?name=cat.png", token: tom, headers: ["Content-Type": "image/png"], body: elf)
        XCTAssertEqual(up.status, 201)
        XCTAssertEqual(up.json["mime"] as? String, "application/x-executable")
        XCTAssertNil(up.json["width"])
        let id = try XCTUnwrap(up.json["id"] as? String)

        let server = try await first.restarted()
        addTeardownBlock(releasing: server) { await $0.stop() }
        let got = try await call(server.port, "GET", "/media/\(id)/cat.png")
        XCTAssertEqual(got.status, 200)
        XCTAssertEqual(got.body, elf)
        XCTAssertEqual(got.headers["content-type"], "application/x-executable")
        XCTAssertEqual(got.headers["x-content-type-options"], "nosniff")
        XCTAssertTrue(got.headers["content-disposition"]?.hasPrefix("attachment;") == true, "\(got.headers)")
        let usage = try await server.server.media?.usage(owner: "Tom")
        XCTAssertEqual(usage, Int64(elf.count))
    }

    func testAnUnwritableMediaDirectoryAnswers4606AndTheServerGoesOn() async throws {
        let blocker = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-media-blocker-\(UUID().uuidString)")
        try Data("not a directory".utf8).write(to: blocker)
        defer { try? FileManager.default.removeItem(at: blocker) }
        let server = try await startServer {
            $0.media.directory = blocker.appendingPathComponent("media").path
            $0.media.contentInDirectory = true // on PostgreSQL too: this is the directory backend's failure
        }
        let tom = try await server.sessionToken("Tom")
        let failed = try await call(
            server.port, "POST", "/media?name=a.png", token: tom, body: Data(MediaFixtures.png(width: 2, height: 2)))
        XCTAssertEqual(failed.status, 507)
        XCTAssertEqual(failed.json["code"] as? Int, 4606)
        let usage = try await server.server.media?.usage(owner: "Tom")
        XCTAssertEqual(usage, 0)
        let ready = try await call(server.port, "GET", "/ready")
        XCTAssertEqual(ready.status, 200)
    }

    func testConcurrentUploadsOfOneContentShareOneFile() async throws {
        let server = try await startServer()
        let tom = try await server.sessionToken("Tom")
        let bytes = Data(MediaFixtures.gif(width: 9, height: 9) + [UInt8](repeating: 3, count: 600_000))
        let port = server.port
        let ids = try await withThrowingTaskGroup(of: String?.self) { group in
            for index in 0..<8 {
                group.addTask {
                    try await Self.call(port, "POST", "/media?name=\(index).gif", token: tom, body: bytes).json["id"] as? String
                }
            }
            return try await group.reduce(into: [String]()) { if let id = $1 { $0.append(id) } }
        }
        XCTAssertEqual(Set(ids).count, 8)
        let kept5 = try await inventory(server)
        XCTAssertEqual(kept5.contents.count, 1)
        XCTAssertEqual(kept5.pending, 0)
        let usage = try await server.server.media?.usage(owner: "Tom")
        XCTAssertEqual(usage, Int64(bytes.count * 8))
        for id in ids.prefix(7) {
            let deleted = try await call(server.port, "DELETE", "/media/\(id)", token: tom)
            XCTAssertEqual(deleted.status, 200)
        }
        let kept6 = try await inventory(server)
        XCTAssertEqual(kept6.contents.count, 1)
        let last = try await call(server.port, "GET", "/media/\(ids[7])")
        XCTAssertEqual(last.body, bytes)
    }

    /// Twenty uploads of one client at once, each within the quota alone, together four times over it: the
    /// check holds under concurrency (before, each upload read the committed sum on its own and several
    /// passed together). Exactly five fit, the others answer 413 / 4602, and nothing of them is kept.
    func testConcurrentUploadsCannotPassTheQuotaTogether() async throws {
        let server = try await startServer { $0.media.quotaBytes = 55_000 }
        let tom = try await server.sessionToken("Tom")
        let port = server.port
        let replies = try await withThrowingTaskGroup(of: (Int, Reply).self) { group in
            for index in 0..<20 {
                group.addTask {
                    let body = Data(repeating: UInt8(index), count: 10_000)
                    return (index, try await Self.call(port, "POST", "/media?name=\(index).bin", token: tom, body: body))
                }
            }
            return try await group.reduce(into: [(Int, Reply)]()) { $0.append($1) }
        }
        let stored = replies.filter { $0.1.status == 201 }
        let refused = replies.filter { $0.1.status != 201 }
        XCTAssertEqual(stored.count, 5, "\(replies.map { $0.1.status })")
        for (_, reply) in refused {
            XCTAssertEqual(reply.status, 413, String(decoding: reply.body, as: UTF8.self))
            XCTAssertEqual(reply.json["code"] as? Int, 4602)
        }
        let usage = try await server.server.media?.usage(owner: "Tom")
        XCTAssertEqual(usage, Int64(stored.count * 10_000))
        XCTAssertLessThanOrEqual(usage ?? .max, 55_000)
        let kept = try await inventory(server)
        XCTAssertEqual(kept.contents.count, stored.count, "only the stored uploads' bytes are kept")
        XCTAssertEqual(kept.pending, 0)
        for (index, reply) in stored {
            let got = try await call(port, "GET", "/media/\(try XCTUnwrap(reply.json["id"] as? String))")
            XCTAssertEqual(got.body, Data(repeating: UInt8(index), count: 10_000))
        }
        // Room again after a delete.
        let freed = try await call(port, "DELETE", "/media/\(try XCTUnwrap(stored[0].1.json["id"] as? String))", token: tom)
        XCTAssertEqual(freed.status, 200)
        let again = try await call(port, "POST", "/media?name=again.bin", token: tom, body: Data(repeating: 99, count: 10_000))
        XCTAssertEqual(again.status, 201)
    }

    /// A temporary file a crashed server left in `tmp/` (untouched for two hours) is removed at the first
    /// upload after a start; one of an upload in progress (fresh) is not.
    func testACrashedUploadsTemporaryFileIsSweptAndAFreshOneIsNot() async throws {
        let server = try await startServer { $0.media.contentInDirectory = true }
        let tmp = server.directory.appendingPathComponent("media/tmp")
        try FileManager.default.createDirectory(at: tmp, withIntermediateDirectories: true)
        let (old, fresh) = (tmp.appendingPathComponent("left-by-a-crash").path, tmp.appendingPathComponent("in-progress").path)
        XCTAssertTrue(FileManager.default.createFile(atPath: old, contents: Data(count: 1000)))
        XCTAssertTrue(FileManager.default.createFile(atPath: fresh, contents: Data(count: 1000)))
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -7200)], ofItemAtPath: old)
        let tom = try await server.sessionToken("Tom")
        let up = try await call(server.port, "POST", "/media?name=a.bin", token: tom, body: Data("new".utf8))
        XCTAssertEqual(up.status, 201)
        try await waitUntil("\(old) to be removed") { !FileManager.default.fileExists(atPath: old) }
        XCTAssertTrue(FileManager.default.fileExists(atPath: fresh))
    }

    /// Runs a tool to its end; its exit status and what it wrote.
    static func run(_ tool: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        try runProcess(URL(fileURLWithPath: tool), arguments)
    }

    /// A full disk, for real: the media directory on a 1 MiB tmpfs the test mounts (skipped where `mount`
    /// is not permitted). A 2 MB upload fails with 507 / 4606 and leaves nothing, neither in `objects/` nor
    /// in `tmp/`, the space is free again, and the next upload that fits is stored.
    func testAFullDiskAnswers4606KeepsNothingAndTheServiceGoesOn() async throws {
        let mountPoint = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-full-disk-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: mountPoint, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: mountPoint) }
        let mounted = try Self.run("/bin/mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", mountPoint.path])
        try XCTSkipUnless(mounted.status == 0, "cannot mount a small tmpfs here (mount needs root and permission): \(mounted.output)")
        defer { _ = try? Self.run("/bin/umount", ["-l", mountPoint.path]) }
        let server = try await startServer {
            $0.media.directory = mountPoint.appendingPathComponent("media").path
            $0.media.contentInDirectory = true // the directory's disk is what fills up, on PostgreSQL too
        }
        let tom = try await server.sessionToken("Tom")

        let tooBig = Data((0..<2_000_000).map { UInt8(truncatingIfNeeded: $0 &* 13) })
        let failed = try await call(server.port, "POST", "/media?name=big.bin", token: tom, body: tooBig)
        XCTAssertEqual(failed.status, 507, String(decoding: failed.body, as: UTF8.self))
        XCTAssertEqual(failed.json["code"] as? Int, 4606)
        XCTAssertTrue((failed.json["error"] as? String)?.contains("disk full") == true, "\(failed.json)")
        let kept = try await inventory(server)
        XCTAssertEqual(kept, MediaContentInventory(contents: [], pending: 0))
        let usage = try await server.server.media?.usage(owner: "Tom")
        XCTAssertEqual(usage, 0)
        let space = try Self.run("/bin/df", ["--output=used", "-B1", mountPoint.path]).output
        let used = Int(space.split(separator: "\n").last?.trimmingCharacters(in: .whitespaces) ?? "") ?? .max
        XCTAssertLessThan(used, 64 * 1024, "the failed upload's bytes are freed: \(space)")

        let fits = Data(MediaFixtures.png(width: 3, height: 2, padding: 100_000))
        let stored = try await call(server.port, "POST", "/media?name=fits.png", token: tom, body: fits)
        XCTAssertEqual(stored.status, 201, String(decoding: stored.body, as: UTF8.self))
        let got = try await call(server.port, "GET", "/media/\(try XCTUnwrap(stored.json["id"] as? String))")
        XCTAssertEqual(got.body, fits)
        let ready = try await call(server.port, "GET", "/ready")
        XCTAssertEqual(ready.status, 200)
    }

    /// Raw HTTP/1.1 on a socket: what a client that lies about or breaks off its body does.
    func rawExchange(_ port: Int, _ text: String, closeWriting: Bool) throws -> String {
        let fd = try connectLoopback(port: port)
        defer { close(fd) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = Array(text.utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        if closeWriting { shutdown(fd, Int32(SHUT_WR)) }
        var answer = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { break }
            answer += buffer[0..<n]
            if String(decoding: answer, as: UTF8.self).contains("}") { break }
        }
        return String(decoding: answer, as: UTF8.self)
    }

    func testOversizeIsRefusedBeforeTheBodyAndTruncatedOrChunkedOverflowKeepsNothing() async throws {
        let server = try await startServer { $0.media.maxUploadBytes = 1000 }
        let tom = try await server.sessionToken("Tom")
        let head = "POST /media?name=x HTTP/1.1\r\nHost: 127.0.0.1\r\nX-LC-IM-Session-Token: \(tom)\r\n"

        // Declares 100 MB and sends none of it: the answer comes without waiting for the body.
        let refused = try rawExchange(server.port, head + "Content-Length: 100000000\r\n\r\n", closeWriting: false)
        XCTAssertTrue(refused.hasPrefix("HTTP/1.1 413"), refused)
        XCTAssertTrue(refused.contains("4601"), refused)

        // A chunked body that passes the cap is cut off.
        let chunk = String(repeating: "z", count: 600)
        let chunked = try rawExchange(
            server.port, head + "Transfer-Encoding: chunked\r\n\r\n258\r\n\(chunk)\r\n258\r\n\(chunk)\r\n0\r\n\r\n", closeWriting: false)
        XCTAssertTrue(chunked.hasPrefix("HTTP/1.1 413"), chunked)

        // Declares 900 bytes, sends 100 and stops writing: nothing is kept.
        _ = try? rawExchange(server.port, head + "Content-Length: 900\r\n\r\n" + String(repeating: "y", count: 100), closeWriting: true)
        // A pause, not a signal: nothing tells a client that the server dropped a cut-off upload.
        try await Task.sleep(for: .milliseconds(300))
        let kept7 = try await inventory(server)
        XCTAssertEqual(kept7.contents, [])
        XCTAssertEqual(kept7.pending, 0)
        let answer6 = try await server.server.media?.usage(owner: "Tom")
        XCTAssertEqual(answer6, 0)
    }
}
