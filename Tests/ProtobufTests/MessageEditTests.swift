import Foundation
import HookbotTestSupport
import IMCore
import IMProto
import XCTest

/// Message edits (`conversation.update(old, new)`: `patch modify` without `recall`) and binary messages
/// (`binaryMsg`), through JSON, binary protobuf and base64 protobuf, field by field.
final class MessageEditTests: XCTestCase {
    /// The `patch modify` the JS SDK's `conversation.update` sends.
    private func sdkEdit(cid: String, mid: String, timestamp: Int64, data: String? = nil, binary: Data? = nil, mentionPids: [String] = [])
        -> LCProtoGenericCommand
    {
        var item = LCProtoPatchItem(cid: cid, mid: mid, timestamp: timestamp)
        item.recall = false
        if let data { item.data = data }
        if let binary { item.binaryMsg = binary }
        item.mentionPids = mentionPids
        var patch = LCProtoGenericCommand.patch([item])
        patch.patchMessage.lastPatchTime = 0
        return patch
    }

    private func jsonEdit(cid: String, mid: String, timestamp: Int64, data: String) -> Command {
        var patch = Command(cmd: .patch, op: .modify)
        var item = PatchItem(cid: cid, mid: mid, timestamp: timestamp)
        item.data = data
        patch.patches = [item]
        return patch
    }

    func testAnEditReachesEveryCodecHistoryAndOfflineDelivery() async throws {
        let server = try await startServer()
        let tom = try await WireClient.login("Tom", port: server.port, mode: .binary)
        let jerry = try await WireClient.login("Jerry", port: server.port, mode: .json)
        let spike = try await WireClient.login("Spike", port: server.port, mode: .base64)
        let cid = try await tom.startConversation(members: ["Jerry", "Spike", "Tyke"])
        let sent = try await tom.sendText("helo", to: cid)
        let mid = try XCTUnwrap(sent.uid)
        let t = try XCTUnwrap(sent.t)
        _ = try await jerry.nextMessage()
        _ = try await spike.nextMessage()

        let newText = TypedMessage.text("hello @Jerry").encoded()
        let edited = try await tom.request(sdkEdit(cid: cid, mid: mid, timestamp: t, data: newText, mentionPids: ["Jerry"]))
        XCTAssertEqual(edited.cmd, .patch)
        XCTAssertEqual(edited.op, .modified)
        let patchT = try XCTUnwrap(edited.t)
        XCTAssertGreaterThanOrEqual(patchT, t)

        // JSON: the patch modify event, field by field.
        let event = try await jerry.next { $0.cmd == .patch && $0.op == .modify }
        let item = try XCTUnwrap(event.patches?.first)
        XCTAssertEqual(event.patches?.count, 1)
        XCTAssertEqual(item.cid, cid)
        XCTAssertEqual(item.mid, mid)
        XCTAssertEqual(item.timestamp, t)
        XCTAssertNil(item.recall)
        XCTAssertEqual(item.data, newText)
        XCTAssertNil(item.binaryMsg)
        XCTAssertEqual(item.from, "Tom")
        XCTAssertEqual(item.patchTimestamp, patchT)
        XCTAssertEqual(item.mentionPids, ["Jerry"])
        // Protobuf (base64): LeanCloud's PatchItem, as the SDK's MESSAGE_UPDATE handler reads it.
        let sdkEvent = try await spike.next { $0.cmd == .patch && $0.op == .modify }
        let raw = try XCTUnwrap(try ProtobufCommandCodec.generic(from: sdkEvent).patchMessage.patches.first)
        XCTAssertEqual(raw.cid, cid)
        XCTAssertEqual(raw.mid, mid)
        XCTAssertEqual(raw.timestamp, t)
        XCTAssertFalse(raw.hasRecall && raw.recall)
        XCTAssertEqual(raw.data, newText)
        XCTAssertFalse(raw.hasBinaryMsg)
        XCTAssertEqual(raw.from, "Tom")
        XCTAssertEqual(raw.patchTimestamp, patchT)
        XCTAssertEqual(raw.mentionPids, ["Jerry"])
        XCTAssertFalse(raw.hasPatchCode)

        // A JSON edit of the same message by its sender: a second version, newer patch time.
        let tomJSON = try await WireClient.login("Tom", port: server.port, mode: .json) { $0.tag = nil }
        let second = TypedMessage.text("hello, all").encoded()
        let again = try await tomJSON.request(jsonEdit(cid: cid, mid: mid, timestamp: t, data: second))
        XCTAssertEqual(again.op, .modified)
        let secondT = try XCTUnwrap(again.t)
        XCTAssertGreaterThan(secondT, patchT)

        // History: the latest version with its patch time, in both codecs.
        var logs = Command(cmd: .logs)
        logs.cid = cid
        let jsonLogs = try await jerry.request(logs).logs ?? []
        XCTAssertEqual(jsonLogs.map(\.msgId), [mid])
        XCTAssertEqual(jsonLogs.first?.data, second)
        XCTAssertEqual(jsonLogs.first?.patchTimestamp, secondT)
        XCTAssertNil(jsonLogs.first?.mentionPids)
        XCTAssertNil(jsonLogs.first?.bin)
        let sdkLogs = try await spike.request(logs)
        let rawLog = try XCTUnwrap(try ProtobufCommandCodec.generic(from: sdkLogs).logsMessage.logs.first)
        XCTAssertEqual(rawLog.data, second)
        XCTAssertEqual(rawLog.patchTimestamp, secondT)
        XCTAssertFalse(rawLog.hasBin)

        // Tyke was offline all along: the backlog carries the latest version and its patch time.
        for mode in [WireClient.Mode.protobuf("lc.protobuf2.1"), .json] {
            let tyke = try await WireClient.login("Tyke", port: server.port, mode: mode)
            let offline = try await tyke.nextMessage()
            XCTAssertEqual(offline.id, mid, "\(mode)")
            XCTAssertEqual(offline.msg, second, "\(mode)")
            XCTAssertEqual(offline.patchTimestamp, secondT, "\(mode)")
            XCTAssertEqual(offline.offline, true, "\(mode)")
            await tyke.close()
        }
        // Version 3 logins get the unread notice instead: its last message is the latest version too.
        let tyke = try await WireClient.login("Tyke", port: server.port, mode: .binary)
        let unread = try await tyke.next { $0.cmd == .unread }
        let tuple = try XCTUnwrap(try ProtobufCommandCodec.generic(from: unread).unreadMessage.convs.first)
        XCTAssertEqual(tuple.mid, mid)
        XCTAssertEqual(tuple.data, second)
        XCTAssertEqual(tuple.patchTimestamp, secondT)
        await tyke.close()
        for client in [tom, jerry, spike, tomJSON] { await client.close() }
    }

