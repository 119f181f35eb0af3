import BotHost
import BotHub
import Foundation
import HookRuntime
import HookbotTestSupport
import IMClient
import IMCore
import IMServer
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Files in a running bot: real PNGs uploaded to a real server, image messages naming them, the shipped
/// moderation plugin refusing a too-large and a banned file before delivery while an allowed one is
/// delivered, and what a plugin sees in `msg.file` and `ctx.media` — in process (the server's store) and
/// over a WebSocket (the server's HTTP API).
@Suite(.serialized) struct FileModerationTests {
    /// Records what it sees of each file under its name, as moderation's first plugin.
    static let seen = #"""
        return {
          name = "seen",
          priority = 200,
          moderation = function(msg, ctx)
            local f = msg.file
            if not f then return nil end
            local head = ctx.media.read(msg, 8)
            ctx.state.set("file:" .. (f.name or f.url), {
              id = f.id or false, mime = f.mime or false, sha256 = f.sha256 or false, stored = f.stored,
              size = f.size or false, width = f.width or false, height = f.height or false, url = f.url or false,
              png = head == "\137PNG\r\n\26\n", helper = ctx.media.sha256(msg) or false,
            })
          end,
        }
        """#

    /// A valid RGBA PNG of `width` x `height` (IHDR, one stored zlib block, IEND) whose pixels depend on
    /// `seed`.
    static func png(width: Int, height: Int, seed: UInt8) -> [UInt8] {
        PNGFile.make(width: width, height: height, colorType: 6) { x, y in
            [UInt8(truncatingIfNeeded: x &* 7 &+ Int(seed)), UInt8(truncatingIfNeeded: y &* 5), seed, 255]
        }
    }

    /// The `st` the server answered a session open with on `socket`.
    static func sessionToken(_ socket: RawWebSocket) throws -> String {
        var token: String?
        _ = try socket.readUntil(timeout: 10) { received in
            let text = String(decoding: received, as: UTF8.self)
            guard let start = text.range(of: #""st":""#), let end = text[start.upperBound...].firstIndex(of: "\"") else { return false }
            token = String(text[start.upperBound..<end])
            return true
        }
        return try #require(token, "no session token")
    }

    /// Uploads `bytes` as `name` with Tom's session token (or the master key); the server's answer.
    func upload(_ bytes: [UInt8], name: String, port: Int, token: String? = nil, masterKey: String? = nil) async throws -> [String: Any] {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/media?name=\(name)")!)
        request.httpMethod = "POST"
        if let token { request.setValue(token, forHTTPHeaderField: "X-LC-IM-Session-Token") }
        if let masterKey { request.setValue("\(masterKey),master", forHTTPHeaderField: "X-LC-Key") }
        let (data, response) = try await URLSession.shared.upload(for: request, from: Data(bytes))
        #expect((response as? HTTPURLResponse)?.statusCode == 201, "\(String(decoding: data, as: UTF8.self))")
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test(arguments: BotAttachment.allCases)
    func moderationRefusesTooLargeAndBannedFilesBeforeDelivery(_ attachment: BotAttachment) async throws {
        try await BotHarness.start(attachment: attachment).whileRunning { harness in
            try harness.writeShippedModeration()
            try harness.write("seen.lua", Self.seen)

            let tom = harness.server.client("Tom")
            let jerry = harness.server.client("Jerry")
            let logs = try await openClients([tom, jerry])
            // A session token of Tom's for the uploads (the `st` of a session opened over a raw WebSocket).
            let socket = try RawWebSocket(port: harness.server.port)
            try socket.sendText(#"{"cmd":"session","op":"open","i":1,"peerId":"Tom"}"#)
            let token = try Self.sessionToken(socket)
            let small = Self.png(width: 16, height: 16, seed: 1)
            let large = Self.png(width: 120, height: 100, seed: 2)
            let banned = Self.png(width: 20, height: 20, seed: 3)
            let ok = try await upload(small, name: "ok.png", port: harness.server.port, token: token)
            let big = try await upload(large, name: "big.png", port: harness.server.port, token: token)
            let bad = try await upload(banned, name: "bad.png", port: harness.server.port, token: token)
            let badSHA = try #require(bad["sha256"] as? String)

            let bot = try await harness.bot { configuration in
                configuration.plugins.config["moderation"] = [
                    "max_file_mb": 0.02, "banned_files": [.string(badSHA)], "file_types": ["image/*"], "flood": false,
                    "ladder": ["warn"],
                ]
            }
            if attachment == .inProcess { _ = bot.lookingAtFiles(in: harness.server.server.media) }
            let conversation = try await tom.createConversation(members: ["Jerry"])

            func image(_ answer: [String: Any]) throws -> IMMessageContent {
                .image(FileInfo(url: "", objId: try #require(answer["id"] as? String)), text: answer["name"] as? String)
            }
            _ = try await conversation.send(try image(ok))
            for (answer, reason) in [(big, "that file is too large"), (bad, "that file is not allowed here")] {
                let content = try image(answer)
                do {
                    _ = try await conversation.send(content)
                    Issue.record("\(answer["name"] ?? "") must be refused")
                } catch let error as IMError {
                    #expect(error.code == 4402)
                    #expect(error.detail == reason)
                    #expect(error.appCode == 4301)
                }
            }
            // A URL-only file has no type the hub knows: with file_types set, it is refused too.
            do {
                _ = try await conversation.send(.image(FileInfo(url: "https://cdn.example.org/x.png", name: "x.png", size: 10)))
                Issue.record("x.png must be refused")
            } catch let error as IMError {
                #expect(error.detail == "that type of file is not allowed here")
            }
            _ = try await conversation.send(.text("done"))

            // Before "done", Jerry gets Tom's allowed photo (with the server's values) and nothing else: the refused
            // files were sent before it; the bot is no member, so its warnings do not reach the conversation.
            let received = try await logs[1].messages(before: "done", in: conversation.id)
            #expect(received.map { $0.content.typedMessage?.file?.name ?? $0.content.text } == ["ok.png"])
            #expect(received.first?.content.typedMessage?.file?.width == 16)
            #expect(received.first?.content.typedMessage?.file?.size == Int64(small.count))

            // What the plugin saw: the server's record for stored files, the sender's word for the URL-only one.
            let store = bot.runtime.store
            let seenOK = try #require(try store.get(plugin: "seen", key: "file:ok.png", now: Date().timeIntervalSince1970)?.objectValue)
            let okID = try #require(ok["id"] as? String)
            #expect(seenOK["id"] == .string(okID))
            #expect(seenOK["stored"] == .bool(true))
            #expect(seenOK["mime"] == "image/png")
            let okSHA = try #require(ok["sha256"] as? String)
            #expect(seenOK["sha256"] == .string(okSHA))
            #expect(seenOK["helper"] == seenOK["sha256"])
            #expect(seenOK["size"] == .int(small.count))
            #expect(seenOK["width"] == 16)
            #expect(seenOK["height"] == 16)
            #expect(seenOK["png"] == .bool(true), "ctx.media.read gave the file's first bytes")
            let seenBig = try #require(try store.get(plugin: "seen", key: "file:big.png", now: Date().timeIntervalSince1970)?.objectValue)
            #expect(seenBig["size"] == .int(large.count))
            #expect(seenBig["stored"] == .bool(true))
            let seenBad = try #require(try store.get(plugin: "seen", key: "file:bad.png", now: Date().timeIntervalSince1970)?.objectValue)
            #expect(seenBad["sha256"] == .string(badSHA))
            let seenURL = try #require(try store.get(plugin: "seen", key: "file:x.png", now: Date().timeIntervalSince1970)?.objectValue)
            #expect(seenURL["stored"] == .bool(false))
            #expect(seenURL["sha256"] == .bool(false))
            #expect(seenURL["size"] == 10)
            // The moderation plugin's audit names the rules and files.
            let audit = try #require(try store.get(plugin: "moderation", key: "audit", now: Date().timeIntervalSince1970)?.arrayValue)
            #expect(audit.compactMap { $0["rule"]?.stringValue } == ["file_size", "file_banned", "file_type"])
            #expect(audit.compactMap { $0["file"]?.stringValue } == ["big.png", "bad.png", "x.png"])
            await bot.stop()
        }
    }

    /// A server with signed URLs answers file records only to callers it knows: a remote bot with the
    /// master key signs its requests and sees the record and the bytes (through the signed URL the record
    /// gives); without the key, files show stored = false and why.
    @Test func aRemoteBotOfAServerWithSignedURLsNeedsTheMasterKey() async throws {
        let masterKey = "files-master-key-for-tests"
        let server = try await ServerHarness.start { configuration in
            configuration.interception.interceptors = [.init(clientID: "modbot", secret: BotHarness.secret)]
            configuration.interception.deadlineMillis = 1000
            configuration.masterKey = masterKey
            configuration.media.signedURLs = true
            configuration.media.urlTTL = 600
        }
        try await server.whileRunning { server in
            let plugins = server.directory.appendingPathComponent("plugins-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: plugins, withIntermediateDirectories: true)
            let harness = BotHarness(server: server, plugins: plugins, attachment: .webSocket, deadline: 1000)
            try harness.write("seen.lua", Self.seen)
            let one = Self.png(width: 12, height: 10, seed: 4)
            let first = try await upload(one, name: "one.png", port: server.port, masterKey: masterKey)
            let second = try await upload(
                Self.png(width: 12, height: 10, seed: 5), name: "two.png", port: server.port, masterKey: masterKey)

            let tom = server.client("Tom")
            let jerry = server.client("Jerry")
            let logs = try await openClients([tom, jerry])
            defer { withExtendedLifetime(jerry) {} }
            let conversation = try await tom.createConversation(members: ["Jerry"])
            let now = { Date().timeIntervalSince1970 }

            let keyed = try await harness.bot { $0.masterKey = masterKey }
            _ = try await conversation.send(.image(FileInfo(url: "", objId: try #require(first["id"] as? String))))
            _ = try await logs[1].messages(1, in: conversation.id)
            let seenOne = try #require(try keyed.runtime.store.get(plugin: "seen", key: "file:one.png", now: now())?.objectValue)
            #expect(seenOne["stored"] == .bool(true))
            let firstSHA = try #require(first["sha256"] as? String)
            #expect(seenOne["sha256"] == .string(firstSHA))
            #expect(seenOne["mime"] == "image/png")
            #expect(seenOne["png"] == .bool(true), "the bytes were read through the signed URL")
            await keyed.stop()

            let keyless = try await harness.bot()
            _ = try await conversation.send(.image(FileInfo(url: "", objId: try #require(second["id"] as? String))))
            _ = try await logs[1].messages(1, in: conversation.id)
            let seenTwo = try #require(try keyless.runtime.store.get(plugin: "seen", key: "file:two.png", now: now())?.objectValue)
            #expect(seenTwo["stored"] == .bool(false))
            #expect(seenTwo["sha256"] == .bool(false))
            #expect(seenTwo["png"] == .bool(false))
            await keyless.stop()
        }
    }
}
