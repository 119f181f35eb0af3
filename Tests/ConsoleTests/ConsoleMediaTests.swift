import BotHost
import Console
import Foundation
import HookbotTestSupport
import Hummingbird
import IMClient
import IMCore
import IMServer
import Logging
import Telemetry
import XCTest

/// The console's chat sends and shows files, in a real headless Chromium against an embedded server and
/// its bot: PNGs picked with the file input, dropped on the conversation and pasted into the message box are
/// uploaded with a progress bar (`POST /media` with the page's session token) and sent as LeanCloud image
/// messages, which an SDK client receives with the metadata the server computed; the page shows them as
/// thumbnails in LeanCloud's `?imageView/2/w/320/h/320` form; files over the upload limit or the quota show
/// 4601 and 4602 in the chat; a voice message and a file from the SDK client become a player and a download
/// link. Also a remote bot's console, and signed URLs that expire.
final class ConsoleMediaTests: XCTestCase {
    func testUploadsByPickerAndDropAndReceivedAudioAndFileInTheBrowser() async throws {
        try requireBrowser()
        let harness = try await ConsoleHarness.start {
            $0.server.maxUploadMB = 1
            $0.server.media.quotaBytes = 1 << 20
        }
        addTeardownBlock(releasing: harness) { await $0.stop() }
        try await withBrowser(height: 900, screenshot: "console-media") { try await exercise($0, harness) }
    }

