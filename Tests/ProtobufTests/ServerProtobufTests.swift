import Foundation
import HookbotTestSupport
import IMCore
import IMProto
import IMServer
import IMSignatures
import XCTest

/// The server driven over LeanCloud's protobuf subprotocols (binary and base64), with the scenarios
/// of the JSON protocol tests.
final class ServerProtobufTests: XCTestCase {
    static let modes: [WireClient.Mode] = [.binary, .base64]

    func testSubprotocolNegotiation() async throws {
        let server = try await startServer()
        func answered(_ offer: String?) throws -> String? {
            let head = try server.upgradeResponse(offering: offer)
            XCTAssertTrue(head.hasPrefix("HTTP/1.1 101"), head)
            return head.split(separator: "\r\n")
                .first { $0.lowercased().hasPrefix("sec-websocket-protocol:") }
                .map { String($0.dropFirst("sec-websocket-protocol:".count)).trimmingCharacters(in: .whitespaces) }
        }
        do {
            XCTAssertEqual(try answered("lc.protobuf2.3"), "lc.protobuf2.3")
            XCTAssertEqual(try answered("lc.proto2base64.3"), "lc.proto2base64.3")
            XCTAssertEqual(try answered("lc.protobuf2.1"), "lc.protobuf2.1")
            XCTAssertEqual(try answered("lc.unknown.9, lc.protobuf2.3, lc.proto2base64.3"), "lc.protobuf2.3")
            XCTAssertEqual(try answered("hookbot.json"), "hookbot.json")
            XCTAssertNil(try answered("lc.unknown.9"))
            XCTAssertNil(try answered(nil))
        }
        // Replies come in the negotiated encoding.
        for mode in [WireClient.Mode.binary, .protobuf("lc.protobuf2.1"), .base64, .json] {
            let client = try await WireClient.connect(port: server.port, mode: mode)
            let echo = try await client.request(Command(cmd: .echo))
            XCTAssertNotNil(echo.t, "\(mode)")
            let binary: Bool = if case .protobuf = mode { true } else { false }
            XCTAssertEqual(client.receivedFrameKinds, [binary], "\(mode)")
            await client.close()
        }
    }

    func testLoginAndSessionReply() async throws {
        let server = try await startServer()
        for mode in Self.modes {
            let client = try await WireClient.connect(port: server.port, mode: mode)
            // A session open as LeanCloud's JS SDK builds it.
            var open = LCProtoGenericCommand()
            open.cmd = .session
            open.op = .open
            open.appID = "app"
            open.peerID = "Tom"
            open.sessionMessage.ua = "js/5.0.0"
            open.sessionMessage.r = false
            open.sessionMessage.configBitmap = 1
            let opened = try await client.request(open)
            XCTAssertEqual(opened.op, .opened, "\(mode)")
            XCTAssertEqual(opened.peerId, "Tom")
            XCTAssertNotNil(opened.st)
            XCTAssertEqual(opened.stTtl, 86400)
            XCTAssertNotNil(opened.t)
            // Before login other commands are refused with an error command.
            let anonymous = try await WireClient.connect(port: server.port, mode: mode)
            var start = Command(cmd: .conv, op: .start)
            start.m = ["Jerry"]
            let refused = try await anonymous.request(start)
            XCTAssertEqual(refused.cmd, .error)
            XCTAssertEqual(refused.code, 4105)
            await anonymous.close()
            await client.close()
        }
    }

    func testSessionTokenReuseWithSignatures() async throws {
        let server = try await startServer {
            $0.appID = "app"
            $0.masterKey = "secret"
        }
        let signer = Signer(appID: "app", masterKey: "secret")
        for mode in Self.modes {
            let first = try await WireClient.connect(port: server.port, mode: mode)
            var open = Command(cmd: .session, op: .open)
            open.peerId = "Tom"
            open.t = Int64(Date().timeIntervalSince1970)
            open.n = UUID().uuidString
            open.s = signer.sign(.open, clientID: "Tom", timestamp: open.t!, nonce: open.n!)
            let opened = try await first.request(open)
            XCTAssertEqual(opened.op, .opened, "\(mode)")
            let token = try XCTUnwrap(opened.st)
            await first.close()

            // Reconnect as an SDK does: r = true and the session token instead of a signature.
            let second = try await WireClient.connect(port: server.port, mode: mode)
            var reopen = Command(cmd: .session, op: .open)
            reopen.peerId = "Tom"
            reopen.r = true
            reopen.st = token
            let value1 = try await second.request(reopen).op
            XCTAssertEqual(value1, .opened)
            await second.close()

            let third = try await WireClient.connect(port: server.port, mode: mode)
            reopen.st = "not-a-token"
            let expired = try await third.request(reopen)
            XCTAssertEqual(expired.op, .closed)
            XCTAssertEqual(expired.code, 4112)
            await third.close()
        }
    }

