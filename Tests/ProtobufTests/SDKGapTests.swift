import Foundation
import HookbotTestSupport
import IMCore
import IMProto
import IMServer
import IMSignatures
import XCTest

/// What LeanCloud's JS SDK v5 sends that the server once answered wrongly (the SDK survey's failing rows):
/// a join signed as `invite`, `$size`, compact queries, will messages, closed and typed history ranges,
/// recalls by the owner and managers, patches missed while offline, every member's receipts and `read`
/// without `i`. Each through JSON, binary protobuf and base64 protobuf.
final class SDKGapTests: XCTestCase {
    private static let modes: [WireClient.Mode] = [.json, .binary, .base64]
    private let signer = Signer(appID: "app", masterKey: "master-secret")

    private func signedLogin(_ clientID: String, port: Int, mode: WireClient.Mode) async throws -> WireClient {
        let signature = signer.signature(for: .open, clientID: clientID)
        return try await WireClient.login(clientID, port: port, mode: mode) {
            $0.t = signature.timestamp
            $0.n = signature.nonce
            $0.s = signature.signature
        }
    }

    /// The JS SDK's `join()`: `conv add` of itself, signed by a factory called with action `invite`.
    func testAJoinSignedAsLeanCloudsSelfInviteIsAccepted() async throws {
        let server = try await startServer {
            $0.appID = "app"
            $0.masterKey = "master-secret"
        }
        let tom = try await signedLogin("Tom", port: server.port, mode: .json)
        var start = Command(cmd: .conv, op: .start)
        start.m = ["Tom", "Jerry"]
        let startSignature = signer.signature(for: .startConversation(members: ["Tom", "Jerry"]), clientID: "Tom")
        start.t = startSignature.timestamp
        start.n = startSignature.nonce
        start.s = startSignature.signature
        let started = try await tom.request(start)
        let cid = try XCTUnwrap(started.cid, "\(started)")

        for (index, mode) in Self.modes.enumerated() {
            let outsider = "Spike\(index)"
            let client = try await signedLogin(outsider, port: server.port, mode: mode)
            func add(_ action: IMSignatureAction, as signer: String = outsider) -> Command {
                var add = Command.conv(.add, cid, members: [outsider])
                let signature = self.signer.signature(for: action, clientID: signer)
                add.t = signature.timestamp
                add.n = signature.nonce
                add.s = signature.signature
                return add
            }
            // Signed for another conversation, or as another client's self-invite: refused.
            let wrongConversation = try await client.request(add(.invite(conversationId: "other", members: [outsider])))
            XCTAssertEqual(wrongConversation.code, 4302, "\(mode)")
            let otherClients = try await client.request(add(.invite(conversationId: cid, members: [outsider]), as: "Tom"))
            XCTAssertEqual(otherClients.code, 4302, "\(mode)")
            // LeanCloud's text (`…:cid:self:t:n:invite`) lets the client in.
            let joined = try await client.request(add(.invite(conversationId: cid, members: [outsider])))
            XCTAssertEqual(joined.op, .added, "\(mode): \(joined)")
            XCTAssertEqual(joined.cid, cid)
            XCTAssertEqual(joined.allowedPids, [outsider])
            let event = try await tom.next { $0.op == .membersJoined && $0.m == [outsider] }
            XCTAssertEqual(event.initBy, outsider)
            // Hookbot's own `…:join` text (IMClient's) still works: quit, then join again with it.
            let quit = Command.conv(.remove, cid, members: [outsider])
            let left = try await client.request(quit)
            XCTAssertEqual(left.op, .removed, "\(mode)")
            let rejoined = try await client.request(add(.join(conversationId: cid)))
            XCTAssertEqual(rejoined.op, .added, "\(mode): \(rejoined)")
            await client.close()
        }
    }

