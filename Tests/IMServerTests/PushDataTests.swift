import Foundation
import HTTPTypes
import HookbotTestSupport
import HummingbirdWSClient
import IMClient
import IMCore
import IMProto
import Logging
import NIOCore
import PushProviders
import XCTest

@testable import IMServer

/// What offline members' pushes say (docs/PUSH.md, "What it says"): LeanCloud's `pushData` from the Swift SDK,
/// from a raw JSON frame and from a protobuf frame as the SDKs build it; its refusals; templates per
/// conversation (hookbot.toml's `[push.conversations]` and the `pushTemplates` attribute); and the server's
/// record of the last pushes. A real server on loopback, the webhook provider posting to a gateway the test runs.
final class PushDataTests: XCTestCase {
    static let secret = PushPipelineTests.secret

    func configure(_ configuration: inout ServerConfiguration, gateway: PushGateway) {
        configuration.push.providers = [PushProviderConfiguration(.webhook(WebhookSettings(url: gateway.url, secret: Self.secret)))]
        configuration.push.queue.pollInterval = .milliseconds(100)
        configuration.push.http.requestTimeout = .milliseconds(500)
    }

    /// Sends a frame as written and returns the reply with serial `serial`.
    func requestRaw(_ client: TestClient, _ text: String, serial: Int) async throws -> Command {
        client.sendRaw(text)
        return try await client.next(timeout: .seconds(10), "reply to i=\(serial)") { $0.i == serial }
    }

    /// The notifications the gateway got, in the order sent.
    func notifications(_ requests: [GatewayRequest]) -> [[String: JSONValue]] {
        requests.compactMap { $0.json?["notification"]?.objectValue }
    }