    func testConversationsMessagesReceiptsHistoryQueryRecall() async throws {
        for mode in Self.modes {
            let server = try await ServerHarness.start()
            let tom = try await WireClient.login("Tom", port: server.port, mode: mode)
            let jerry = try await WireClient.login("Jerry", port: server.port, mode: mode)

            // conv start: the invited member hears of it.
            let cid = try await tom.startConversation(members: ["Jerry"], name: "Cat & mouse", attr: ["type": "private"])
            let invited = try await jerry.next { $0.cmd == .conv && $0.op == .invited }
            XCTAssertEqual(invited.cid, cid, "\(mode)")
            XCTAssertEqual(invited.initBy, "Tom")
            let joined = try await jerry.next { $0.cmd == .conv && $0.op == .membersJoined }
            XCTAssertEqual(Set(joined.m ?? []), ["Tom", "Jerry"])

            // conv add / remove.
            let add = Command.conv(.add, cid, members: ["Spike"])
            let added = try await tom.request(add)
            XCTAssertEqual(added.op, .added)
            XCTAssertEqual(added.m, ["Spike"])
            let value2 = try await jerry.next { $0.op == .membersJoined }.m
            XCTAssertEqual(value2, ["Spike"])
            let remove = Command.conv(.remove, cid, members: ["Spike"])
            let removed = try await tom.request(remove)
            XCTAssertEqual(removed.op, .removed)
            let value3 = try await jerry.next { $0.op == .membersLeft }.m
            XCTAssertEqual(value3, ["Spike"])

            // A typed message with a receipt.
            let ack = try await tom.sendText("Hello Jerry", to: cid, receipt: true)
            XCTAssertEqual(ack.cmd, .ack)
            let mid = try XCTUnwrap(ack.uid)
            let sentAt = try XCTUnwrap(ack.t)
            let message = try await jerry.nextMessage()
            XCTAssertEqual(message.text, "Hello Jerry")
            XCTAssertEqual(message.id, mid)
            XCTAssertEqual(message.fromPeerId, "Tom")
            XCTAssertEqual(message.timestamp, sentAt)
            XCTAssertEqual(message.r, true)

            // Delivery receipt.
            var delivered = Command(cmd: .ack)
            delivered.cid = cid
            delivered.mid = mid
            delivered.t = sentAt
            jerry.send(delivered)
            let rcp = try await tom.next { $0.cmd == .rcp && $0.read != true }
            XCTAssertEqual(rcp.id, mid)
            XCTAssertEqual(rcp.from, "Jerry")

            // Read receipt, as SDKs send reads (ReadTuple list).
            var read = LCProtoGenericCommand()
            read.cmd = .read
            var tuple = LCProtoReadTuple()
            tuple.cid = cid
            tuple.mid = mid
            tuple.timestamp = sentAt
            read.readMessage.convs = [tuple]
            let readReply = try await jerry.request(read)
            XCTAssertEqual(readReply.cmd, .read)
            let readRcp = try await tom.next { $0.cmd == .rcp && $0.read == true }
            XCTAssertEqual(readRcp.cid, cid)
            XCTAssertEqual(readRcp.from, "Jerry")

            // Another typed message: an image.
            var image = Command(cmd: .direct)
            image.cid = cid
            image.msg = #"{"_lctype":-2,"_lcfile":{"url":"https://example.com/a.png","metaData":{"width":10,"height":20}}}"#
            image.priority = "high"
            _ = try await jerry.request(image)
            let received = try await tom.nextMessage()
            // The server gives a URL-only file the objId of an external file record (LeanCloud's
            // typed-messages plugin needs one); the rest arrives as sent.
            guard case .object(var got) = JSONValue.parse(received.msg ?? ""), case .object(var file) = got["_lcfile"],
                case .string(let objID) = file["objId"]
            else { return XCTFail("no _lcfile.objId in \(received.msg ?? "nil")") }
            XCTAssertFalse(objID.isEmpty)
            file["objId"] = nil
            got["_lcfile"] = .object(file)
            XCTAssertEqual(JSONValue.object(got), JSONValue.parse(image.msg ?? ""))
            XCTAssertEqual(received.priority, "high")

            // History.
            var logs = Command(cmd: .logs)
            logs.cid = cid
            logs.limit = 10
            let page = try await tom.request(logs)
            XCTAssertEqual(page.logs?.map(\.from), ["Tom", "Jerry"])
            XCTAssertEqual(page.logs?.first?.msgId, mid)
            XCTAssertEqual(page.logs?.first?.timestamp, sentAt)
            XCTAssertEqual(page.logs?.first.flatMap { TypedMessage.decode($0.data)?.text }, "Hello Jerry")

            // Query.
            var query = Command(cmd: .conv, op: .query)
            query.where = ["objectId": .string(cid)]
            let results = try await jerry.request(query)
            XCTAssertEqual(results.op, .results)
            let conversation = try XCTUnwrap(results.results?.first)
            XCTAssertEqual(conversation.objectId, cid)
            XCTAssertEqual(conversation.name, "Cat & mouse")
            XCTAssertEqual(conversation.attr, ["type": "private"])
            XCTAssertEqual(Set(conversation.m ?? []), ["Tom", "Jerry"])
            XCTAssertNotNil(conversation.createdAt)

            // Recall.
            let modified = try await tom.request(.recall(ack, in: cid))
            XCTAssertEqual(modified.op, .modified)
            XCTAssertNotNil(modified.t)
            let patch = try await jerry.next { $0.cmd == .patch && $0.op == .modify }
            XCTAssertEqual(patch.patches?.first?.mid, mid)
            XCTAssertEqual(patch.patches?.first?.recall, true)
            XCTAssertNotNil(patch.patches?.first?.patchTimestamp)
            let after = try await tom.request(logs)
            XCTAssertEqual(after.logs?.first?.recalled, true)

            // conv update: the other member gets the patch.
            var update = Command.conv(.update, cid)
            update.attr = ["name": "Renamed", "attr.level": 2]
            let value4 = try await tom.request(update).op
            XCTAssertEqual(value4, .updated)
            let updated = try await jerry.next { $0.cmd == .conv && $0.op == .updated && $0.i == nil }
            XCTAssertEqual(updated.attr, ["name": "Renamed", "attr.level": 2])

            // Mute.
            let mute = Command.conv(.mute, cid)
            let value5 = try await jerry.request(mute).op
            XCTAssertEqual(value5, .muted)

            // Quit: Tom is told he left; Jerry that members left.
            let quit = Command.conv(.quit, cid)
            let value6 = try await tom.request(quit).m
            XCTAssertEqual(value6, ["Tom"])
            let value7 = try await jerry.next { $0.op == .membersLeft }.m
            XCTAssertEqual(value7, ["Tom"])

            await tom.close()
            await jerry.close()
            await server.stop()
        }
    }