    private func exercise(_ browser: WebDriver, _ harness: ConsoleHarness) async throws {
        let (jerry, lobby, events) = try await harness.lobbyMember("Jerry")
        addTeardownBlock(releasing: jerry) { await $0.close() }
        try await browser.open("\(harness.base)/")
        try await browser.logIn(as: "Tom")
        try await browser.waitUntil(
            "the lobby to open with the composer enabled",
            """
            return (document.querySelector('#conversation-title')?.textContent || '').includes(arguments[0])
              && document.querySelector('#attach-button')?.disabled === false
            """, [harness.hub.bot.configuration.server.lobbyName])
        // The values each upload's progress bar takes, as the page sets them.
        _ = try await browser.script(
            """
            window.progressSeen = new Map();
            const record = (node) => {
              if (node.tagName !== 'PROGRESS') return;
              window.progressSeen.set(node, [...(window.progressSeen.get(node) || []), Number(node.getAttribute('value'))]);
            };
            new MutationObserver((changes) => {
              for (const change of changes) {
                if (change.type === 'attributes') record(change.target);
                for (const node of change.addedNodes) if (node.querySelectorAll) [node, ...node.querySelectorAll('progress')].forEach(record);
              }
            }).observe(document.querySelector('#messages'), { subtree: true, childList: true, attributes: true, attributeFilter: ['value'] });
            """)

        // 1. The file picker, with a caption typed first.
        let picked = TestMedia.png(width: 480, height: 360)
        let file = harness.directory.appendingPathComponent("sunset.png")
        try picked.write(to: file)
        try await browser.type("the sunset", into: "#composer-text")
        try await browser.type(file.path, into: "#composer-file")
        let first = try await events.message(in: harness.hub.lobbyID)
        let firstFile = try imageFile(first, caption: "the sunset")
        try await checkFilled(firstFile, bytes: picked, name: "sunset.png", width: 480, height: 360, harness)
        try await checkThumbnail(browser, harness, objId: firstFile.objId ?? "", name: "sunset.png", shownWidth: 320)

        // 2. A PNG dropped on the message list (a DataTransfer built in the page, as a drag from the desktop).
        let dropped = TestMedia.png(width: 200, height: 120)
        try await drop(browser, name: "dropped.png", type: "image/png", base64: dropped.base64EncodedString(), on: "#messages")
        let second = try await events.message(in: harness.hub.lobbyID)
        let secondFile = try imageFile(second, caption: nil)
        try await checkFilled(secondFile, bytes: dropped, name: "dropped.png", width: 200, height: 120, harness)
        try await checkThumbnail(browser, harness, objId: secondFile.objId ?? "", name: "dropped.png", shownWidth: 200)

        // Both progress bars went from 0 to 100 %, and none is left once the messages are sent.
        let seen = try await browser.script("return [...window.progressSeen.values()]") as? [[Double]] ?? []
        XCTAssertEqual(seen.count, 2, "progress bars seen: \(seen)")
        for values in seen {
            XCTAssertEqual(values.first, 0, "\(values)")
            XCTAssertEqual(values.last, 100, "\(values)")
            XCTAssertEqual(values, values.sorted(), "progress never goes back: \(values)")
        }
        let bars = try await browser.script("return document.querySelectorAll('#messages progress').length") as? Int
        XCTAssertEqual(bars, 0)

        // A message naming the server's file by another of its addresses (localhost for 127.0.0.1, as with a
        // public_url the browser does not use) is shown from the server the page talks to.
        let firstID = firstFile.objId ?? ""
        _ = try await lobby.send(.image(FileInfo(url: "http://localhost:\(harness.port)/media/\(firstID)/sunset.png")))
        try await browser.waitUntil(
            "Jerry's image by another address, shown from this server",
            """
            const img = document.querySelector('#messages .message[data-from="Jerry"] img.thumbnail');
            if (!img) return false;
            img.scrollIntoView();
            return img.complete && img.naturalWidth === 320 && img.src === arguments[0]
            """, ["\(harness.base)/media/\(firstID)/sunset.png?imageView/2/w/320/h/320"])

        // Cancel, pressed while the upload is under way: the message leaves the list and nothing is sent (the
        // next message Jerry gets is the pasted picture below). Whether the server kept the bytes depends on
        // how far they got: a whole body already taken is an unreferenced file, which retention collects.
        let cancelled = try await browser.script(
            """
            const data = new DataTransfer();
            data.items.add(new File([new Uint8Array(100 * 1024)], 'cancelled.bin'));
            document.querySelector('#messages').dispatchEvent(new DragEvent('drop', { dataTransfer: data, bubbles: true, cancelable: true }));
            const button = [...document.querySelectorAll('#messages .message.uploading .upload-cancel')].pop();
            button.click();
            return !!button;
            """)
        XCTAssertEqual(cancelled as? Bool, true, "the uploading message has a Cancel button")
        try await browser.waitUntil(
            "the cancelled upload to leave the list",
            "return ![...document.querySelectorAll('#messages .message')].some(m => m.textContent.includes('cancelled.bin'))")

        // 3. A picture pasted into the message box (a ClipboardEvent carrying a file, as a screenshot tool's).
        let pasted = TestMedia.png(width: 40, height: 30)
        let pastedShown = try await browser.script(
            """
            const data = new DataTransfer();
            data.items.add(new File([Uint8Array.from(atob(arguments[0]), (c) => c.charCodeAt(0))], 'pasted.png', { type: 'image/png' }));
            const event = new ClipboardEvent('paste', { clipboardData: data, bubbles: true, cancelable: true });
            return !document.querySelector('#composer-text').dispatchEvent(event);
            """, [pasted.base64EncodedString()])
        XCTAssertEqual(pastedShown as? Bool, true, "the page takes the pasted file (the paste's default is prevented)")
        let third = try await events.message(in: harness.hub.lobbyID)
        try await checkFilled(try imageFile(third, caption: nil), bytes: pasted, name: "pasted.png", width: 40, height: 30, harness)

        // 4. Refusals are shown in the chat with the server's code and reason, and nothing is sent: over the
        // upload limit (1 MiB here) 4601, before the body is read; over Tom's quota (1 MiB, of which his
        // three pictures use 595 KB, and the cancelled upload at most 100 KB) 4602.
        try await drop(browser, name: "huge.bin", type: "application/octet-stream", base64: nil, zeros: 1536 * 1024, on: "#chat-main")
        try await waitForRefusal(browser, of: "huge.bin", code: 4601, saying: "limit")
        try await drop(browser, name: "more.bin", type: "application/octet-stream", base64: nil, zeros: 600_000, on: "#chat-main")
        try await waitForRefusal(browser, of: "more.bin", code: 4602, saying: "quota")

        // 5. From the SDK client: a voice message, a video and a file, each naming a stored file by objId only.
        let voice = try await store(TestMedia.wav(seconds: 1), name: "voice.wav", owner: "Jerry", harness)
        _ = try await lobby.send(.audio(FileInfo(url: "", objId: voice)))
        let clip = try await store(TestMedia.mp4(seconds: 42), name: "clip.mp4", owner: "Jerry", harness)
        _ = try await lobby.send(.video(FileInfo(url: "", objId: clip)))
        let notes = Data("minutes of the meeting\n".utf8)
        let notesID = try await store(notes, name: "notes.txt", owner: "Jerry", harness)
        _ = try await lobby.send(.file(FileInfo(url: "", objId: notesID)))
        try await browser.waitUntil(
            "the voice message's player to load its metadata",
            """
            const audio = document.querySelector(`#messages .message[data-from="Jerry"] audio.player`);
            return !!audio && audio.src === arguments[0] && audio.readyState >= 1 && Math.abs(audio.duration - 1) < 0.05
            """, ["\(harness.base)/media/\(voice)/voice.wav"])
        // (The clip is a header only, so it is not played; the player and what the server measured are shown.)
        try await browser.waitUntil(
            "the video's player",
            """
            const video = document.querySelector(`#messages .message[data-from="Jerry"] video.player`);
            return !!video && video.src === arguments[0] && video.controls
              && (video.closest('.attachment').querySelector('.file-details')?.textContent || '').includes('0:42')
            """, ["\(harness.base)/media/\(clip)/clip.mp4"])
        try await browser.waitUntil(
            "the file's download link",
            """
            const link = [...document.querySelectorAll('#messages .message[data-from="Jerry"] a.file-link')].find(a => a.textContent === 'notes.txt');
            return !!link && link.href === arguments[0] && link.getAttribute('download') === 'notes.txt'
              && (link.closest('.file-chip').querySelector('.file-details')?.textContent || '').includes(arguments[1])
            """, ["\(harness.base)/media/\(notesID)/notes.txt", "\(notes.count) B"])
        let download = try await HTTPAnswer.fetch("\(harness.base)/media/\(notesID)/notes.txt")
        XCTAssertEqual(download.body, notes)

        // Nothing the page loaded was refused by its Content-Security-Policy.
        let log = try await browser.consoleLog().compactMap { $0["message"] as? String }
        XCTAssertEqual(log.filter { $0.contains("Content Security Policy") }, [])
        try await saveScreenshot(browser, "console-media.png")
    }