    func testPushDataFromTheSwiftSDKReachesAnOfflineMember() async throws {
        let gateway = try await PushGateway(secret: Self.secret) { _ in 204 }
        addTeardownBlock(releasing: gateway) { await $0.shutdown() }
        let server = try await startServer { configure(&$0, gateway: gateway) }
        try await server.registerOffline("Jerry", token: "jerry-phone")
        let tom = server.client("Tom")
        try await tom.open()
        addTeardownBlock(releasing: tom) { await $0.close() }
        let conversation = try await tom.createConversation(name: "kitchen", members: ["Jerry"])

        let typed = IMPushData(
            title: "Tom 🐱", body: "New order #42", badge: .number(5), sound: "bell.caf", collapseId: "orders",
            payload: ["order": 42, "kind": "pickup"])
        _ = try await conversation.send(.text("order 42 is ready"), options: IMSendOptions(pushData: typed))
        _ = try await gateway.waitFor(count: 1)
        // Raw JSON as LeanCloud's other SDKs take it; "Increment" means the unread count (2 by now).
        let raw = try IMPushData(json: #"{"alert":"奶酪到了 🧀","badge":"Increment","sound":"default","x":[1,2]}"#)
        _ = try await conversation.send(.text("cheese"), options: IMSendOptions(pushData: raw))
        _ = try await gateway.waitFor(count: 2)
        // A binary message carries it too.
        _ = try await conversation.send(binary: Data([1, 2, 3]), options: IMSendOptions(pushData: IMPushData(body: "a file")))
        let pushes = notifications(try await gateway.waitFor(count: 3))
        XCTAssertEqual(pushes.count, 3)
        XCTAssertEqual(pushes[0]["title"], "Tom 🐱")
        XCTAssertEqual(pushes[0]["body"], "New order #42")
        XCTAssertEqual(pushes[0]["badge"], 5)
        XCTAssertEqual(pushes[0]["sound"], "bell.caf")
        XCTAssertEqual(pushes[0]["collapse_id"], "orders")
        XCTAssertEqual(pushes[0]["data"]?["order"], 42)
        XCTAssertEqual(pushes[0]["data"]?["kind"], "pickup")
        XCTAssertEqual(pushes[0]["data"]?["cid"]?.stringValue, conversation.id)
        XCTAssertNil(pushes[1]["title"])
        XCTAssertEqual(pushes[1]["body"], "奶酪到了 🧀")
        XCTAssertEqual(pushes[1]["badge"], 2, "Increment: the unread count")
        XCTAssertEqual(pushes[1]["data"]?["x"], [1, 2])
        XCTAssertEqual(pushes[2]["body"], "a file")
        XCTAssertEqual(pushes[2]["badge"], 3)

        // Refused before anything is sent: 9007 with the reason.
        for bad in [
            IMPushData(body: "x", payload: ["badge": 1]),
            IMPushData(body: String(repeating: "长", count: 1400)),
        ] {
            do {
                _ = try await conversation.send(.text("never sent"), options: IMSendOptions(pushData: bad))
                XCTFail("sent with \(bad.encoded.prefix(40))")
            } catch {
                XCTAssertEqual(error.clientCode, .invalidArgument, "\(error)")
            }
        }
        for json in [#"[1,2]"#, #""just text""#, "{not json"] {
            XCTAssertThrowsError(try IMPushData(json: json)) { XCTAssertEqual(($0 as? IMError)?.clientCode, .invalidArgument) }
        }
        let settledCount = await gateway.settle().count
        XCTAssertEqual(settledCount, 3)

        // The server kept what it sent, for the console.
        let (entries, next) = server.server.recentPushes(cid: conversation.id)
        let badges = Dictionary(uniqueKeysWithValues: entries.map { ($0.body ?? "", $0.badge) })
        XCTAssertEqual(badges, ["New order #42": 5, "奶酪到了 🧀": 2, "a file": 3])
        XCTAssertEqual(Set(entries.map(\.outcome)), ["delivered"])
        XCTAssertEqual(Set(entries.map(\.receiver)), ["Jerry"])
        XCTAssertEqual(entries.first?.device, "jerry-phone")
        XCTAssertEqual(next, 3)
        XCTAssertEqual(server.server.recentPushes(after: 2).entries.map(\.seq), [3])
        XCTAssertEqual(server.server.pushCounts["webhook"]?["delivered"], 3)
    }

    func testPushDataFromAJSONFrameAndAProtobufFrameAndBadOnesRefusedWithACode() async throws {
        let gateway = try await PushGateway(secret: Self.secret) { _ in 204 }
        addTeardownBlock(releasing: gateway) { await $0.shutdown() }
        let server = try await startServer { configure(&$0, gateway: gateway) }
        try await server.registerOffline("Jerry", token: "jerry-phone")
        let tom = try await server.login("Tom")
        let cid = try await tom.startConversation(members: ["Jerry"], name: "kitchen")

        // JSON: pushData as the object itself (the SDKs send its text; both are taken).
        var direct = Command(cmd: .direct)
        direct.cid = cid
        direct.msg = TypedMessage.text("hi").encoded()
        let frame = try XCTUnwrap(JSONValue.parse(JSONCommandCodec().encode(direct))?.objectValue)
        var object = frame
        object["pushData"] = ["alert": ["title": "From JSON", "body": "object pushData"], "badge": 9]
        object["i"] = 900
        let reply = try await requestRaw(tom, JSONValue.object(object).jsonString(), serial: 900)
        XCTAssertNil(reply.code, "\(reply)")
        _ = try await gateway.waitFor(count: 1)

        // Protobuf, as LeanCloud's iOS and Android SDKs encode a message with pushData (DirectCommand field 16).
        let answers = try await Self.protobufSession(port: server.port, peerID: "Tom") { peer in
            var pushing = LCProtoGenericCommand()
            pushing.cmd = .direct
            pushing.peerID = peer
            pushing.i = 2
            pushing.directMessage.cid = cid
            pushing.directMessage.msg = #"{"_lctype":-1,"_lctext":"from protobuf"}"#
            pushing.directMessage.pushData = #"{"alert":{"title":"From protobuf","body":"SDK frame"},"badge":4,"ref":"pb"}"#
            var tooBig = pushing
            tooBig.i = 3
            tooBig.directMessage.pushData = #"{"alert":""# + String(repeating: "x", count: 4100) + #""}"#
            return [pushing, tooBig]
        }
        XCTAssertEqual(answers.count, 2)
        XCTAssertEqual(answers.first?.cmd, .ack)
        XCTAssertNil(answers.first?.code, "\(answers)")
        XCTAssertEqual(answers.last?.code, IMErrorCode.invalidField.rawValue, "over 4096 bytes: \(answers)")
        XCTAssertTrue(answers.last?.detail?.contains("4096") == true, "\(answers)")

        let pushes = notifications(try await gateway.waitFor(count: 2))
        XCTAssertEqual(pushes[0]["title"], "From JSON")
        XCTAssertEqual(pushes[0]["body"], "object pushData")
        XCTAssertEqual(pushes[0]["badge"], 9)
        XCTAssertEqual(pushes[1]["title"], "From protobuf")
        XCTAssertEqual(pushes[1]["body"], "SDK frame")
        XCTAssertEqual(pushes[1]["badge"], 4)
        XCTAssertEqual(pushes[1]["data"]?["ref"], "pb")

        // Bad pushData in JSON: not an object or its text (4901, naming the field), or too big (4903).
        for (value, code) in [("5", 4901), ("[1,2]", 4901), ("true", 4901), ("\"" + String(repeating: "y", count: 4097) + "\"", 4903)] {
            let serial = 901 + code + value.count
            var bad = frame
            bad["i"] = .int(serial)
            let text = JSONValue.object(bad).jsonString().dropLast() + #","pushData":"# + value + "}"
            let answer = try await requestRaw(tom, String(text), serial: serial)
            XCTAssertEqual(answer.code, code, "pushData \(value.prefix(10)): \(answer)")
            if code == 4901 { XCTAssertEqual(answer.detail, "invalid value for field 'pushData'") }
        }
        let settledCount = await gateway.settle().count
        XCTAssertEqual(settledCount, 2, "refused messages are neither stored nor pushed")
    }

    func testTemplatesPerConversationFromTheConfigurationAndTheConversationsAttribute() async throws {
        let gateway = try await PushGateway(secret: Self.secret) { _ in 204 }
        addTeardownBlock(releasing: gateway) { await $0.shutdown() }
        let first = try await ServerHarness.start { configure(&$0, gateway: gateway) }
        try await first.registerOffline("Jerry", token: "jerry-phone")
        let setup = try await first.login("Tom")
        var cids: [String: String] = [:]
        for name in ["ops", "quiet", "forced", "silenced", "plain"] {
            cids[name] = try await setup.startConversation(members: ["Jerry"], name: name)
        }
        await setup.close()
        await first.stop()

        // The operator's overrides need the conversations' ids: the same store, started with them.
        var operatorTemplates: [String: PushConversationTemplates] = [:]
        operatorTemplates[cids["ops"]!] = try PushConversationTemplates(
            object: ["text": "[ops] {from}: {text}", "title": "Ops room", "image": "[ops] a photo from {from}"])
        operatorTemplates[cids["forced"]!] = try PushConversationTemplates(object: ["enabled": true, "title": ""])
        operatorTemplates[cids["silenced"]!] = try PushConversationTemplates(object: ["enabled": false])
        let server = try await startServer(directory: first.directory) {
            configure(&$0, gateway: gateway)
            $0.push.conversations = operatorTemplates
        }
        let tom = server.client("Tom")
        try await tom.open()
        addTeardownBlock(releasing: tom) { await $0.close() }
        func conversation(_ name: String) async throws -> IMConversation {
            let found = try await tom.fetchConversation(id: cids[name]!)
            return try XCTUnwrap(found)
        }
        // Members set pushTemplates; the operator's keys win, key by key.
        try await conversation("ops").update(attributes: ["pushTemplates": ["text": "attr: {text}", "sound": "ding.caf"]])
        try await conversation("quiet").update(attributes: ["pushTemplates": ["enabled": false]])
        try await conversation("forced").update(attributes: ["pushTemplates": ["enabled": false, "text": "{from} says {text}"]])
        try await conversation("plain").update(attributes: ["pushTemplates": ["file": "{from} filed it"]])
        // A malformed attribute is refused at conv update (and start) with 4903 naming the key.
        for (bad, reason) in [
            (["text": 7] as JSONValue, "'text' must be a template"), (["bogus": "x"], "'bogus' is not a template name"),
            (["enabled": "no"], "'enabled' must be true or false"), ("loud", "must be an object"),
        ] {
            do {
                try await conversation("plain").update(attributes: ["pushTemplates": bad])
                XCTFail("pushTemplates \(bad) was taken")
            } catch {
                XCTAssertEqual((error as? IMError)?.code, 4903)
                XCTAssertTrue("\(error)".contains(reason), "\(error)")
            }
        }
        let raw = try await server.login("Tom")
        var start = Command(cmd: .conv, op: .start)
        start.m = ["Jerry", "Tom"]
        start.attr = ["pushTemplates": ["txt": "x"]]
        let refusedStart = try await raw.request(start)
        XCTAssertEqual(refusedStart.code, 4903, "\(refusedStart)")
        XCTAssertTrue(refusedStart.detail?.contains("'txt'") == true, "\(refusedStart)")
        await raw.close()
        // Written before this check (or by hand into the store), a malformed attribute is skipped key by key at push time.
        var lenient = ServerConfiguration().push
        lenient.templates.byType[-6] = "{from} sent a file"
        let skipped = lenient.templates(for: "c", attributes: ["pushTemplates": ["text": 7, "bogus": "x", "file": "{from} filed it"]])
        XCTAssertEqual(skipped?.byType[-1], "{from}: {text}")
        XCTAssertEqual(skipped?.byType[-6], "{from} filed it")
        XCTAssertNotNil(lenient.templates(for: "c", attributes: ["pushTemplates": "loud"]))

        _ = try await conversation("ops").send(.text("deploy done"))
        _ = try await gateway.waitFor(count: 1)
        _ = try await conversation("ops").send(.typed(TypedMessage(type: -2, file: FileInfo(url: "https://e.com/a.png"))))
        _ = try await gateway.waitFor(count: 2)
        _ = try await conversation("quiet").send(.text("nobody hears this"), options: IMSendOptions(pushData: IMPushData(body: "nor this")))
        _ = try await conversation("silenced").send(.text("nor this"), options: IMSendOptions(pushData: IMPushData(body: "nor this")))
        _ = try await conversation("forced").send(.text("operator on"))
        _ = try await gateway.waitFor(count: 3)
        _ = try await conversation("plain").send(.text("defaults"))
        _ = try await gateway.waitFor(count: 4)
        _ = try await conversation("plain").send(.typed(TypedMessage(type: -6, file: FileInfo(url: "https://e.com/f.pdf"))))
        let settled = await gateway.settle()
        XCTAssertEqual(settled.count, 5, "\(notifications(settled))")
        let pushes = notifications(settled)
        func data(_ push: [String: JSONValue]) -> String? { push["data"]?["cid"]?.stringValue }
        XCTAssertEqual(pushes[0]["body"], "[ops] Tom: deploy done")
        XCTAssertEqual(pushes[0]["title"], "Ops room")
        XCTAssertEqual(pushes[0]["sound"], "ding.caf", "the attribute's key the operator did not set")
        XCTAssertEqual(pushes[1]["body"], "[ops] a photo from Tom")
        XCTAssertEqual(data(pushes[2]), cids["forced"])
        XCTAssertEqual(pushes[2]["body"], "Tom says operator on", "enabled by the operator, the members' text kept")
        XCTAssertNil(pushes[2]["title"], "an empty title leaves it out")
        XCTAssertEqual(pushes[3]["body"], "Tom: defaults")
        XCTAssertEqual(pushes[3]["title"], "plain")
        XCTAssertEqual(pushes[4]["body"], "Tom filed it")
        XCTAssertFalse(Set(pushes.compactMap(data)).contains(cids["quiet"]!))
        XCTAssertFalse(Set(pushes.compactMap(data)).contains(cids["silenced"]!))

        // The operator's overrides are checked as strictly as hookbot.toml is.
        XCTAssertThrowsError(try PushConversationTemplates(object: ["txt": "x"])) {
            XCTAssertEqual(($0 as? IMError)?.code, 4903)
            XCTAssertTrue("\($0)".contains("'txt'"), "\($0)")
        }
        XCTAssertThrowsError(try PushConversationTemplates(object: ["enabled": "no"]))
    }

    /// The record of pushes keeps what went wrong: a push the gateway refuses for good (rejected, with the
    /// status) and one it answers 503 past its max age (expired, not retry), counted per outcome.
    func testTheRecordOfPushesShowsRejectedAndExpiredPushesWithTheReason() async throws {
        let gateway = try await PushGateway(secret: Self.secret) { token in token == "refused" ? 400 : 503 }
        addTeardownBlock(releasing: gateway) { await $0.shutdown() }
        let server = try await startServer {
            configure(&$0, gateway: gateway)
            $0.push.queue.maxAge = .milliseconds(1)
        }
        try await server.registerOffline("Jerry", token: "refused")
        try await server.registerOffline("Spike", token: "busy")
        let tom = try await server.login("Tom")
        let cid = try await tom.startConversation(members: ["Jerry", "Spike"], name: "yard")
        var direct = Command(cmd: .direct)
        direct.cid = cid
        direct.msg = TypedMessage.text("bones").encoded()
        _ = try await tom.request(direct)
        var entries: [PushHistoryEntry] = []
        for _ in 0..<400 where entries.count < 2 {
            entries = server.server.recentPushes(cid: cid).entries
            try await Task.sleep(for: .milliseconds(25))
        }
        let byReceiver = Dictionary(uniqueKeysWithValues: entries.map { ($0.receiver, $0) })
        XCTAssertEqual(byReceiver["Jerry"]?.outcome, "rejected")
        XCTAssertTrue(byReceiver["Jerry"]?.reason?.hasPrefix("400") == true, "\(entries)")
        XCTAssertEqual(byReceiver["Spike"]?.outcome, "expired", "\(entries)")
        XCTAssertEqual(byReceiver["Spike"]?.body, "Tom: bones")
        XCTAssertEqual(server.server.pushCounts["webhook"], ["rejected": 1, "expired": 1])
    }

    /// Opens a binary protobuf WebSocket (`lc.protobuf2.3`) as `peerID`, sends `commands(peerID)` one at a time
    /// and returns the reply to each (by its `i`).
    static func protobufSession(
        port: Int, peerID: String, _ commands: @escaping @Sendable (String) -> [LCProtoGenericCommand]
    ) async throws -> [Command] {
        var headers = HTTPFields()
        headers[.secWebSocketProtocol] = "lc.protobuf2.3"
        var logger = Logger(label: "protobuf-sdk")
        logger.logLevel = .critical
        let replies = PushTestBox<[Command]>([])
        _ = try await WebSocketClient.connect(
            url: "ws://127.0.0.1:\(port)/ws", configuration: WebSocketClientConfiguration(additionalHeaders: headers), logger: logger
        ) { inbound, outbound, _ in
            let codec = ProtobufCommandCodec()
            var open = LCProtoGenericCommand()
            open.cmd = .session
            open.op = .open
            open.peerID = peerID
            open.i = 1
            open.appID = "app"
            open.sessionMessage.ua = "ios/13.0.0"
            var pending = [open] + commands(peerID)
            var waiting = pending.removeFirst()
            try await outbound.write(.binary(ByteBuffer(bytes: try waiting.serializedBytes() as [UInt8])))
            for try await message in inbound.messages(maxSize: 1 << 20) {
                guard case .binary(let buffer) = message else { continue }
                for command in try codec.decode(Array(buffer.readableBytesView)) where command.i == Int(waiting.i) {
                    if waiting.i != 1 { replies.withLock { $0.append(command) } }
                    guard !pending.isEmpty else {
                        try await outbound.close(.normalClosure, reason: nil)
                        return
                    }
                    waiting = pending.removeFirst()
                    try await outbound.write(.binary(ByteBuffer(bytes: try waiting.serializedBytes() as [UInt8])))
                }
            }
        }
        return replies.withLock { $0 }
    }
}