    func testVersion3LoginGetsUnreadNoticesInsteadOfOfflineMessages() async throws {
        for mode in Self.modes {
            let server = try await ServerHarness.start()
            let tom = try await WireClient.login("Tom", port: server.port, mode: mode)
            let cid = try await tom.startConversation(members: ["Jerry"])
            let one = try await tom.sendText("one", to: cid, receipt: true)
            let two = try await tom.sendText("two", to: cid)
            let jerry = try await WireClient.login("Jerry", port: server.port, mode: mode)
            let unread = try await jerry.next { $0.cmd == .unread }
            let tuple = try XCTUnwrap(unread.convs?.first, "\(mode)")
            XCTAssertEqual(unread.convs?.count, 1)
            XCTAssertEqual(tuple.cid, cid)
            XCTAssertEqual(tuple.unread, 2)
            XCTAssertEqual(tuple.mid, two.uid)
            XCTAssertEqual(tuple.timestamp, two.t)
            XCTAssertEqual(tuple.from, "Tom")
            XCTAssertEqual(tuple.data.flatMap(TypedMessage.decode)?.text, "two")
            XCTAssertNil(tuple.mentioned)
            XCTAssertNotNil(unread.t, "notifTime")
            // Version 3 clients count from the notice and pull with logs: nothing is pushed as offline.
            let pushed = await jerry.settle { $0.cmd == .direct }
            XCTAssertEqual(pushed.count, 0, "\(mode): offline messages pushed on a .3 login")
            var logs = Command(cmd: .logs)
            logs.cid = cid
            let page = try await jerry.request(logs)
            XCTAssertEqual(page.logs?.map(\.msgId), [one.uid, two.uid].compactMap { $0 })
            // Messages sent while online are pushed as usual.
            try await tom.sendText("three", to: cid)
            let live = try await jerry.nextMessage()
            XCTAssertEqual(live.text, "three")
            XCTAssertNil(live.offline)
            await jerry.close()
            await tom.close()
            await server.stop()
        }
    }