    /// A remote bot's console (`hookbot run --server`): the page, on the bot's port, uploads to the server's
    /// origin (a cross-origin request the server allows) and shows the server's thumbnail, which its policy
    /// allows from that origin; an SDK client of the server gets the image with the server's metadata.
    func testARemoteBotsConsoleUploadsToItsServer() async throws {
        try requireBrowser()
        let server = try await ServerHarness.start()
        addTeardownBlock(releasing: server) { await $0.stop() }
        let remote = try await RemoteBotConsole.start(server: server)
        addTeardownBlock(releasing: remote) { await $0.stop() }
        let jerry = server.client("Jerry")
        let events = EventLog(jerry)
        addTeardownBlock(releasing: jerry) { await $0.close() }
        try await withBrowser(screenshot: "remote-media") { browser in
            try await jerry.open()
            let photos = try await jerry.createConversation(name: "photos", members: ["Tom"])
            let serverOrigin = "http://127.0.0.1:\(server.port)"
            let page = try await HTTPAnswer.fetch(remote.base + "/")
            let policy = page.contentSecurityPolicy ?? ""
            XCTAssertTrue(policy.contains("img-src 'self' \(serverOrigin);"), policy)
            XCTAssertTrue(policy.contains("media-src 'self' \(serverOrigin);"), policy)

            try await browser.open(remote.base + "/")
            try await browser.logIn(as: "Tom")
            try await browser.click(#"#conversation-list li[data-cid="\#(photos.id)"] button"#)
            try await browser.waitUntil(
                "the conversation to open with the composer enabled",
                "return document.querySelector('#attach-button')?.disabled === false")
            let png = TestMedia.png(width: 200, height: 120)
            try await drop(browser, name: "remote.png", type: "image/png", base64: png.base64EncodedString(), on: "#messages")
            let message = try await events.message(in: photos.id)
            let info = try imageFile(message, caption: nil)
            let id = try XCTUnwrap(info.objId)
            let found = try await server.server.media?.record(id)
            XCTAssertEqual(found?.owner, "Tom")
            XCTAssertEqual(info.width, 200)
            XCTAssertEqual(info.size, Int64(png.count))
            try await browser.waitUntil(
                "the thumbnail from the server's origin",
                """
                const img = document.querySelector('#messages .message.own img.thumbnail');
                return !!img && img.complete && img.naturalWidth === 200 && img.src === arguments[0]
                """, ["\(serverOrigin)/media/\(id)/remote.png?imageView/2/w/320/h/320"])
            let log = try await browser.consoleLog().compactMap { $0["message"] as? String }
            XCTAssertEqual(log.filter { $0.contains("Content Security Policy") || $0.contains("CORS") }, [])
        }
    }

    /// With signed URLs (`signed_urls`, here a 1 s `url_ttl`) a file message in the history names a URL that has
    /// expired: the page asks `GET /1.1/files/<objId>` for a fresh one and shows the thumbnail from it.
    func testAnExpiredSignedURLInTheHistoryIsAskedForAgain() async throws {
        try requireBrowser()
        let harness = try await ConsoleHarness.start {
            $0.server.media.signedURLs = true
            $0.server.media.urlTTL = 1
        }
        addTeardownBlock(releasing: harness) { await $0.stop() }
        let (jerry, _, events) = try await harness.lobbyMember("Jerry")
        addTeardownBlock(releasing: jerry) { await $0.close() }
        try await withBrowser(screenshot: "signed-url") { first in
            try await logIn(first, harness, as: "Tom")
            let png = TestMedia.png(width: 200, height: 120)
            try await drop(first, name: "signed.png", type: "image/png", base64: png.base64EncodedString(), on: "#messages")
            let info = try imageFile(try await events.message(in: harness.hub.lobbyID), caption: nil)
            let id = try XCTUnwrap(info.objId)
            // What is stored: a signed URL, which expires.
            XCTAssertTrue(info.url.hasPrefix("\(harness.base)/media/\(id)/"), info.url)
            var expired = try await HTTPAnswer.fetch(info.url)
            try await eventually("the stored URL to expire", seconds: 5) {
                expired = try await HTTPAnswer.fetch(info.url)
                return expired.status != 200
            }
            XCTAssertEqual(expired.status, 403)
            XCTAssertEqual(try expired.object()["code"] as? Int, 4611)

            // A browser that has not seen the file (nothing cached) reads the same history.
            try await withBrowser(screenshot: "signed-url-fresh") { browser in
                try await logIn(browser, harness, as: "Tom")
                try await browser.waitUntil(
                    "the thumbnail from a fresh URL",
                    """
                    const img = document.querySelector('#messages .message.own img.thumbnail');
                    return !!img && img.complete && img.naturalWidth === 200 && img.src.endsWith('/signed.png?imageView/2/w/320/h/320')
                      && !img.src.startsWith(arguments[0]) && img.closest('a').href !== arguments[0]
                      && img.closest('.attachment').querySelector('a.file-link').href === img.closest('a').href
                    """, [info.url])
            }
        }
    }

    private func logIn(_ browser: WebDriver, _ harness: ConsoleHarness, as clientID: String) async throws {
        try await browser.open("\(harness.base)/")
        try await browser.logIn(as: clientID)
        try await browser.waitUntil("the lobby to open", "return document.querySelector('#attach-button')?.disabled === false")
    }

    /// The page's policy: images, audio and video from the IM server only (this origin when it is embedded).
    func testThePagesPolicyAllowsMediaFromTheIMServerOnly() async throws {
        let harness = try await ConsoleHarness.start()
        let page = try await harness.http("GET", "/")
        await harness.stop()
        let policy = try XCTUnwrap(page.contentSecurityPolicy)
        let directives = Dictionary(
            policy.split(separator: ";").map { part -> (String, String) in
                let words = part.trimmingCharacters(in: .whitespaces).split(separator: " ", maxSplits: 1)
                return (String(words[0]), words.count > 1 ? String(words[1]) : "")
            }, uniquingKeysWith: { first, _ in first })
        XCTAssertEqual(directives["img-src"], "'self'")
        XCTAssertEqual(directives["media-src"], "'self'")
        XCTAssertEqual(directives["connect-src"], "'self' ws://127.0.0.1:\(harness.port) wss://127.0.0.1:\(harness.port)")
    }

    // MARK: Steps

    /// The image message Jerry got from Tom: its file, after checking the type and caption.
    private func imageFile(_ message: IMMessage, caption: String?, file: StaticString = #filePath, line: UInt = #line) throws -> FileInfo {
        XCTAssertEqual(message.from, "Tom", file: file, line: line)
        guard case .typed(let typed) = message.content, typed.type == MessageType.image.rawValue, let info = typed.file else {
            throw TestFailure("not an image message: \(message.body)")
        }
        XCTAssertEqual(typed.text, caption, file: file, line: line)
        return info
    }

    /// The received file's objId names the stored upload, and its url and metadata are the server's.
    private func checkFilled(
        _ info: FileInfo, bytes: Data, name: String, width: Int, height: Int, _ harness: ConsoleHarness,
        file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        let id = try XCTUnwrap(info.objId, file: file, line: line)
        let found = try await harness.hub.server.media?.record(id)
        let record = try XCTUnwrap(found, "no record \(id)", file: file, line: line)
        XCTAssertEqual(record.owner, "Tom", file: file, line: line)
        XCTAssertEqual(record.metadata.size, Int64(bytes.count), file: file, line: line)
        XCTAssertEqual(info.name, name, file: file, line: line)
        XCTAssertEqual(info.format, "png", file: file, line: line)
        XCTAssertEqual(info.size, Int64(bytes.count), file: file, line: line)
        XCTAssertEqual(info.width, width, file: file, line: line)
        XCTAssertEqual(info.height, height, file: file, line: line)
        XCTAssertTrue(info.url.hasSuffix("/media/\(id)/\(name)"), "url \(info.url)", file: file, line: line)
        let served = try await HTTPAnswer.fetch(harness.base + "/media/\(id)/\(name)")
        XCTAssertEqual(served.body, bytes, file: file, line: line)
    }

    /// Tom's page shows the image as the server's thumbnail (decoded: `naturalWidth`), linking to the original.
    private func checkThumbnail(_ browser: WebDriver, _ harness: ConsoleHarness, objId: String, name: String, shownWidth: Int) async throws
    {
        let original = "\(harness.base)/media/\(objId)/\(name)"
        try await browser.waitUntil(
            "the thumbnail of \(name)",
            """
            const img = [...document.querySelectorAll('#messages .message.own img.thumbnail')].find(i => i.src.startsWith(arguments[0] + '?'));
            if (!img) return false;
            img.scrollIntoView();
            return img.complete && img.naturalWidth === arguments[2] && img.src === arguments[0] + arguments[1]
              && img.closest('a').href === arguments[0] && !img.closest('.message').classList.contains('pending')
            """, [original, "?imageView/2/w/320/h/320", shownWidth])
    }

    /// Dispatches dragenter and drop events carrying one file (`base64` nil: `zeros` zero bytes) on `selector`;
    /// the drop overlay shows while the drag is over the conversation.
    private func drop(
        _ browser: WebDriver, name: String, type: String, base64: String?, zeros: Int = 0, on selector: String
    ) async throws {
        let overlaid = try await browser.script(
            """
            const bytes = arguments[2] === null ? new Uint8Array(arguments[4])
              : Uint8Array.from(atob(arguments[2]), (c) => c.charCodeAt(0));
            const data = new DataTransfer();
            data.items.add(new File([bytes], arguments[0], { type: arguments[1] }));
            const target = document.querySelector(arguments[3]);
            target.dispatchEvent(new DragEvent('dragenter', { dataTransfer: data, bubbles: true, cancelable: true }));
            const shown = !document.querySelector('#drop-overlay').hidden;
            target.dispatchEvent(new DragEvent('drop', { dataTransfer: data, bubbles: true, cancelable: true }));
            return shown && document.querySelector('#drop-overlay').hidden;
            """, [name, type, base64 as Any? ?? NSNull(), selector, zeros])
        XCTAssertEqual(overlaid as? Bool, true, "the drop overlay shows during the drag and goes at the drop")
    }

    /// The last refused upload in the chat is `name`'s, with `code` and a reason that says `saying`.
    private func waitForRefusal(_ browser: WebDriver, of name: String, code: Int, saying: String) async throws {
        try await browser.waitUntil(
            "the refusal of \(name) in the chat",
            """
            const refused = [...document.querySelectorAll('#messages .message.blocked')].pop();
            return refused?.querySelector('.error-code')?.textContent === String(arguments[1])
              && (refused.querySelector('.error-reason')?.textContent || '').includes(arguments[2])
              && refused.textContent.includes(arguments[0])
            """, [name, code, saying])
    }

    /// Stores a file as `owner`'s directly in the server's media store; returns its id.
    private func store(_ bytes: Data, name: String, owner: String, _ harness: ConsoleHarness) async throws -> String {
        let media = try XCTUnwrap(harness.hub.server.media)
        let body = AsyncStream<ByteBuffer> { continuation in
            continuation.yield(ByteBuffer(bytes: bytes))
            continuation.finish()
        }
        let upload = MediaUpload(owner: owner, name: name, declaredMIME: nil, maxBytes: 1 << 20, quotaBytes: nil)
        return try await media.store(upload, body: body).id
    }

    private func saveScreenshot(_ browser: WebDriver, _ name: String) async throws {
        try FileManager.default.createDirectory(at: ConsoleBrowserTests.screenshots, withIntermediateDirectories: true)
        try await browser.screenshot().write(to: ConsoleBrowserTests.screenshots.appendingPathComponent(name))
    }
}

/// Real files for the browser: a PNG (stored deflate blocks, so any decoder reads it; a gradient, so
/// thumbnails have something to scale) and a WAV of silence.
enum TestMedia {
    static func png(width: Int, height: Int) -> Data {
        var raw = [UInt8]()
        raw.reserveCapacity((width * 3 + 1) * height)
        for y in 0..<height {
            raw.append(0)
            for x in 0..<width { raw += [UInt8(x * 255 / max(1, width - 1)), UInt8(y * 255 / max(1, height - 1)), 160] }
        }
        var zlib: [UInt8] = [0x78, 0x01]
        var offset = 0
        repeat {
            let count = min(65535, raw.count - offset)
            zlib.append(offset + count >= raw.count ? 1 : 0)
            zlib += le16(UInt16(count)) + le16(~UInt16(count))
            zlib += raw[offset..<(offset + count)]
            offset += count
        } while offset < raw.count
        zlib += be32(adler32(raw))
        let header = be32(UInt32(width)) + be32(UInt32(height)) + [8, 2, 0, 0, 0]
        return Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + chunk("IHDR", header) + chunk("IDAT", zlib) + chunk("IEND", []))
    }

