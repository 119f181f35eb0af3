import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import Synchronization
import XCTest

/// The Swift SDK's media: uploads with progress, downloads (whole, to a file, ranges, thumbnails), file
/// messages, and `hookbot chat`'s `/upload` and rendering — against a real server on loopback, real files.
final class MediaClientTests: XCTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-media-client-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    private func write(_ bytes: Data, _ name: String) throws -> URL {
        let url = directory.appendingPathComponent(name)
        try bytes.write(to: url)
        return url
    }

    func testAnImageFromAFileReachesTheReceiverWithTheServersMetadataAndDownloadsByteForByte() async throws {
        let server = try await startServer()
        let ((tom, jerry), logs) = try await openedClients(of: server, "Tom", "Jerry")
        let conversation = try await tom.createConversation(members: ["Jerry"])
        // A real, decodable 640×480 PNG of 901 KB (stored deflate blocks): four 256 KiB chunks.
        let png = PNGWriter.rgb(width: 640, height: 480)
        let file = try write(png, "photo.png")
        let seen = Mutex([IMTransferProgress]())

        let sent = try await conversation.sendFile(at: file, text: "look") { progress in seen.withLock { $0.append(progress) } }

        let progress = seen.withLock { $0 }
        XCTAssertGreaterThanOrEqual(progress.count, 4)
        XCTAssertEqual(progress.last, IMTransferProgress(completedBytes: Int64(png.count), totalBytes: Int64(png.count)))
        XCTAssertEqual(progress.map(\.completedBytes), progress.map(\.completedBytes).sorted())
        XCTAssertEqual(sent.content.messageType, MessageType.image.rawValue)

        let received = try await logs[1].message(in: conversation.id)
        XCTAssertEqual(received.content.messageType, MessageType.image.rawValue)
        XCTAssertEqual(received.content.text, "look")
        let info = try XCTUnwrap(received.file)
        XCTAssertEqual(info.width, 640)
        XCTAssertEqual(info.height, 480)
        XCTAssertEqual(info.size, Int64(png.count))
        XCTAssertEqual(info.name, "photo.png")
        XCTAssertEqual(info.format, "png")
        let id = try XCTUnwrap(info.objId)
        XCTAssertEqual(info.url, "http://127.0.0.1:\(server.port)/media/\(id)/photo.png")
        XCTAssertTrue(
            received.summary().hasPrefix("Tom sent photo.png (640×480, 901 KB) http://127.0.0.1:\(server.port)/media/\(id)/photo.png"),
            received.summary())

        // Downloads: whole into memory, streamed into a file, and ranges.
        let whole = try await jerry.data(at: info.url)
        XCTAssertEqual(whole, png)
        let copy = directory.appendingPathComponent("copy.png")
        let got = Mutex<IMTransferProgress?>(nil)
        let download = try await jerry.download(info.url, to: copy) { progress in got.withLock { $0 = progress } }
        XCTAssertEqual(download.status, 200)
        XCTAssertEqual(download.byteCount, Int64(png.count))
        XCTAssertEqual(try Data(contentsOf: copy), png)
        XCTAssertEqual(got.withLock { $0 }?.completedBytes, Int64(png.count))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted(), ["copy.png", "photo.png"])

        let middle = try await jerry.data(at: info.url, range: try XCTUnwrap(IMByteRange(300_000..<300_100)))
        XCTAssertEqual(middle, png.subdata(in: 300_000..<300_100))
        let tail = try await jerry.data(at: "/media/\(id)/photo.png", range: .last(16))
        XCTAssertEqual(tail, png.suffix(16))
        let rest = directory.appendingPathComponent("rest.bin")
        let resumed = try await jerry.download(info.url, to: rest, range: .from(900_000))
        XCTAssertEqual(resumed.status, 206)
        XCTAssertEqual(resumed.contentRange, "bytes 900000-\(png.count - 1)/\(png.count)")
        XCTAssertEqual(try Data(contentsOf: rest), png.suffix(from: 900_000))
        do {
            _ = try await jerry.data(at: info.url, range: .from(Int64(png.count)))
            XCTFail("a range past the end was served")
        } catch {
            XCTAssertEqual(error.code, 4608)
        }
        do {
            _ = try await jerry.data(at: info.url, maxBytes: 1000)
            XCTFail("maxBytes was not kept")
        } catch {
            XCTAssertEqual(error.clientCode, .responseTooLarge)
        }

        // A thumbnail by LeanCloud's URL form: fit within 100×100.
        XCTAssertEqual(info.thumbnailURL(width: 100, height: 100), info.url + "?imageView/2/w/100/h/100/q/100")
        let thumbnail = try await jerry.data(at: info.thumbnailURL(width: 100, height: 100, format: "png"))
        XCTAssertEqual(PNGWriter.size(of: thumbnail)?.width, 100)
        XCTAssertEqual(PNGWriter.size(of: thumbnail)?.height, 75)

        // The uploader deletes it; the URL then answers 4604.
        try await tom.deleteMedia(id: id)
        do {
            _ = try await jerry.data(at: info.url)
            XCTFail("a deleted file was served")
        } catch {
            XCTAssertEqual(error.code, 4604)
            XCTAssertEqual(error.reason, "notFound")
        }
    }

    func testTooLargeAndOverQuotaUploadsGiveTheServersCodes() async throws {
        let server = try await startServer {
            $0.media.maxUploadBytes = 100_000
            $0.media.quotaBytes = 150_000
        }
        let tom = server.client("Tom")
        _ = try await openClients([tom])
        let big = try write(Data(repeating: 7, count: 100_001), "big.bin")
        do {
            try await tom.upload(fileAt: big)
            XCTFail("a file over the limit was accepted")
        } catch {
            XCTAssertEqual(error.code, 4601)
            XCTAssertEqual(error.reason, "tooLarge")
            XCTAssertTrue(error.detail?.hasPrefix("HTTP 413") == true, error.description)
        }
        // A body of unknown length (chunked) is cut off by the server when it passes the limit.
        let chunks = AsyncStream<Data> { continuation in
            for _ in 0..<4 { continuation.yield(Data(repeating: 1, count: 40_000)) }
            continuation.finish()
        }
        do {
            try await tom.upload(chunks, length: nil, name: "stream.bin")
            XCTFail("a chunked body over the limit was accepted")
        } catch {
            XCTAssertEqual(error.code, 4601)
        }

        // The sequence form: progress events, then the record.
        let first = try write(Data(repeating: 1, count: 90_000), "first.bin")
        var events: [IMUploadEvent] = []
        for try await event in tom.uploadEvents(fileAt: first, name: "a.bin") { events.append(event) }
        guard case .completed(let record)? = events.last, case .progress(let progress)? = events.dropLast().last else {
            return XCTFail("\(events)")
        }
        XCTAssertEqual(progress.completedBytes, 90_000)
        XCTAssertEqual(record.size, 90_000)
        XCTAssertEqual(record.name, "a.bin")
        XCTAssertEqual(record.messageType, .file)
        // 90 000 stored; another 90 000 passes the 150 000 quota.
        do {
            try await tom.upload(Data(repeating: 2, count: 90_000), name: "second.bin")
            XCTFail("an upload over the quota was accepted")
        } catch {
            XCTAssertEqual(error.code, 4602)
            XCTAssertEqual(error.reason, "quotaExceeded")
        }
        let small = try await tom.upload(Data("hello".utf8), name: "hello.txt", mime: "text/plain")
        XCTAssertEqual(small.size, 5)
        let hello = try await tom.data(at: small.url)
        XCTAssertEqual(hello, Data("hello".utf8))

        // A client that is not logged in has no session token to upload with.
        await tom.close()
        do {
            try await tom.upload(Data("x".utf8), name: "x.txt")
            XCTFail("a closed client uploaded")
        } catch {
            XCTAssertEqual(error.clientCode, .clientNotOpen)
        }
    }

    /// While the WebSocket is down (the client paused, waiting to reconnect) uploads still go out with the last
    /// login's session token, which the server keeps across its restart.
    func testUploadWhilePausedUsesTheLastSessionToken() async throws {
        let server = try await ServerHarness.start()
        let tom = server.client("Tom") { $0.reconnectBaseDelay = .seconds(60) }
        let log = try await openClients([tom])[0]
        await server.stop()
        _ = try await log.next("paused") { if case .paused = $0 { true } else { nil } }
        let again = try await server.restarted()
        let state = await tom.state
        XCTAssertEqual(state, .paused)
        let stored = try await tom.upload(Data("while paused".utf8), name: "paused.txt")
        let bytes = try await tom.data(at: stored.url)
        XCTAssertEqual(bytes, Data("while paused".utf8))
        await tom.close()
        await again.stop()
    }

    func testTypedMessagesReadAsOneLine() {
        let base = URL(string: "http://chat.example:8080")!
        func line(_ content: IMMessageContent, from: String = "alice") -> String {
            IMMessage(id: "m", conversationId: "c", from: from, timestamp: 0, content: content, status: .received)
                .summary(mediaBase: base)
        }
        let photo = FileInfo(url: "/media/abc/photo.png", objId: "abc", name: "photo.png", size: 12_345, width: 640, height: 480)
        XCTAssertEqual(line(.image(photo)), "alice sent photo.png (640×480, 12 KB) http://chat.example:8080/media/abc/photo.png")
        let voice = FileInfo(url: "https://cdn.example/v.m4a", name: "voice.m4a", size: 81_920, duration: 7.4)
        XCTAssertEqual(line(.audio(voice, text: "listen")), "alice sent audio voice.m4a (0:07, 80 KB) https://cdn.example/v.m4a — listen")
        let clip = FileInfo(url: "/media/c/clip.mp4", size: 5_557_453, width: 1280, height: 720, duration: 62)
        XCTAssertEqual(line(.video(clip)), "alice sent video clip.mp4 (1280×720, 1:02, 5.3 MB) http://chat.example:8080/media/c/clip.mp4")
        XCTAssertEqual(
            line(.file(FileInfo(url: "/media/d/a.pdf", name: "a.pdf", size: 800))),
            "alice sent a.pdf (800 B) http://chat.example:8080/media/d/a.pdf")
        XCTAssertEqual(
            line(.location(Location(latitude: 48.8566, longitude: 2.3522), text: "café")), "alice sent a location 48.8566, 2.3522 — café")
        XCTAssertEqual(line(.text("hi")), "alice: hi")
        XCTAssertEqual(line(.common("plain")), "alice: plain")
        XCTAssertEqual(
            line(.typed(TypedMessage(type: 7, text: "lunch?", fields: ["options": ["a", "b"]]))),
            #"alice sent type 7: lunch? {"options":["a","b"]}"#)
        XCTAssertEqual(line(.typed(TypedMessage(type: MessageType.image.rawValue))), "alice sent an image with no file")
        var recalled = IMMessage(id: "m", conversationId: "c", from: "bob", timestamp: 0, content: .text(""), status: .recalled)
        XCTAssertEqual(recalled.summary(), "bob recalled a message")
        recalled.status = .received
        recalled.binary = Data(count: 3)
        XCTAssertEqual(recalled.summary(), "bob sent 3 B of binary data")
    }

    /// `hookbot chat` as a process: `/upload` sends an image with a progress line, and a file and a location
    /// from another member are printed readably.
    func testHookbotChatUploadsAndShowsFiles() async throws {
        guard let binary = Self.hookbotBinary() else { throw XCTSkip("hookbot is not built") }
        let server = try await startServer()
        let jerry = server.client("Jerry")
        let logs = try await openClients([jerry])
        let room = try await jerry.createConversation(name: "media-room", members: ["Tom"])
        let png = PNGWriter.rgb(width: 64, height: 48)
        let file = try write(png, "cat.png")

        let chat = try LineProcess(
            binary: binary,
            arguments: ["chat", "--as", "Tom", "--conversation", "media-room", "--server", "ws://127.0.0.1:\(server.port)/ws"])
        defer { chat.stop() }
        try await chat.waitFor("Logged in as Tom")
        chat.type("/upload \(file.path)")
        let received = try await logs[0].message(in: room.id)
        XCTAssertEqual(received.content.messageType, MessageType.image.rawValue)
        XCTAssertEqual(received.file?.width, 64)
        XCTAssertEqual(received.file?.size, Int64(png.count))
        let downloaded = try await jerry.data(at: try XCTUnwrap(received.file?.url))
        XCTAssertEqual(downloaded, png)
        try await chat.waitFor("* uploading cat.png: 100% (9.1 KB of 9.1 KB)")
        try await chat.waitFor("* Tom sent cat.png (64×48, 9.1 KB) http://127.0.0.1:\(server.port)/media/")

        let notes = try write(Data("meeting at 10".utf8), "notes.txt")
        try await room.sendFile(at: notes)
        try await room.send(.location(Location(latitude: 48.8566, longitude: 2.3522), text: "here"))
        try await chat.waitFor("Jerry sent notes.txt (13 B) http://127.0.0.1:\(server.port)/media/")
        try await chat.waitFor("Jerry sent a location 48.8566, 2.3522 — here")
        chat.type("/upload \(directory.path)/missing.png")
        try await chat.waitFor("! 9007 INVALID_ARGUMENT")
        chat.type("/exit")
        let status = try await chat.waitForExit()
        XCTAssertEqual(status, 0, chat.printed)
        await jerry.close()
    }

    /// The `hookbot` executable built beside the test bundle (`.build/<config>/hookbot`).
    static func hookbotBinary() -> URL? { builtProduct("hookbot") }
}

/// Real PNG files (PNGFile) with this suite's pixels, and a PNG's size read back.
enum PNGWriter {
    static func rgb(width: Int, height: Int) -> Data {
        Data(PNGFile.make(width: width, height: height) { x, y in [UInt8(x & 0xFF), UInt8(y & 0xFF), UInt8((x ^ y) & 0xFF)] })
    }

    /// The width and height in a PNG's header.
    static func size(of data: Data) -> (width: Int, height: Int)? {
        let bytes = [UInt8](data.prefix(24))
        guard bytes.count == 24, bytes[12..<16].elementsEqual("IHDR".utf8) else { return nil }
        func int(_ at: Int) -> Int { bytes[at..<at + 4].reduce(0) { $0 << 8 | Int($1) } }
        return (int(16), int(20))
    }
}