    func testVersion1LoginPushesOfflineMessagesAndRangeAcksMoveTheCursor() async throws {
        let server = try await startServer()
        let v1 = WireClient.Mode.protobuf("lc.protobuf2.1")
        let tom = try await WireClient.login("Tom", port: server.port, mode: .json)
        let cid = try await tom.startConversation(members: ["Jerry"])
        let one = try await tom.sendText("one", to: cid, receipt: true)
        let two = try await tom.sendText("two", to: cid)

        // First login: both messages are pushed as offline messages after the unread notice.
        let jerry = try await WireClient.login("Jerry", port: server.port, mode: v1)
        let unread = try await jerry.next { $0.cmd == .unread }
        XCTAssertEqual(unread.convs?.first?.unread, 2)
        let first = try await jerry.nextMessage()
        let second = try await jerry.nextMessage()
        XCTAssertEqual([first.text, second.text], ["one", "two"])
        XCTAssertEqual([first.offline, second.offline], [true, true])
        // The SDK acknowledges a range of timestamps with no ids (and no receipt was asked for "two").
        var ack = LCProtoGenericCommand()
        ack.cmd = .ack
        ack.ackMessage.cid = cid
        ack.ackMessage.fromts = try XCTUnwrap(first.timestamp)
        ack.ackMessage.tots = try XCTUnwrap(second.timestamp)
        jerry.send(ack)
        _ = try await jerry.request(Command(cmd: .echo))
        // Only the message that asked for a receipt produces one.
        let receipt = try await tom.next { $0.cmd == .rcp }
        XCTAssertEqual(receipt.id, one.uid)
        XCTAssertEqual(receipt.from, "Jerry")
        let awaited1 = await tom.settle { $0.cmd == .rcp }.count
        XCTAssertEqual(awaited1, 0)
        XCTAssertNotNil(two.uid)
        await jerry.close()

        // Second login: nothing is delivered again.
        let again = try await WireClient.login("Jerry", port: server.port, mode: v1)
        let awaited2 = await again.settle { $0.cmd == .direct }.count
        XCTAssertEqual(awaited2, 0)
        await again.close()

        // Third login: only the message sent meanwhile.
        try await tom.sendText("three", to: cid)
        let third = try await WireClient.login("Jerry", port: server.port, mode: v1)
        let missed = try await third.nextMessage()
        XCTAssertEqual(missed.text, "three")
        XCTAssertEqual(missed.offline, true)
        let awaited3 = await third.settle { $0.cmd == .direct }.count
        XCTAssertEqual(awaited3, 0)
        await third.close()
        await tom.close()
    }