    /// 16-bit mono PCM at 8 kHz.
    static func wav(seconds: Double) -> Data {
        let rate: UInt32 = 8000
        let bytes = UInt32(Double(rate) * seconds) * 2
        let format = Array("fmt ".utf8) + le32(16) + le16(1) + le16(1) + le32(rate) + le32(rate * 2) + le16(2) + le16(16)
        let data = Array("data".utf8) + le32(bytes) + [UInt8](repeating: 0, count: Int(bytes))
        return Data(Array("RIFF".utf8) + le32(UInt32(4 + format.count + data.count)) + Array("WAVE".utf8) + format + data)
    }

    /// An MP4 header (ftyp, moov/mvhd with the duration at a 1000 Hz timescale) and no media.
    static func mp4(seconds: Int) -> Data {
        func box(_ type: String, _ body: [UInt8]) -> [UInt8] { be32(UInt32(8 + body.count)) + Array(type.utf8) + body }
        let mvhd = box(
            "mvhd", [0, 0, 0, 0] + be32(0) + be32(0) + be32(1000) + be32(UInt32(seconds * 1000)) + [UInt8](repeating: 0, count: 80))
        return Data(box("ftyp", Array("isom".utf8) + be32(0) + Array("isommp41".utf8)) + box("moov", mvhd))
    }

    private static func chunk(_ type: String, _ body: [UInt8]) -> [UInt8] {
        let typed = Array(type.utf8) + body
        return be32(UInt32(body.count)) + typed + be32(crc32(typed))
    }

    private static let crcTable: [UInt32] = (0..<256).map { n in
        (0..<8).reduce(UInt32(n)) { c, _ in c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
    }

    private static func crc32(_ bytes: [UInt8]) -> UInt32 {
        ~bytes.reduce(0xFFFF_FFFF as UInt32) { crcTable[Int(($0 ^ UInt32($1)) & 0xFF)] ^ ($0 >> 8) }
    }

    private static func adler32(_ bytes: [UInt8]) -> UInt32 {
        var a: UInt32 = 1
        var b: UInt32 = 0
        for byte in bytes {
            a = (a + UInt32(byte)) % 65521
            b = (b + a) % 65521
        }
        return b << 16 | a
    }

    private static func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
    private static func le32(_ v: UInt32) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24)] }
    private static func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
}