    /// `withMembers(ids, true)` and `sizeEqualTo('m', n)`: `$size` on the member list, with the scan limit.
    func testSizeOfTheMemberListInQueries() async throws {
        let server = try await startServer { $0.queryScanLimit = 2 }
        let setup = try await WireClient.login("Tom", port: server.port, mode: .json)
        let pair = try await setup.startConversation(members: ["Tom", "Jerry"])
        let trio = try await setup.startConversation(members: ["Tom", "Jerry", "Spike"])
        let other = try await setup.startConversation(members: ["Tom", "Spike"])
        for mode in Self.modes {
            let tom = try await WireClient.login("Tom", port: server.port, mode: mode)
            func ids(_ condition: JSONValue) async throws -> Command {
                var query = Command(cmd: .conv, op: .query)
                query.where = condition
                query.limit = 10
                return try await tom.request(query)
            }
            // The SDK's withMembers(['Jerry'], true) adds the client itself: an exact member set.
            let exact = try await ids(["m": ["$size": 2, "$all": ["Jerry", "Tom"]]])
            XCTAssertEqual(exact.results?.map(\.objectId), [pair], "\(mode): \(exact)")
            let three = try await ids(["m": ["$all": ["Tom"], "$size": 3]])
            XCTAssertEqual(three.results?.map(\.objectId), [trio], "\(mode)")
            let none = try await ids(["m": ["$all": ["Spike"], "$size": 4]])
            XCTAssertEqual(none.results?.map(\.objectId), [], "\(mode)")
            let spikes = try await ids(["m": ["$all": ["Spike"], "$size": 2]])
            XCTAssertEqual(spikes.results?.map(\.objectId), [other], "\(mode)")
            // sizeEqualTo alone drives no index: over the scan limit (3 conversations > 2) it is 4310.
            let unindexed = try await ids(["m": ["$size": 3]])
            XCTAssertEqual(unindexed.code, 4310, "\(mode): \(unindexed)")
            for bad: JSONValue in ["x", -1, 1.5] {
                let refused = try await ids(["m": ["$size": bad]])
                XCTAssertEqual(refused.code, 4903, "\(mode) \(bad)")
                XCTAssertEqual(refused.detail, "where.m.$size must be a non-negative integer")
            }
            await tom.close()
        }
        // Under the scan limit, sizeEqualTo alone works.
        let small = try await startServer()
        let tom = try await WireClient.login("Tom", port: small.port, mode: .binary)
        let a = try await tom.startConversation(members: ["Tom", "Jerry", "Spike"])
        _ = try await tom.startConversation(members: ["Tom", "Jerry"])
        var query = Command(cmd: .conv, op: .query)
        query.where = ["m": ["$size": 3]]
        let found = try await tom.request(query)
        XCTAssertEqual(found.results?.map(\.objectId), [a])
    }

    /// `compact(true)`: flag bit 1 leaves the member lists out; bit 2 alone keeps them.
    func testACompactQueryAnswersWithoutMembers() async throws {
        let server = try await startServer()
        for mode in Self.modes {
            let tom = try await WireClient.login("Tom", port: server.port, mode: mode)
            let cid = try await tom.startConversation(members: ["Tom", "Jerry"], name: "compact")
            for (flag, withMembers) in [(1, false), (3, false), (2, true), (0, true)] {
                var query = Command(cmd: .conv, op: .query)
                query.where = ["objectId": .string(cid)]
                query.flag = flag
                if mode.subprotocol != nil {
                    XCTAssertEqual(try ProtobufCommandCodec.generic(from: query).convMessage.flag, Int32(flag))
                }
                let reply = try await tom.request(query)
                let result = try XCTUnwrap(reply.results?.first, "\(mode) flag \(flag)")
                XCTAssertEqual(result.objectId, cid)
                XCTAssertEqual(result.name, "compact")
                XCTAssertEqual(result.m.map(Set.init), withMembers ? ["Tom", "Jerry"] : nil, "\(mode) flag \(flag)")
            }
            await tom.close()
        }
    }

