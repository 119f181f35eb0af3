import Foundation
import IMCore
import XCTest

@testable import IMProto

/// JSON ⇄ model ⇄ protobuf, for every command shape the server receives or sends.
final class CodecRoundTripTests: XCTestCase {
    let protobuf = ProtobufCommandCodec()
    let json = JSONCommandCodec()

    /// One command of every shape in docs/PROTOCOL.md that the protobuf codec carries.
    static var samples: [Command] {
        var list: [Command] = []
        func add(_ cmd: CommandType, _ op: OpType? = nil, i: Int? = nil, _ fill: (inout Command) -> Void = { _ in }) {
            var command = Command(cmd: cmd, op: op, i: i)
            fill(&command)
            list.append(command)
        }
        // Sessions.
        add(.session, .open, i: 1) {
            $0.peerId = "Tom"
            $0.tag = "Mobile"
            $0.deviceId = "d1"
            $0.r = true
            $0.ua = "js/5.0"
        }
        add(.session, .open, i: 2) {
            $0.peerId = "Tom"
            $0.appId = "app"
            $0.t = 1_763_700_000
            $0.n = "nonce"
            $0.s = "abc123"
        }
        add(.session, .open, i: 3) {
            $0.peerId = "Tom"
            $0.st = "token"
        }
        add(.session, .opened, i: 1) {
            $0.peerId = "Tom"
            $0.st = "token"
            $0.stTtl = 86400
            $0.t = 1_763_700_000_123
        }
        add(.session, .closed, i: 4) {
            $0.code = 4102
            $0.reason = "SIGNATURE_FAILED"
            $0.detail = "stale"
        }
        add(.session, .closed) {
            $0.code = 4111
            $0.reason = "SESSION_CONFLICT"
            $0.detail = "logged in elsewhere"
        }
        add(.session, .close, i: 5)
        add(.echo, i: 6)
        add(.echo, i: 6) { $0.t = 1_763_700_000_999 }
        add(.goaway)
        // Errors.
        add(.error, i: 7) {
            $0.code = 4901
            $0.reason = "MALFORMED_COMMAND"
            $0.detail = "invalid value for field 'm'"
        }
        add(.error, i: 8) {
            $0.code = 4305
            $0.reason = "CONVERSATION_REJECTED_BY_APP"
            $0.appCode = 42
        }
        // Conversations.
        add(.conv, .start, i: 9) {
            $0.m = ["Jerry", "Spike"]
            $0.name = "Cat & mouse"
            $0.attr = ["type": "private", "level": 3]
            $0.unique = true
            $0.t = 1_763_700_000
            $0.n = "n"
            $0.s = "s"
        }
        add(.conv, .start, i: 10) {
            $0.name = "Lobby"
            $0.transient = true
        }
        add(.conv, .start, i: 11) { $0.m = ["Jerry"] }
        add(.conv, .started, i: 9) {
            $0.cid = "c1"
            $0.cdate = 1_763_700_000_123
            $0.unique = true
        }
        add(.conv, .add, i: 12) {
            $0.cid = "c1"
            $0.m = ["Spike"]
        }
        add(.conv, .join, i: 13) { $0.cid = "c1" }
        add(.conv, .added, i: 12) {
            $0.cid = "c1"
            $0.m = ["Spike"]
        }
        add(.conv, .remove, i: 14) {
            $0.cid = "c1"
            $0.m = ["Spike"]
        }
        add(.conv, .quit, i: 15) { $0.cid = "c1" }
        add(.conv, .removed, i: 14) {
            $0.cid = "c1"
            $0.m = ["Spike"]
        }
        // What the member whom Tom let in or out is told.
        for op: OpType in [.joined, .invited, .left, .kicked] {
            add(.conv, op) {
                $0.cid = "c1"
                $0.initBy = "Tom"
            }
        }
        add(.conv, .membersJoined) {
            $0.cid = "c1"
            $0.m = ["Spike", "Tyke"]
            $0.initBy = "Tom"
        }
        add(.conv, .membersLeft) {
            $0.cid = "c1"
            $0.m = ["Spike"]
            $0.initBy = "Tom"
        }
        add(.conv, .count, i: 16) { $0.cid = "c1" }
        add(.conv, .result, i: 16) {
            $0.cid = "c1"
            $0.count = 3
        }
        add(.conv, .query, i: 17) {
            $0.where = ["m": "Tom", "attr.level": ["$gte": 2]]
            $0.sort = "-lm"
            $0.limit = 20
            $0.skip = 5
        }
        add(.conv, .results, i: 17) {
            var first = ConversationInfo(objectId: "c1")
            first.name = "Cat & mouse"
            first.m = ["Jerry", "Tom"]
            first.c = "Tom"
            first.tr = false
            first.unique = true
            first.attr = ["type": "private"]
            first.mu = ["Jerry"]
            first.lm = 1_763_700_001_000
            first.createdAt = 1_763_700_000_123
            first.updatedAt = 1_763_700_000_456
            var room = ConversationInfo(objectId: "c2")
            room.name = "Lobby"
            room.tr = true
            room.createdAt = 0
            $0.results = [first, room]
        }
        add(.conv, .results, i: 18) { $0.results = [] }
        add(.conv, .update, i: 19) {
            $0.cid = "c1"
            $0.attr = ["name": "New", "attr.level": 4, "attr.old": ["__op": "Delete"]]
        }
        add(.conv, .updated, i: 19) {
            $0.cid = "c1"
            $0.udate = 1_763_700_002_000
        }
        add(.conv, .updated) {
            $0.cid = "c1"
            $0.attr = ["name": "New"]
            $0.initBy = "Tom"
            $0.udate = 1_763_700_002_000
        }
        add(.conv, .mute, i: 20) { $0.cid = "c1" }
        add(.conv, .unmute, i: 21) { $0.cid = "c1" }
        add(.conv, .muted, i: 20) { $0.cid = "c1" }
        add(.conv, .unmuted, i: 21) { $0.cid = "c1" }
        // Messages.
        let text = TypedMessage.text("hi 👋").encoded()
        add(.direct, i: 22) {
            $0.cid = "c1"
            $0.msg = text
            $0.r = true
            $0.dt = "dedupe"
            $0.priority = "high"
        }
        add(.direct, i: 23) {
            $0.cid = "c1"
            $0.msg = "plain text"
            $0.transient = true
            $0.mentionPids = ["Jerry"]
            $0.mentionAll = false
        }
        add(.direct, i: 24) {
            $0.cid = "c1"
            $0.msg = text
            $0.priority = "urgent"
        }
        add(.direct) {
            $0.cid = "c1"
            $0.id = "m1"
            $0.msg = text
            $0.fromPeerId = "Tom"
            $0.timestamp = 1_763_700_000_123
            $0.r = true
            $0.offline = true
            $0.hasMore = true
            $0.priority = "low"
        }
        add(.ack, i: 22) {
            $0.uid = "m1"
            $0.t = 1_763_700_000_123
        }
        add(.ack, i: 22) {
            $0.code = 4402
            $0.reason = "MESSAGE_REJECTED_BY_APP"
            $0.detail = "spam"
            $0.appCode = 7
        }
        add(.ack, i: 25)
        add(.ack) {
            $0.cid = "c1"
            $0.mid = "m1"
            $0.t = 1_763_700_000_123
        }
        add(.ack) {
            $0.cid = "c1"
            $0.ids = ["m1", "m2"]
            $0.t = 1_763_700_000_123
        }
        add(.ack) {
            $0.cid = "c1"
            $0.tt = 1_763_700_000_100
            $0.t = 1_763_700_000_123
        }
        add(.rcp) {
            $0.id = "m1"
            $0.cid = "c1"
            $0.t = 1_763_700_000_500
            $0.from = "Jerry"
        }
        add(.rcp) {
            $0.id = "m1"
            $0.cid = "c1"
            $0.t = 1_763_700_000_500
            $0.from = "Jerry"
            $0.read = true
        }
        // History.
        add(.logs, i: 26) {
            $0.cid = "c1"
            $0.limit = 50
            $0.t = 1_763_700_000_000
            $0.mid = "m9"
        }
        add(.logs, i: 27) {
            $0.cid = "c1"
            $0.tt = 1_763_600_000_000
            $0.tmid = "m0"
            $0.reversed = true
        }
        add(.logs, i: 26) {
            $0.cid = "c1"
            var first = LogItem(msgId: "m1", from: "Tom", data: text, timestamp: 1_763_700_000_123)
            first.ackAt = 1_763_700_000_200
            first.readAt = 1_763_700_000_300
            var second = LogItem(msgId: "m2", from: "Jerry", data: #"{"_lctype":-127}"#, timestamp: 1_763_700_000_124)
            second.recalled = true
            second.priority = "high"
            $0.logs = [first, second]
        }
        add(.logs, i: 28) {
            $0.cid = "c1"
            $0.logs = []
        }
        // Unread, read, recall.
        add(.unread) {
            var info = UnreadInfo(cid: "c1", unread: 3)
            info.mid = "m3"
            info.timestamp = 1_763_700_000_125
            info.from = "Jerry"
            info.data = text
            $0.convs = [info, UnreadInfo(cid: "c2", unread: 1)]
        }
        add(.read, i: 29) {
            $0.cid = "c1"
            $0.mid = "m3"
        }
        add(.read, i: 30) {
            $0.cid = "c1"
            $0.t = 1_763_700_000_125
        }
        add(.read) { $0.cid = "c1" }
        add(.read, i: 29) {
            $0.cid = "c1"
            $0.t = 1_763_700_000_125
        }
        add(.patch, .modify, i: 31) {
            var item = PatchItem(cid: "c1", mid: "m1", timestamp: 1_763_700_000_123)
            item.recall = true
            $0.patches = [item]
        }
        add(.patch, .modified, i: 31) { $0.t = 1_763_700_003_000 }
        add(.patch, .modify) {
            var item = PatchItem(cid: "c1", mid: "m1", timestamp: 1_763_700_000_123)
            item.recall = true
            item.data = #"{"_lctype":-127}"#
            item.from = "Tom"
            item.patchTimestamp = 1_763_700_003_000
            $0.patches = [item]
        }
        return list
    }

    func testModelToProtobufAndBack() throws {
        for command in Self.samples {
            let bytes = try protobuf.encode(command)
            XCTAssertEqual(try protobuf.decode(bytes), [command], "\(json.encode(command))")
            let text = try protobuf.encodeBase64(command)
            XCTAssertEqual(try protobuf.decodeBase64(text), [command], "base64 \(json.encode(command))")
        }
    }

    func testJSONToModelToProtobufToJSON() throws {
        for command in Self.samples {
            let text = json.encode(command)
            let model = try json.decode(text)
            let back = try protobuf.decode(try protobuf.encode(model))
            XCTAssertEqual(back.count, 1)
            XCTAssertEqual(JSONValue.parse(json.encode(try XCTUnwrap(back.first))), JSONValue.parse(text), text)
        }
    }

    /// The common commands need no Hookbot-only field: LeanCloud SDKs see all of them.
    func testCommonCommandsUseOnlyLeanCloudFields() throws {
        let lossless = Self.samples.filter {
            ![.invited, .kicked, .muted, .unmuted].contains($0.op) && $0.priority != "urgent"
                && $0.logs?.contains(where: { $0.recalled != nil || $0.priority != nil }) != true
                && $0.logs != [] && $0.results != []
        }
        XCTAssertGreaterThan(lossless.count, 50)
        for command in lossless {
            let generic = try ProtobufCommandCodec.generic(from: command)
            XCTAssertFalse(generic.hasHookbotFields, "\(json.encode(command)) → \(generic.hookbotFields)")
        }
    }

    // MARK: What LeanCloud SDKs see

    func testMembershipEventsUseLeanCloudOps() throws {
        var invited = Command.conv(.invited, "c1")
        invited.initBy = "Tom"
        let generic = try ProtobufCommandCodec.generic(from: invited)
        XCTAssertEqual(generic.op, .joined)
        XCTAssertEqual(JSONValue.parse(generic.hookbotFields), ["op": "invited"])
        var kicked = invited
        kicked.op = .kicked
        XCTAssertEqual(try ProtobufCommandCodec.generic(from: kicked).op, .left)
        var muted = Command(cmd: .conv, op: .muted, i: 3)
        muted.cid = "c1"
        XCTAssertEqual(try ProtobufCommandCodec.generic(from: muted).op, .updated)
        var quit = Command(cmd: .conv, op: .quit, i: 3)
        quit.cid = "c1"
        XCTAssertEqual(try ProtobufCommandCodec.generic(from: quit).op, .leave)
        var joined = Command(cmd: .conv, op: .membersJoined)
        joined.m = ["a"]
        XCTAssertEqual(try ProtobufCommandCodec.generic(from: joined).op.rawValue, 33)
        var modify = Command(cmd: .patch, op: .modify)
        modify.patches = []
        XCTAssertEqual(try ProtobufCommandCodec.generic(from: modify).op.rawValue, 150)
    }

    func testConversationFieldsAsSDKsExpectThem() throws {
        var start = Command(cmd: .conv, op: .start, i: 1)
        start.m = ["Jerry"]
        start.name = "Chat"
        start.attr = ["type": "private"]
        let generic = try ProtobufCommandCodec.generic(from: start)
        XCTAssertEqual(generic.cmd.rawValue, 1)
        XCTAssertEqual(generic.op.rawValue, 30)
        XCTAssertEqual(JSONValue.parse(generic.convMessage.attr.data), ["name": "Chat", "type": "private"])

        var started = Command(cmd: .conv, op: .started, i: 1)
        started.cid = "c1"
        started.cdate = 1_763_700_000_123
        XCTAssertEqual(try ProtobufCommandCodec.generic(from: started).convMessage.cdate, "2025-11-21T04:40:00.123Z")

        var results = Command(cmd: .conv, op: .results, i: 2)
        var info = ConversationInfo(objectId: "c1")
        info.lm = 0
        info.createdAt = -1
        results.results = [info]
        let data = try ProtobufCommandCodec.generic(from: results).convMessage.results.data
        XCTAssertEqual(
            JSONValue.parse(data),
            [["objectId": "c1", "lm": ["__type": "Date", "iso": "1970-01-01T00:00:00.000Z"], "createdAt": "1969-12-31T23:59:59.999Z"]])

        var query = Command(cmd: .conv, op: .query, i: 3)
        query.where = ["objectId": "c1"]
        XCTAssertEqual(try ProtobufCommandCodec.generic(from: query).convMessage.where.data, #"{"objectId":"c1"}"#)
    }

    func testSDKCommandsDecode() throws {
        // A session open as the JS SDK sends it.
        var open = LCProtoGenericCommand()
        open.cmd = .session
        open.op = .open
        open.appID = "app"
        open.peerID = "Tom"
        open.i = 1
        open.sessionMessage.ua = "js/5.0.0"
        open.sessionMessage.r = false
        open.sessionMessage.configBitmap = 1
        open.sessionMessage.lastPatchTime = 5
        var expected = Command(cmd: .session, op: .open, i: 1)
        expected.appId = "app"
        expected.peerId = "Tom"
        expected.ua = "js/5.0.0"
        expected.r = false
        // lastPatchTime asks for the recalls and edits made since (pushed after `opened`).
        expected.lastPatchTime = 5
        XCTAssertEqual(try ProtobufCommandCodec.commands(from: open), [expected])

        // A message with LeanCloud's pushData (what offline receivers' notification says) keeps it.
        var pushing = LCProtoGenericCommand()
        pushing.cmd = .direct
        pushing.peerID = "Tom"
        pushing.i = 2
        pushing.directMessage.cid = "c1"
        pushing.directMessage.msg = "hi"
        pushing.directMessage.pushData = #"{"alert":"Tom: hi","badge":1}"#
        let decoded = try ProtobufCommandCodec.commands(from: pushing).first
        XCTAssertEqual(decoded?.pushData, #"{"alert":"Tom: hi","badge":1}"#)

        // A range acknowledgement moves the cursor to its end.
        var ack = LCProtoGenericCommand()
        ack.cmd = .ack
        ack.peerID = "Jerry"
        ack.ackMessage.cid = "c1"
        ack.ackMessage.fromts = 10
        ack.ackMessage.tots = 20
        XCTAssertEqual(try ProtobufCommandCodec.commands(from: ack).first?.t, 20)
        XCTAssertEqual(try ProtobufCommandCodec.commands(from: ack).first?.tt, 10)

        // A read of several conversations becomes one command each; the serial stays on the last.
        var read = LCProtoGenericCommand()
        read.cmd = .read
        read.i = 9
        for (cid, mid) in [("c1", "m1"), ("c2", "m2")] {
            var tuple = LCProtoReadTuple()
            tuple.cid = cid
            tuple.mid = mid
            tuple.timestamp = 7
            read.readMessage.convs.append(tuple)
        }
        let reads = try ProtobufCommandCodec.commands(from: read)
        XCTAssertEqual(reads.map(\.cid), ["c1", "c2"])
        XCTAssertEqual(reads.map(\.mid), ["m1", "m2"])
        XCTAssertEqual(reads.map(\.i), [nil, 9])

        // Priority numbers.
        var direct = LCProtoGenericCommand()
        direct.cmd = .direct
        direct.priority = 1
        direct.directMessage.cid = "c1"
        direct.directMessage.msg = "x"
        XCTAssertEqual(try ProtobufCommandCodec.commands(from: direct).first?.priority, "high")

        // Dates in results: ISO strings, Date objects and numbers.
        var results = LCProtoGenericCommand.conv(.results)
        results.convMessage.results.data =
            #"[{"objectId":"c1","createdAt":"2025-11-21T04:40:00Z","updatedAt":1000,"lm":{"__type":"Date","iso":"2025-11-21T04:40:00.5Z"}}]"#
        let info = try XCTUnwrap(try ProtobufCommandCodec.commands(from: results).first?.results?.first)
        XCTAssertEqual(info.createdAt, 1_763_700_000_000)
        XCTAssertEqual(info.updatedAt, 1000)
        XCTAssertEqual(info.lm, 1_763_700_000_500)
    }

    func testDates() {
        for ms: Int64 in [0, 1, 999, 1000, -1, -1000, 951_782_400_000, 1_763_700_000_123, 4_102_444_800_000, 253_402_300_799_999] {
            XCTAssertEqual(LeanCloudDate.millis(LeanCloudDate.iso(ms)), ms, LeanCloudDate.iso(ms))
        }
        XCTAssertEqual(LeanCloudDate.iso(951_782_400_000), "2000-02-29T00:00:00.000Z")
        XCTAssertEqual(LeanCloudDate.millis("2000-02-29T00:00:00.123456Z"), 951_782_400_123)
        XCTAssertNil(LeanCloudDate.millis("2000-13-01T00:00:00Z"))
        XCTAssertNil(LeanCloudDate.millis("yesterday"))
    }

    // MARK: Errors

    func testMalformedFrames() {
        func decodeError(_ bytes: [UInt8]) -> CommandDecodingError? {
            do {
                _ = try protobuf.decode(bytes)
                return nil
            } catch { return error }
        }
        XCTAssertEqual(decodeError([0xFF, 0xFF, 0xFF])?.error.code, 4901)
        // A GenericCommand with i but no cmd.
        var noCmd = LCProtoGenericCommand()
        noCmd.i = 5
        let error = decodeError(try! noCmd.serializedBytes())
        XCTAssertEqual(error?.error.code, 4901)
        XCTAssertEqual(error?.requestSerial, 5)
        // Commands and ops Hookbot does not have.
        var room = LCProtoGenericCommand()
        room.cmd = .room
        room.i = 6
        XCTAssertEqual(decodeError(try! room.serializedBytes())?.error.code, 4902)
        let check = LCProtoGenericCommand.conv(.checkShutup)
        XCTAssertEqual(decodeError(try! check.serializedBytes())?.error.code, 4902)
        // Binary message bodies decode as base64 (the server checks them; see MessageEditTests).
        var binary = LCProtoGenericCommand()
        binary.cmd = .direct
        binary.directMessage.binaryMsg = Data([1, 2, 3])
        XCTAssertNil(decodeError(try! binary.serializedBytes()))
        XCTAssertEqual(try protobuf.decode(try binary.serializedBytes() as [UInt8]).first?.binaryMsg, "AQID")
        // Malformed JSON fields.
        var query = LCProtoGenericCommand.conv(.query)
        query.convMessage.where.data = "{not json"
        XCTAssertEqual(decodeError(try! query.serializedBytes())?.error.code, 4901)
        // hookbotFields may not smuggle in cmd messages.
        var smuggled = LCProtoGenericCommand()
        smuggled.cmd = .direct
        smuggled.hookbotFields = #"{"action":"typing"}"#
        XCTAssertEqual(decodeError(try! smuggled.serializedBytes())?.error.code, 4902)
        var wrongType = LCProtoGenericCommand()
        wrongType.cmd = .direct
        wrongType.hookbotFields = #"{"cid":5}"#
        XCTAssertEqual(decodeError(try! wrongType.serializedBytes())?.error.code, 4901)
        XCTAssertThrowsError(try protobuf.decodeBase64("***"))
    }

    /// `i` is an int32 on the wire: a larger varint would be cut to its low 32 bits (2^32 to 0) and the
    /// reply would carry another serial, so it is refused; every int32, negative ones included, decodes
    /// intact, and the encoder refuses a serial it cannot carry.
    func testRequestSerialOutsideInt32IsRefusedNotTruncated() throws {
        var echo = LCProtoGenericCommand()
        echo.cmd = .echo
        let body: [UInt8] = try echo.serializedBytes()
        // Field 5 (key 0x28) with the varint of 2^32, then of 2^32 + 7, then 2^31.
        for varint: [UInt8] in [[0x80, 0x80, 0x80, 0x80, 0x10], [0x87, 0x80, 0x80, 0x80, 0x10], [0x80, 0x80, 0x80, 0x80, 0x08]] {
            XCTAssertThrowsError(try protobuf.decode(body + [0x28] + varint)) { error in
                let decoding = error as? CommandDecodingError
                XCTAssertEqual(decoding?.error.code, 4903)
                XCTAssertEqual(decoding?.requestSerial, nil)
                XCTAssertTrue(decoding?.error.detail?.contains("32-bit") == true, "\(String(describing: decoding))")
            }
        }
        for serial: Int32 in [1, Int32.max, -1, Int32.min] {
            var command = echo
            command.i = serial
            XCTAssertEqual(try protobuf.decode(try command.serializedBytes() as [UInt8]).first?.i, Int(serial))
        }
        var tooLarge = Command(cmd: .echo)
        tooLarge.i = 1 << 32
        XCTAssertThrowsError(try protobuf.encode(tooLarge))
    }

    func testJSONOnlyCommandsAreRefused() {
        var cmdMessage = Command(cmd: .direct)
        cmdMessage.action = "typing"
        cmdMessage.ext = [:]
        XCTAssertThrowsError(try protobuf.encode(cmdMessage))
        XCTAssertThrowsError(try protobuf.encode(Command(cmd: .hook, op: .request)))
    }
}
