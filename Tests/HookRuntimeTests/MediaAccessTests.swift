import Foundation
import IMCore
import XCTest

@testable import HookRuntime

/// Stored files as plugins see them: `msg.file` with the record's mime and sha256, `ctx.media.info`,
/// `sha256` and `read`, within the hook's time and memory. The source here serves real files from a
/// directory (the BotHost tests use the server's store and HTTP API).
final class MediaAccessTests: XCTestCase {
    /// Files in a directory, named by id; records as given. `delay` holds every answer back.
    struct DirectoryMedia: HookMediaSource {
        var directory: URL
        var records: [String: HookMediaRecord]
        var delay: Duration = .zero

        func record(id: String) async throws -> HookMediaRecord? {
            if delay > .zero { try await Task.sleep(for: delay) }
            return records[id]
        }

        func read(id: String, maxBytes: Int) async throws -> [UInt8] {
            if delay > .zero { try await Task.sleep(for: delay) }
            guard records[id] != nil, let handle = FileHandle(forReadingAtPath: directory.appendingPathComponent(id).path) else {
                throw HookMediaError("no stored file \(id)")
            }
            defer { try? handle.close() }
            return Array(try handle.read(upToCount: maxBytes) ?? Data())
        }
    }

    static let pngSignature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// A fixture with `cat` (a PNG header and padding, 1.5 MiB) stored.
    func fixture(delay: Duration = .zero) throws -> (Fixture, DirectoryMedia) {
        let f = Fixture()
        let media = f.root.appendingPathComponent("media")
        try FileManager.default.createDirectory(at: media, withIntermediateDirectories: true)
        var bytes = Self.pngSignature + [0, 0, 0, 13] + Array("IHDR".utf8)
        bytes += [UInt8](repeating: 7, count: 3 << 19 - bytes.count)
        try Data(bytes).write(to: media.appendingPathComponent("cat"))
        let record = HookMediaRecord(
            id: "cat", url: "/media/cat/cat.png", name: "cat.png",
            metadata: MediaMetadata(
                size: Int64(bytes.count), sha256: String(repeating: "3c", count: 32), mime: "image/png", format: "png", width: 64,
                height: 48))
        return (f, DirectoryMedia(directory: media, records: ["cat": record], delay: delay))
    }

    /// An engine that loaded `plugins` (a load error fails the test) and reads the files of a new `fixture`,
    /// or, with `media: false`, has no media source at all.
    func mediaEngine(
        _ plugins: KeyValuePairs<String, String>, limits: HookLimits = .default, delay: Duration = .zero, media: Bool = true,
        file: StaticString = #filePath, line: UInt = #line
    ) throws -> PluginEngine {
        let (f, source) = try fixture(delay: delay)
        addTeardownBlock { withExtendedLifetime(f) {} }
        for (name, text) in plugins { f.write(name, text) }
        let engine = f.runtime(limits: limits)
        if media { engine.setMedia(source) }
        XCTAssertEqual(engine.loadAll().errors, [], file: file, line: line)
        return engine
    }

    /// `mediaEngine` with one plugin file.
    func mediaEngine(
        _ name: String, _ source: String, limits: HookLimits = .default, delay: Duration = .zero, media: Bool = true,
        file: StaticString = #filePath, line: UInt = #line
    ) throws -> PluginEngine {
        try mediaEngine([name: source], limits: limits, delay: delay, media: media, file: file, line: line)
    }

    func image(_ file: FileInfo) -> HookMessage {
        var m = msg("a photo", type: MessageType.image.rawValue)
        m.file = file
        return m
    }