    /// `send(message, {will: true})`: held until the sender's connection drops, then delivered; a clean
    /// `session close` drops it.
    func testAWillMessageIsSentWhenTheConnectionDrops() async throws {
        let server = try await startServer()
        let jerry = try await WireClient.login("Jerry", port: server.port, mode: .json)
        for (index, mode) in Self.modes.enumerated() {
            let name = "Droopy\(index)"
            let droopy = try await WireClient.login(name, port: server.port, mode: mode)
            let cid = try await droopy.startConversation(members: [name, "Jerry"])
            func will(_ text: String) -> Command {
                var direct = Command(cmd: .direct)
                direct.cid = cid
                direct.msg = TypedMessage.text(text).encoded()
                direct.will = true
                return direct
            }
            if mode.subprotocol != nil { XCTAssertTrue(try ProtobufCommandCodec.generic(from: will("x")).directMessage.will) }
            let first = try await droopy.request(will("first will"))
            XCTAssertEqual(first.cmd, .ack, "\(mode)")
            XCTAssertNil(first.code)
            XCTAssertNotNil(first.t)
            let ack = try await droopy.request(will("\(name) went offline"))
            XCTAssertEqual(ack.cmd, .ack)
            var transient = will("x")
            transient.transient = true
            let refused = try await droopy.request(transient)
            XCTAssertEqual(refused.code, 4903, "\(mode)")
            var room = will("x")
            room.cid = "nowhere"
            let unknown = try await droopy.request(room)
            XCTAssertEqual(unknown.code, 4401, "\(mode)")
            // Held: nobody gets it while the sender is connected.
            let early = await jerry.settle(for: .milliseconds(300)) { $0.cmd == .direct && $0.cid == cid }
            XCTAssertEqual(early.count, 0, "\(mode)")
            // The connection drops (no session close): the latest will goes out as the sender's message.
            await droopy.close()
            let delivered = try await jerry.next(timeout: .seconds(5)) { $0.cmd == .direct && $0.cid == cid }
            XCTAssertEqual(delivered.text, "\(name) went offline", "\(mode)")
            XCTAssertEqual(delivered.fromPeerId, name)
            XCTAssertNotNil(delivered.id)
            // It is an ordinary stored message now.
            var logs = Command(cmd: .logs)
            logs.cid = cid
            let history = try await jerry.request(logs)
            XCTAssertEqual(history.logs?.map(\.from), [name])

            // A clean `session close` discards it.
            let again = try await WireClient.login(name, port: server.port, mode: mode)
            _ = try await again.request(will("never sent"))
            let closed = try await again.request(Command(cmd: .session, op: .close))
            XCTAssertEqual(closed.op, .closed)
            await again.close()
            let late = await jerry.settle(for: .milliseconds(500)) { $0.cmd == .direct && $0.cid == cid }
            XCTAssertEqual(late.count, 0, "\(mode): \(late)")
        }
    }