    func testJSONAndProtobufClientsInOneConversation() async throws {
        let server = try await startServer()
        let tom = try await WireClient.login("Tom", port: server.port, mode: .json)
        let jerry = try await WireClient.login("Jerry", port: server.port, mode: .binary)
        let spike = try await WireClient.login("Spike", port: server.port, mode: .base64)
        let cid = try await jerry.startConversation(members: ["Tom", "Spike"])
        let clients = [tom, jerry, spike]
        for sender in clients {
            let ack = try await sender.sendText("from \(sender.mode)", to: cid)
            for receiver in clients where receiver !== sender {
                let message = try await receiver.nextMessage()
                XCTAssertEqual(message.text, "from \(sender.mode)", "\(sender.mode) → \(receiver.mode)")
                XCTAssertEqual(message.id, ack.uid)
                XCTAssertEqual(message.timestamp, ack.t)
            }
        }

        // Cmd messages are JSON-only: JSON members get them, protobuf members do not.
        var typing = Command(cmd: .direct)
        typing.cid = cid
        typing.action = "typing"
        typing.ext = ["on": true]
        let tyke = try await WireClient.login("Tyke", port: server.port, mode: .json)
        let join = Command.conv(.join, cid)
        _ = try await tyke.request(join)
        let value8 = try await tom.request(typing).code
        XCTAssertNil(value8)
        let value9 = try await tyke.next { $0.action == "typing" }.fromPeerId
        XCTAssertEqual(value9, "Tom")
        let leaked = await jerry.settle { $0.cmd == .direct } + (await spike.settle { $0.cmd == .direct })
        XCTAssertEqual(leaked.count, 0)
        XCTAssertEqual(jerry.undecodableFrames + spike.undecodableFrames, 0)
        await tyke.close()
        for client in clients { await client.close() }
    }

    func testMalformedAndOversizedFramesKeepTheConnection() async throws {
        let server = try await startServer { $0.maxMessageBytes = 1000 }
        for mode in Self.modes {
            let tom = try await WireClient.login("Tom", port: server.port, mode: mode)
            // Garbage in the connection's own framing.
            switch mode {
            case .base64: tom.sendFrame(.text("%%% not base64 %%%"))
            default: tom.sendFrame(.binary([0xFF, 0xFF, 0xFF, 0x01]))
            }
            let error = try await tom.next { $0.cmd == .error }
            XCTAssertEqual(error.code, 4901, "\(mode)")
            XCTAssertNotNil(error.detail)
            // A valid protobuf message that is not a usable command: the serial is answered.
            var room = LCProtoGenericCommand()
            room.cmd = .room
            let unknown = try await tom.request(room)
            XCTAssertEqual(unknown.cmd, .error)
            XCTAssertEqual(unknown.code, 4902)
            // The wrong frame type.
            if case .protobuf = mode {
                tom.sendFrame(.text(#"{"cmd":"echo"}"#))
                let value10 = try await tom.next { $0.cmd == .error }.code
                XCTAssertEqual(value10, 4901)
            }
            // Still usable.
            let value11 = try await tom.request(Command(cmd: .echo)).t
            XCTAssertNotNil(value11)
            let cid = try await tom.startConversation(members: ["Jerry"])
            // A body over the limit.
            var big = Command(cmd: .direct)
            big.cid = cid
            big.msg = TypedMessage.text(String(repeating: "x", count: 2000)).encoded()
            let refused = try await tom.request(big)
            XCTAssertEqual(refused.cmd, .ack)
            XCTAssertEqual(refused.code, 4109)
            XCTAssertNotNil(refused.detail)
            let value12 = try await tom.sendText("small", to: cid).code
            XCTAssertEqual(value12, nil)
            XCTAssertFalse(tom.isClosed)
            await tom.close()
        }
        // A serial above the proto's int32 is refused (it would be cut to 0), and the connection stays.
        let large = try await WireClient.login("Spike", port: server.port, mode: .binary)
        var echo = LCProtoGenericCommand()
        echo.cmd = .echo
        large.sendFrame(.binary(try echo.serializedBytes() + [0x28, 0x80, 0x80, 0x80, 0x80, 0x10]))
        let refusedSerial = try await large.next { $0.cmd == .error }
        XCTAssertEqual(refusedSerial.code, 4903)
        XCTAssertNil(refusedSerial.i)
        let zeroSerials = await large.settle { $0.i == 0 }
        XCTAssertEqual(zeroSerials.count, 0, "no reply carries i = 0")
        echo.i = Int32.max
        large.send(echo)
        let value14 = try await large.next { $0.cmd == .echo }.i
        XCTAssertEqual(value14, Int(Int32.max))
        await large.close()
        // JSON connections still refuse binary frames.
        let json = try await WireClient.login("Jerry", port: server.port, mode: .json)
        json.sendFrame(.binary([1, 2, 3]))
        let value13 = try await json.next { $0.cmd == .error }.code
        XCTAssertEqual(value13, 4901)
        await json.close()
    }
}