    func testAStoredFileShowsTheRecordsMimeAndSha256BesideTheMessagesValues() throws {
        let engine = try mediaEngine(
            "show.lua",
            #"""
            return { on_receive = function(msg, ctx)
              local file = msg.file
              ctx.reply(table.concat({ tostring(file.id), tostring(file.stored), tostring(file.mime), tostring(file.sha256),
                tostring(file.name), tostring(file.size), tostring(file.width), tostring(file.url), tostring(file.error) }, "|"))
            end }
            """#)
        let stored = engine.receive(
            image(FileInfo(url: "/media/cat/cat.png", objId: "cat", name: "cat.png", format: "png", size: 1_572_864, width: 64, height: 48))
        )
        XCTAssertEqual(
            sentTexts(stored.actions),
            ["cat|true|image/png|\(String(repeating: "3c", count: 32))|cat.png|1572864|64|/media/cat/cat.png|nil"])
        // URL-only: the sender's values, marked as not stored; an id the store does not know is no stored file.
        let urlOnly = engine.receive(image(FileInfo(url: "https://cdn.example.org/x.png", name: "x.png", size: 10)))
        XCTAssertEqual(sentTexts(urlOnly.actions), ["nil|false|nil|nil|x.png|10|nil|https://cdn.example.org/x.png|nil"])
        let unknown = engine.receive(image(FileInfo(url: "https://cdn.example.org/y.png", objId: "nosuch")))
        XCTAssertEqual(sentTexts(unknown.actions), ["nosuch|false|nil|nil|nil|nil|nil|https://cdn.example.org/y.png|nil"])
    }

    func testWithoutAMediaSourceFilesAreNotStoredAndSayWhy() throws {
        let engine = try mediaEngine(
            "show.lua",
            #"""
            return { on_receive = function(msg, ctx)
              local data, why = ctx.media.read(msg, 4)
              ctx.reply(tostring(msg.file.stored) .. "|" .. tostring(msg.file.error) .. "|" .. tostring(data) .. "|" .. why)
            end }
            """#, media: false)
        let r = engine.receive(image(FileInfo(url: "/media/cat/cat.png", objId: "cat")))
        XCTAssertEqual(
            sentTexts(r.actions),
            ["false|no media store is reachable from this bot|nil|no media store is reachable from this bot"])
    }

    func testCtxMediaReadGivesTheFirstBytesCappedAtOneMiBAndErrorsAsNilAndAReason() throws {
        let engine = try mediaEngine(
            "read.lua",
            #"""
            return { on_receive = function(msg, ctx)
              local head = assert(ctx.media.read(msg, 8))
              local png = head == "\137PNG\r\n\26\n"
              local all = assert(ctx.media.read("cat"))
              local capped = assert(ctx.media.read(msg.file, 5000000))
              local none, why = ctx.media.read("nosuch", 10)
              local bad, bad_why = ctx.media.read(msg, -1)
              local url, url_why = ctx.media.read({ file = { url = "https://x/y.png" }, cid = "c1" })
              local text, text_why = ctx.media.read({ cid = "c1", text = "hi" })
              local zero = ctx.media.read("cat", 0)
              ctx.reply(table.concat({ tostring(png), #all, #capped, tostring(none), why, tostring(bad), bad_why,
                tostring(url), url_why, tostring(text), text_why, "[" .. zero .. "]",
                ctx.media.sha256(msg), ctx.media.sha256("cat"), tostring((ctx.media.sha256("nosuch"))),
                ctx.media.info(msg).mime, tostring(ctx.media.info(msg).stored) }, "|"))
            end }
            """#)
        let r = engine.receive(image(FileInfo(url: "/media/cat/cat.png", objId: "cat")))
        XCTAssertEqual(r.errors, [])
        let sha = String(repeating: "3c", count: 32)
        XCTAssertEqual(
            sentTexts(r.actions),
            [
                "true|1048576|1048576|nil|no stored file nosuch|nil|max_bytes must be a whole number of bytes, 0 or more"
                    + "|nil|not a file stored on the hub (a URL-only file has no id)|nil|the message has no file|[]"
                    + "|\(sha)|\(sha)|nil|image/png|true"
            ])
    }

    func testAReadThatWouldPassThePluginsMemoryCapIsRefused() throws {
        var limits = testLimits
        limits.memoryBytes = 1 << 20
        let engine = try mediaEngine(
            "greedy.lua",
            #"""
            return { on_receive = function(msg, ctx)
              local data, why = ctx.media.read(msg, 1048576)
              local small = ctx.media.read(msg, 1000)
              ctx.reply(tostring(data) .. "|" .. why .. "|" .. #small)
            end }
            """#, limits: limits)
        let r = engine.receive(image(FileInfo(url: "/media/cat/cat.png", objId: "cat")))
        XCTAssertEqual(r.errors, [])
        let text = try XCTUnwrap(sentTexts(r.actions).first)
        XCTAssertTrue(text.hasPrefix("nil|not enough memory: 1048576 bytes do not fit in this plugin's memory cap"), text)
        XCTAssertTrue(text.hasSuffix("|1000"), text)
    }

    func testASlowStoreNeverHoldsAHookPastItsTime() throws {
        var limits = testLimits
        limits.deadline = 0.5
        let engine = try mediaEngine(
            "slow.lua",
            #"""
            return {
              moderation = function(msg, ctx)
                ctx.log("review: " .. tostring(msg.file.stored) .. " " .. tostring(msg.file.error))
              end,
              on_receive = function(msg, ctx)
                local data, why = ctx.media.read("cat", 10)
                ctx.reply(tostring(data) .. "|" .. why)
              end,
            }
            """#, limits: limits, delay: .seconds(5))
        let m = image(FileInfo(url: "/media/cat/cat.png", objId: "cat"))
        // A review with 120 ms left waits at most half of it for the record, then runs without it.
        var started = ContinuousClock.now
        let review = engine.moderate(m, until: started.advanced(by: .milliseconds(120)))
        XCTAssertLessThan(ContinuousClock.now - started, .milliseconds(110))
        XCTAssertTrue(logMessages(review.actions).first?.hasPrefix("review: false timed out after") == true, "\(review.actions)")
        // A read inside a hook waits until shortly before the hook's deadline and answers nil, "timed out…";
        // the hook itself finishes in time (no deadline error). The failed lookup is remembered for 2 s, so
        // on_receive's message does not wait for the record again.
        started = ContinuousClock.now
        let r = engine.receive(m)
        XCTAssertEqual(r.errors, [])
        XCTAssertLessThan(ContinuousClock.now - started, .milliseconds(800))
        XCTAssertTrue(sentTexts(r.actions).first?.hasPrefix("nil|timed out after") == true, "\(r.actions)")
    }

    func testBeforeSendGivesBackTheMessageUnchangedWhenAPluginReturnsIt() throws {
        let engine = try mediaEngine([
            "echo.lua": "return { before_send = function(msg, ctx) return msg end }",
            "rename.lua": #"""
            return { priority = -1, before_send = function(msg, ctx)
              if msg.file.name == "rename-me" then msg.file.name = "renamed.png" return msg end
            end }
            """#,
        ])
        let m = image(FileInfo(url: "/media/cat/cat.png", objId: "cat", name: "cat.png", size: 1_572_864))
        // What the host adds (mime, sha256, stored) is not read back: the message is the one sent.
        XCTAssertEqual(engine.beforeSend(m).message, m)
        var named = m
        named.file?.name = "rename-me"
        var renamed = named
        renamed.file?.name = "renamed.png"
        XCTAssertEqual(engine.beforeSend(named).message, renamed)
    }

    func testTheShippedModerationPluginRefusesBadFileSettingsAtLoad() throws {
        let shipped = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("plugins/moderation.lua")
        let source = try String(contentsOf: shipped, encoding: .utf8)
        let cases: [(JSONValue, String)] = [
            (["file_kinds": ["image", "gif"]], "file_kinds: 'gif' is not one of image, audio, video, file"),
            (["banned_files": ["1234"]], "banned_files: '1234' is not a SHA-256 (64 hex digits)"),
            (["file_types": ["png"]], "file_types: 'png' is not a MIME type such as image/png or image/*"),
            (["max_file_mb": 0], "max_file_mb: must be more than 0 (or false)"),
        ]
        for (settings, expected) in cases {
            let f = Fixture()
            f.write("moderation.lua", source)
            try f.copyShippedShared()
            let report = f.runtime(config: ["moderation": settings]).loadAll()
            XCTAssertEqual(report.loaded, [], "\(settings)")
            XCTAssertTrue(report.errors.first?.message.contains(expected) == true, "\(report.errors)")
        }
        let f = Fixture()
        f.write("moderation.lua", source)
        try f.copyShippedShared()
        let good: JSONValue = [
            "file_kinds": ["image"], "file_types": ["image/*", "audio/mpeg"], "banned_files": [.string(String(repeating: "AB", count: 32))],
            "max_file_mb": 0.5,
        ]
        XCTAssertEqual(f.runtime(config: ["moderation": good]).loadAll().errors, [])
    }

    /// The `files` example of docs/PLUGINS.md (the other examples are checked in DocExampleTests).
    func testTheDocsFileCheckExample() throws {
        let (f, base) = try fixture()
        let example = try XCTUnwrap(try DocExampleTests.examples()["files"]?["filecheck.lua"])
        f.write("filecheck.lua", example)
        // A GIF sent as an image, and a banned picture (the same bytes as cat, under another id).
        let gif = Array("GIF89a".utf8) + [4, 0, 3, 0, 0, 0, 0, 0x3B]
        try Data(gif).write(to: base.directory.appendingPathComponent("anim"))
        var media = base
        media.records["anim"] = HookMediaRecord(
            id: "anim", name: "anim.png",
            metadata: MediaMetadata(size: Int64(gif.count), sha256: String(repeating: "9", count: 64), mime: "image/gif"))
        let bannedHash = String(repeating: "b", count: 64)
        media.records["copy"] = HookMediaRecord(
            id: "copy", name: "copy.png", metadata: MediaMetadata(size: 10, sha256: bannedHash, mime: "image/png"))
        let engine = f.runtime(config: ["filecheck": ["banned": [.string(bannedHash)]]])
        engine.setMedia(media)
        XCTAssertEqual(engine.loadAll().errors, [])
        func verdict(_ file: FileInfo) -> ModerationVerdict { engine.moderate(image(file)).verdict }
        XCTAssertEqual(verdict(FileInfo(url: "/media/cat/cat.png", objId: "cat")), .allow)
        XCTAssertEqual(
            verdict(FileInfo(url: "/media/anim/anim.png", objId: "anim")),
            .block(reason: "only PNG and JPEG images (this is image/gif)", code: 4312, silent: false))
        XCTAssertEqual(
            verdict(FileInfo(url: "/media/copy/copy.png", objId: "copy")), .block(reason: "this file is banned", code: 4311, silent: false))
        XCTAssertEqual(
            verdict(FileInfo(url: "https://cdn.example.org/a.png")), .block(reason: "upload the file here first", code: 4310, silent: false)
        )
        XCTAssertEqual(engine.moderate(msg("just text")).verdict, .allow)
    }

    /// new_member_minutes reads join times the plugin kept in its state: a bot restarted after the join
    /// (a new engine on the same state file) still refuses the newcomer's file, until the time is up.
    func testModerationKeepsJoinTimesAcrossARestart() throws {
        let shipped = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("plugins/moderation.lua")
        let (f, media) = try fixture()
        f.write("moderation.lua", try String(contentsOf: shipped, encoding: .utf8))
        try f.copyShippedShared()
        let config: [String: JSONValue] = ["moderation": ["new_member_minutes": 10, "flood": false]]
        let before = f.runtime(config: config)
        before.setMedia(media)
        XCTAssertEqual(before.loadAll().errors, [])
        _ = before.memberJoined(cid: "c1", members: ["newbie"], by: "newbie")
        _ = before.shutdown()

        f.clock.advance(by: 120)
        let after = f.runtime(config: config)
        after.setMedia(media)
        XCTAssertEqual(after.loadAll().errors, [])
        var photo = image(FileInfo(url: "/media/cat/cat.png", objId: "cat"))
        photo.from = "newbie"
        XCTAssertEqual(
            after.incoming(photo).moderation.verdict,
            .block(reason: "new members cannot post files yet", code: 4301, silent: false))
        var old = photo
        old.from = "u1"
        XCTAssertEqual(after.incoming(old).moderation.verdict, .allow, "a member whose join the bot never saw is established")
        f.clock.advance(by: 481)
        XCTAssertEqual(after.incoming(photo).moderation.verdict, .allow)
    }

    /// on_edit carries the new version's file (its own fields); ctx.media gives the record.
    func testAnEditedFileMessageShowsItsFileInOnEdit() throws {
        let engine = try mediaEngine(
            "edits.lua",
            #"""
            return { on_edit = function(ev, ctx)
              ctx.reply(ev.file.id .. "|" .. ev.file.name .. "|" .. ev.file.width .. "|" .. ctx.media.info(ev.file).mime
                .. "|" .. ctx.media.sha256(ev))
            end }
            """#)
        let edited = image(FileInfo(url: "/media/cat/cat.png", objId: "cat", name: "cat.png", width: 64, height: 48))
        XCTAssertEqual(
            sentTexts(engine.edited(edited, editedAt: 1_700_000_001_000).actions),
            ["cat|cat.png|64|image/png|\(String(repeating: "3c", count: 32))"])
    }
}