    func testWhoMayEditAndWhen() async throws {
        let server = try await startServer { $0.recallWindow = 1 }
        let tom = try await WireClient.login("Tom", port: server.port, mode: .binary)
        let jerry = try await WireClient.login("Jerry", port: server.port, mode: .json)
        let cid = try await tom.startConversation(members: ["Jerry"])
        let sent = try await tom.sendText("one", to: cid)
        let mid = try XCTUnwrap(sent.uid)
        let t = try XCTUnwrap(sent.t)
        // Only the sender (4403), only a message of that conversation (4404).
        let notMine = try await jerry.request(jsonEdit(cid: cid, mid: mid, timestamp: t, data: "two"))
        XCTAssertEqual(notMine.cmd, .error)
        XCTAssertEqual(notMine.code, 4403)
        XCTAssertEqual(notMine.reason, "MESSAGE_OWNERSHIP_REQUIRED")
        let elsewhere = try await tom.request(sdkEdit(cid: "nope", mid: mid, timestamp: t, data: "two"))
        XCTAssertEqual(elsewhere.code, 4404)
        // Neither content nor both (4903), nor more than the size limit (4109).
        let missing = try await tom.request(.patch([LCProtoPatchItem(cid: cid, mid: mid, timestamp: t)]))
        XCTAssertEqual(missing.code, 4903)
        let both = try await tom.request(sdkEdit(cid: cid, mid: mid, timestamp: t, data: "a", binary: Data([1])))
        XCTAssertEqual(both.code, 4903)
        let huge = try await tom.request(sdkEdit(cid: cid, mid: mid, timestamp: t, data: String(repeating: "x", count: 64 * 1024 + 1)))
        XCTAssertEqual(huge.code, 4109)
        // A muted member cannot edit either (4905, as for a send).
        let jerrys = try await jerry.sendText("mine", to: cid)
        let mute = Command.conv(.addShutup, cid, members: ["Jerry"])
        let muted = try await tom.request(mute)
        XCTAssertNil(muted.code, "\(muted)")
        let mutedEdit = try await jerry.request(
            jsonEdit(cid: cid, mid: try XCTUnwrap(jerrys.uid), timestamp: try XCTUnwrap(jerrys.t), data: "still mine"))
        XCTAssertEqual(mutedEdit.code, 4905)
        // A recalled message is not edited (4406).
        let other = try await tom.sendText("gone", to: cid)
        let recalled = try await tom.request(.recall(other, in: cid))
        XCTAssertEqual(recalled.op, .modified)
        let afterRecall = try await tom.request(
            sdkEdit(cid: cid, mid: try XCTUnwrap(other.uid), timestamp: try XCTUnwrap(other.t), data: "back"))
        XCTAssertEqual(afterRecall.code, 4406)
        // After the window (the recall window, 1 s here): 4406 MESSAGE_EDIT_DISABLED, and the text stays.
        try await Task.sleep(for: .milliseconds(1100))
        let late = try await tom.request(sdkEdit(cid: cid, mid: mid, timestamp: t, data: "late"))
        XCTAssertEqual(late.code, 4406)
        XCTAssertEqual(late.reason, "MESSAGE_EDIT_DISABLED")
        var logs = Command(cmd: .logs)
        logs.cid = cid
        let history = try await jerry.request(logs).logs ?? []
        XCTAssertEqual(history.first { $0.msgId == mid }?.data, TypedMessage.text("one").encoded())
        XCTAssertNil(history.first { $0.msgId == mid }?.patchTimestamp)
        await tom.close()
        await jerry.close()
    }