    /// A client whose socket goes away without a close frame (the official SDK's `ws.terminate()`, a phone
    /// losing its network): the server notices at once, not at the next ping, and its will message goes out.
    func testAWillMessageIsSentWhenTheSocketIsClosedWithoutACloseFrame() async throws {
        let server = try await startServer()
        let jerry = try await WireClient.login("Jerry", port: server.port, mode: .json)
        let cid = try await jerry.startConversation(members: ["Jerry", "Spike"])
        var socket: RawWebSocket? = try RawWebSocket(port: server.port)
        try socket?.sendText(#"{"cmd":"session","op":"open","i":1,"peerId":"Spike"}"#)
        XCTAssertEqual(try socket?.readUntil(timeout: 5, occurrences: 1, of: #""op":"opened""#), true)
        try socket?.sendText(#"{"cmd":"direct","i":2,"cid":"\#(cid)","msg":"Spike 掉线了 📴","will":true}"#)
        XCTAssertEqual(try socket?.readUntil(timeout: 5, occurrences: 1, of: #""cmd":"ack""#), true)
        let early = await jerry.settle(for: .milliseconds(300)) { $0.cmd == .direct && $0.cid == cid }
        XCTAssertEqual(early.count, 0)
        socket = nil // closes the descriptor: a FIN, no close frame
        let delivered = try await jerry.next(timeout: .seconds(5)) { $0.cmd == .direct && $0.cid == cid }
        XCTAssertEqual(delivered.msg, "Spike 掉线了 📴")
        XCTAssertEqual(delivered.fromPeerId, "Spike")
    }

    /// `queryMessages({startTime, endTime, startClosed, endClosed, type})`: `tIncluded`, `ttIncluded` and
    /// `lctype`, both directions.
    func testClosedHistoryIntervalsAndTheTypeFilter() async throws {
        let server = try await startServer()
        let sender = try await WireClient.login("Tom", port: server.port, mode: .json)
        let cid = try await sender.startConversation(members: ["Tom", "Jerry"])
        let poll = #"{"_lctype":7,"_lctext":"poll","question":"Brie or Gouda?"}"#
        var times: [Int64] = []
        var ids: [String] = []
        for body in [TypedMessage.text("a").encoded(), TypedMessage.text("b").encoded(), poll, TypedMessage.text("d").encoded()] {
            var direct = Command(cmd: .direct)
            direct.cid = cid
            direct.msg = body
            let ack = try await sender.request(direct)
            times.append(try XCTUnwrap(ack.t))
            ids.append(try XCTUnwrap(ack.uid))
        }
        var binary = Command(cmd: .direct)
        binary.cid = cid
        binary.binaryMsg = Data([1, 2, 3]).base64EncodedString()
        let binaryAck = try await sender.request(binary)
        times.append(try XCTUnwrap(binaryAck.t))
        ids.append(try XCTUnwrap(binaryAck.uid))

        for mode in Self.modes {
            let jerry = try await WireClient.login("Jerry", port: server.port, mode: mode)
            func logs(_ configure: (inout Command) -> Void) async throws -> [String] {
                var logs = Command(cmd: .logs)
                logs.cid = cid
                logs.limit = 100
                configure(&logs)
                if mode.subprotocol != nil {
                    let raw = try ProtobufCommandCodec.generic(from: logs).logsMessage
                    XCTAssertEqual(raw.hasTIncluded, logs.tIncluded != nil)
                    XCTAssertEqual(raw.hasTtIncluded, logs.ttIncluded != nil)
                    XCTAssertEqual(raw.hasLctype ? Int(raw.lctype) : nil, logs.lctype)
                }
                let reply = try await jerry.request(logs)
                XCTAssertNil(reply.code, "\(mode): \(reply)")
                return reply.logs?.map(\.msgId) ?? []
            }
            // Paging back from t (newest) to tt: open, closed at either end, closed at both.
            let open = try await logs {
                $0.t = times[4]
                $0.tt = times[0]
            }
            XCTAssertEqual(open, Array(ids[1...3]), "\(mode)")
            let closed = try await logs {
                $0.t = times[4]
                $0.tt = times[0]
                $0.tIncluded = true
                $0.ttIncluded = true
            }
            XCTAssertEqual(closed, ids, "\(mode)")
            let startClosed = try await logs {
                $0.t = times[4]
                $0.tt = times[0]
                $0.tIncluded = true
            }
            XCTAssertEqual(startClosed, Array(ids[1...4]), "\(mode)")
            // Forwards (reversed / direction NEW): t is the older bound.
            let forwards = try await logs {
                $0.reversed = true
                $0.t = times[0]
                $0.tt = times[3]
                $0.tIncluded = true
            }
            XCTAssertEqual(forwards, Array(ids[0...2]), "\(mode)")
            // Types: text only (not the poll, not the binary message), the poll only, pages of text.
            let texts = try await logs { $0.lctype = -1 }
            XCTAssertEqual(texts, [ids[0], ids[1], ids[3]], "\(mode)")
            let polls = try await logs { $0.lctype = 7 }
            XCTAssertEqual(polls, [ids[2]], "\(mode)")
            let newestText = try await logs {
                $0.lctype = -1
                $0.limit = 2
            }
            XCTAssertEqual(newestText, [ids[1], ids[3]], "\(mode)")
            let oldestText = try await logs {
                $0.lctype = -1
                $0.limit = 1
                $0.reversed = true
            }
            XCTAssertEqual(oldestText, [ids[0]], "\(mode)")
            let closedTexts = try await logs {
                $0.lctype = -1
                $0.t = times[3]
                $0.tIncluded = true
            }
            XCTAssertEqual(closedTexts, [ids[0], ids[1], ids[3]], "\(mode)")
            await jerry.close()
        }
    }

    /// A type filter reads the range in pages (of at least 200) until its page is full: matches far apart
    /// are found in both directions.
    func testTheTypeFilterReadsPastPagesWithoutMatches() async throws {
        let server = try await startServer()
        let tom = try await WireClient.login("Tom", port: server.port, mode: .binary)
        let cid = try await tom.startConversation(members: ["Tom", "Jerry"])
        func send(_ body: String) async throws -> String {
            var direct = Command(cmd: .direct)
            direct.cid = cid
            direct.msg = body
            let ack = try await tom.request(direct)
            return try XCTUnwrap(ack.uid)
        }
        let poll = #"{"_lctype":7,"_lctext":"poll"}"#
        let firstPoll = try await send(poll)
        for k in 0..<450 { _ = try await send(TypedMessage.text("filler \(k)").encoded()) }
        let lastPoll = try await send(poll)
        _ = try await send(TypedMessage.text("after").encoded())
        for reversed in [false, true] {
            var logs = Command(cmd: .logs)
            logs.cid = cid
            logs.lctype = 7
            logs.limit = 5
            logs.reversed = reversed ? true : nil
            let both = try await tom.request(logs)
            XCTAssertEqual(both.logs?.map(\.msgId), [firstPoll, lastPoll], "reversed: \(reversed)")
            logs.limit = 1
            let one = try await tom.request(logs)
            XCTAssertEqual(one.logs?.map(\.msgId), [reversed ? firstPoll : lastPoll], "reversed: \(reversed)")
        }
    }

    /// The role table: the owner and managers recall others' messages; members do not, managers not the owner's.
    func testTheOwnerAndManagersRecallOthersMessages() async throws {
        let server = try await startServer()
        let tom = try await WireClient.login("Tom", port: server.port, mode: .json)
        let cid = try await tom.startConversation(members: ["Tom", "Jerry", "Spike", "Tyke"])
        var promote = Command.conv(.memberInfoUpdate, cid)
        promote.targetClientId = "Spike"
        promote.role = "Manager"
        let promoted = try await tom.request(promote)
        XCTAssertEqual(promoted.op, .memberInfoUpdated, "\(promoted)")
        let jerry = try await WireClient.login("Jerry", port: server.port, mode: .json)
        let tyke = try await WireClient.login("Tyke", port: server.port, mode: .base64)
        for mode in Self.modes {
            let spike = try await WireClient.login("Spike", port: server.port, mode: mode)
            let owner = try await WireClient.login("Tom", port: server.port, mode: mode)
            // The owner recalls a member's message; the others hear of it as the sender's recall.
            let rude = try await jerry.sendText("rude words", to: cid)
            let byOwner = try await owner.request(.recall(rude, in: cid))
            XCTAssertEqual(byOwner.op, .modified, "\(mode): \(byOwner)")
            let event = try await tyke.next { $0.cmd == .patch && $0.patches?.first?.mid == rude.uid }
            let item = try XCTUnwrap(event.patches?.first)
            XCTAssertEqual(item.recall, true)
            XCTAssertEqual(item.from, "Jerry")
            XCTAssertEqual(item.cid, cid)
            XCTAssertNotNil(item.patchTimestamp)
            let jerrySees = try await jerry.next { $0.cmd == .patch && $0.patches?.first?.mid == rude.uid }
            XCTAssertEqual(jerrySees.patches?.first?.recall, true)
            // A manager recalls a member's message.
            let again = try await jerry.sendText("more rude words", to: cid)
            let byManager = try await spike.request(.recall(again, in: cid))
            XCTAssertEqual(byManager.op, .modified, "\(mode): \(byManager)")
            // A member may not recall a manager's message (4403), a manager not the owner's (4308).
            let managers = try await spike.sendText("calm down", to: cid)
            let byMember = try await jerry.request(.recall(managers, in: cid))
            XCTAssertEqual(byMember.code, 4403, "\(mode)")
            XCTAssertEqual(byMember.detail, "only the sender, the owner or a manager of \(cid) may recall a message")
            let owners = try await owner.sendText("house rules", to: cid)
            let upwards = try await spike.request(.recall(owners, in: cid))
            XCTAssertEqual(upwards.code, 4308, "\(mode): \(upwards)")
            // History shows the recalled messages as such.
            var logs = Command(cmd: .logs)
            logs.cid = cid
            logs.limit = 100
            let history = try await tyke.request(logs).logs ?? []
            XCTAssertEqual(history.first { $0.msgId == rude.uid }?.recalled, true)
            XCTAssertEqual(history.first { $0.msgId == again.uid }?.recalled, true)
            XCTAssertNil(history.first { $0.msgId == managers.uid }?.recalled)
            await spike.close()
            await owner.close()
        }
    }

    /// `session open` with `lastPatchTime` (the SDKs' reconnect): the recalls and edits made since are
    /// pushed as `patch modify` after `opened`.
    func testPatchesMissedWhileOfflineArePushedAtLogin() async throws {
        let server = try await startServer()
        let tom = try await WireClient.login("Tom", port: server.port, mode: .json)
        let cid = try await tom.startConversation(members: ["Tom", "Jerry"])
        let elsewhere = try await tom.startConversation(members: ["Tom", "Spike"])
        let recalled = try await tom.sendText("recall me later", to: cid)
        let edited = try await tom.sendText("helo", to: cid)
        let private_ = try await tom.sendText("not for Jerry", to: elsewhere)
        let before = Int64(Date().timeIntervalSince1970 * 1000)
        try await Task.sleep(for: .milliseconds(5))
        let recallReply = try await tom.request(.recall(recalled, in: cid))
        XCTAssertEqual(recallReply.op, .modified)
        let editReply = try await tom.request(.edit(edited, in: cid, to: TypedMessage.text("hello").encoded()))
        let editT = try XCTUnwrap(editReply.t)
        let otherReply = try await tom.request(.recall(private_, in: elsewhere))
        XCTAssertEqual(otherReply.op, .modified)

        for mode in Self.modes {
            let jerry = try await WireClient.login("Jerry", port: server.port, mode: mode) {
                $0.r = true
                $0.lastPatchTime = before
            }
            let push = try await jerry.next { $0.cmd == .patch && $0.op == .modify }
            let patches = try XCTUnwrap(push.patches)
            XCTAssertEqual(patches.map(\.mid), [recalled.uid, edited.uid], "\(mode): only Jerry's conversations, oldest first")
            XCTAssertEqual(patches[0].recall, true)
            XCTAssertEqual(patches[0].cid, cid)
            XCTAssertEqual(patches[0].from, "Tom")
            XCTAssertEqual(patches[0].timestamp, recalled.t)
            XCTAssertEqual(patches[0].data.flatMap(TypedMessage.decode)?.type, -127)
            XCTAssertNil(patches[1].recall)
            XCTAssertEqual(patches[1].data, TypedMessage.text("hello").encoded())
            XCTAssertEqual(patches[1].patchTimestamp, editT)
            if mode.subprotocol != nil {
                let raw = try ProtobufCommandCodec.generic(from: push).patchMessage.patches
                XCTAssertEqual(raw.map(\.recall), [true, false])
                XCTAssertEqual(raw[1].patchTimestamp, editT)
                XCTAssertEqual(raw[1].from, "Tom")
            }
            await jerry.close()
            // Up to date: nothing is pushed; without lastPatchTime neither.
            for lastPatchTime in [editT, nil] {
                let current = try await WireClient.login("Jerry", port: server.port, mode: mode) { $0.lastPatchTime = lastPatchTime }
                let pushed = await current.settle(for: .milliseconds(300)) { $0.cmd == .patch }
                XCTAssertEqual(pushed.count, 0, "\(mode) \(String(describing: lastPatchTime))")
                await current.close()
            }
        }
    }

    /// `conv max_read` with `queryAllMembers` (the JS SDK's group receipts): each other member's marks.
    func testEveryMembersReceiptTimestamps() async throws {
        let server = try await startServer()
        let setup = try await WireClient.login("Tom", port: server.port, mode: .json)
        let cid = try await setup.startConversation(members: ["Tom", "Jerry", "Spike"])
        let sent = try await setup.sendText("read me", to: cid)
        let jerry = try await WireClient.login("Jerry", port: server.port, mode: .json)
        var read = Command(cmd: .read)
        read.cid = cid
        read.mid = sent.uid
        let readReply = try await jerry.request(read)
        XCTAssertEqual(readReply.t, sent.t)
        for mode in Self.modes {
            let tom = try await WireClient.login("Tom", port: server.port, mode: mode)
            var query = Command.conv(.maxRead, cid)
            query.queryAllMembers = true
            if mode.subprotocol != nil { XCTAssertTrue(try ProtobufCommandCodec.generic(from: query).convMessage.queryAllMembers) }
            let reply = try await tom.request(query)
            XCTAssertEqual(reply.op, .maxRead, "\(mode): \(reply)")
            // Jerry read the message; Spike's marks are where they started (when he was added), before it.
            let tuples = try XCTUnwrap(reply.maxReadTuples)
            XCTAssertEqual(tuples.map(\.pid), ["Jerry", "Spike"], "\(mode)")
            XCTAssertEqual(tuples[0], MaxReadTuple(pid: "Jerry", maxAckTimestamp: sent.t, maxReadTimestamp: sent.t))
            XCTAssertLessThan(try XCTUnwrap(tuples[1].maxReadTimestamp), try XCTUnwrap(sent.t))
            XCTAssertLessThan(try XCTUnwrap(tuples[1].maxAckTimestamp), try XCTUnwrap(sent.t))
            if mode.subprotocol != nil {
                let raw = try ProtobufCommandCodec.generic(from: reply).convMessage.maxReadTuples
                XCTAssertEqual(raw.map(\.pid), ["Jerry", "Spike"])
                XCTAssertEqual(raw.first?.maxReadTimestamp, sent.t)
                XCTAssertEqual(raw.first?.maxAckTimestamp, sent.t)
            }
            // Without queryAllMembers: the newest marks of the others, as before.
            query.queryAllMembers = nil
            let plain = try await tom.request(query)
            XCTAssertEqual(plain.maxReadTimestamp, sent.t)
            XCTAssertNil(plain.maxReadTuples)
            await tom.close()
        }
        let outsider = try await WireClient.login("Nobody", port: server.port, mode: .binary)
        var query = Command.conv(.maxRead, cid)
        query.queryAllMembers = true
        let refused = try await outsider.request(query)
        XCTAssertEqual(refused.code, 4317)
    }

    /// The SDKs send `read` without `i` and expect nothing back; a `read` with `i` is answered.
    func testAReadWithoutSerialIsNotAnswered() async throws {
        let server = try await startServer()
        let tom = try await WireClient.login("Tom", port: server.port, mode: .json)
        let cid = try await tom.startConversation(members: ["Tom", "Jerry"])
        for mode in Self.modes {
            let sent = try await tom.sendText("read me \(mode)", to: cid, receipt: true)
            let jerry = try await WireClient.login("Jerry", port: server.port, mode: mode)
            var read = Command(cmd: .read)
            read.cid = cid
            read.mid = sent.uid
            read.t = sent.t
            jerry.send(read)
            // Tom's read receipt shows the read was handled; Jerry gets no reply.
            let receipt = try await tom.next { $0.cmd == .rcp && $0.read == true && $0.from == "Jerry" }
            XCTAssertEqual(receipt.t, sent.t, "\(mode)")
            let unsolicited = await jerry.settle(for: .milliseconds(300)) { $0.cmd == .read }
            XCTAssertEqual(unsolicited.count, 0, "\(mode): \(unsolicited)")
            let answered = try await jerry.request(read)
            XCTAssertEqual(answered.cmd, .read, "\(mode)")
            XCTAssertEqual(answered.t, sent.t)
            await jerry.close()
        }
    }
}