    func testBinaryMessagesAreBytesForProtobufAndBase64ForJSON() async throws {
        let server = try await ServerHarness.start { $0.maxMessageBytes = 1000 }
        let tom = try await WireClient.login("Tom", port: server.port, mode: .binary)
        let jerry = try await WireClient.login("Jerry", port: server.port, mode: .json)
        let spike = try await WireClient.login("Spike", port: server.port, mode: .base64)
        let cid = try await tom.startConversation(members: ["Jerry", "Spike"])
        let bytes = Data([0, 1, 2, 0xFE, 0xFF] + Array(repeating: 7, count: 995))

        // Protobuf sender: binaryMsg bytes.
        var send = LCProtoGenericCommand()
        send.cmd = .direct
        send.directMessage.cid = cid
        send.directMessage.binaryMsg = bytes
        let ack = try await tom.request(send)
        XCTAssertEqual(ack.cmd, .ack)
        XCTAssertNil(ack.code)
        let mid = try XCTUnwrap(ack.uid)
        let toJSON = try await jerry.nextMessage()
        XCTAssertEqual(toJSON.id, mid)
        XCTAssertNil(toJSON.msg)
        XCTAssertEqual(toJSON.binaryMsg, bytes.base64EncodedString())
        let toSDK = try await spike.nextMessage()
        let rawDirect = try ProtobufCommandCodec.generic(from: toSDK).directMessage
        XCTAssertEqual(rawDirect.binaryMsg, bytes)
        XCTAssertFalse(rawDirect.hasMsg)
        XCTAssertEqual(rawDirect.fromPeerID, "Tom")

        // JSON sender: base64 in, bytes out to protobuf clients.
        var direct = Command(cmd: .direct)
        direct.cid = cid
        direct.binaryMsg = Data([9, 8, 7]).base64EncodedString()
        let jsonAck = try await jerry.request(direct)
        XCTAssertNil(jsonAck.code)
        let fromJSON = try await tom.nextMessage()
        XCTAssertEqual(try ProtobufCommandCodec.generic(from: fromJSON).directMessage.binaryMsg, Data([9, 8, 7]))

        // History: bin with base64 data (LeanCloud's LogItem), in both codecs.
        var logs = Command(cmd: .logs)
        logs.cid = cid
        let jsonLogs = try await jerry.request(logs).logs ?? []
        XCTAssertEqual(jsonLogs.count, 2)
        XCTAssertEqual(jsonLogs.first?.bin, true)
        XCTAssertEqual(jsonLogs.first?.data, bytes.base64EncodedString())
        let rawLogs = try ProtobufCommandCodec.generic(from: try await spike.request(logs)).logsMessage.logs
        XCTAssertEqual(rawLogs.map(\.bin), [true, true])
        XCTAssertEqual(rawLogs.last.flatMap { Data(base64Encoded: $0.data) }, Data([9, 8, 7]))

        // The size limit counts bytes (1000 fit above; 1001 do not), and JSON's base64 must be base64.
        send.directMessage.binaryMsg = bytes + Data([1])
        let tooBig = try await tom.request(send)
        XCTAssertEqual(tooBig.code, 4109)
        direct.binaryMsg = "not base64!"
        let garbled = try await jerry.request(direct)
        XCTAssertEqual(garbled.code, 4903)
        direct.binaryMsg = "AAEC"
        direct.msg = "text"
        let both = try await jerry.request(direct)
        XCTAssertEqual(both.code, 4903)

        // An edit to binary content reaches JSON as base64, protobuf as bytes.
        let edited = try await tom.request(sdkEdit(cid: cid, mid: mid, timestamp: try XCTUnwrap(toJSON.timestamp), binary: Data([42])))
        XCTAssertEqual(edited.op, .modified)
        let jsonPatch = try await jerry.next { $0.cmd == .patch }
        XCTAssertEqual(jsonPatch.patches?.first?.binaryMsg, Data([42]).base64EncodedString())
        XCTAssertNil(jsonPatch.patches?.first?.data)
        let sdkPatch = try await spike.next { $0.cmd == .patch }
        XCTAssertEqual(try ProtobufCommandCodec.generic(from: sdkPatch).patchMessage.patches.first?.binaryMsg, Data([42]))

        // Offline delivery after a restart (stored bytes survive): a protobuf client gets bytes.
        let restarted = try await server.restarted()
        let tyke = try await WireClient.login("Tom", port: restarted.port, mode: .protobuf("lc.protobuf2.1"))
        let backlog = try await tyke.nextMessage()
        XCTAssertEqual(try ProtobufCommandCodec.generic(from: backlog).directMessage.binaryMsg, Data([9, 8, 7]))
        for client in [tom, jerry, spike, tyke] { await client.close() }
        await restarted.stop()
    }
}
