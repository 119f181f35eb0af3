import HookbotTestSupport
import IMCore
import XCTest

final class MembershipTests: XCTestCase {
    /// `actor` adds or removes `member` with `op`: the reply names the member, the member is told `told` and each
    /// of `watchers` hears `event` naming the member, all initiated by the actor.
    private func checkChange(
        _ op: OpType, of cid: String, by actor: (client: TestClient, id: String),
        changing member: (client: TestClient, id: String), whoIsTold told: OpType,
        while watchers: [TestClient], hear event: OpType, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        let changed = try await actor.client.request(.conv(op, cid, members: [member.id])).m
        XCTAssertEqual(changed, [member.id], file: file, line: line)
        let notice = try await member.client.next("\(member.id) told \(told)") { $0.op == told }
        XCTAssertEqual(notice.initBy, actor.id, file: file, line: line)
        for watcher in watchers {
            let heard = try await watcher.next("\(event) naming \(member.id)") { $0.op == event && $0.m == [member.id] }
            XCTAssertEqual(heard.initBy, actor.id, file: file, line: line)
        }
    }

    func testJoinInviteKickQuitProduceTheirEvents() async throws {
        let server = try await startServer()
        let (tom, jerry, bob, harry) = try await server.login("Tom", "Jerry", "Bob", "Harry")
        let cid = try await tom.startConversation(members: ["Jerry"], name: "group")
        let invitedAtStart = try await jerry.next { $0.op == .invited }
        XCTAssertEqual(invitedAtStart.initBy, "Tom")

        // Bob joins by himself.
        let join = Command.conv(.join, cid)
        let joinReply = try await bob.request(join)
        XCTAssertEqual(joinReply.op, .added)
        XCTAssertEqual(joinReply.m, ["Bob"])
        let bobJoined = try await bob.next { $0.op == .joined }
        XCTAssertEqual(bobJoined.cid, cid)
        for client in [tom, jerry] {
            let event = try await client.next { $0.op == .membersJoined && $0.m == ["Bob"] }
            XCTAssertEqual(event.initBy, "Bob")
        }

        // Tom invites Harry.
        try await checkChange(
            .add, of: cid, by: (tom, "Tom"), changing: (harry, "Harry"), whoIsTold: .invited,
            while: [tom, jerry, bob, harry], hear: .membersJoined)

        // Tom kicks Harry.
        try await checkChange(
            .remove, of: cid, by: (tom, "Tom"), changing: (harry, "Harry"), whoIsTold: .kicked,
            while: [tom, jerry, bob], hear: .membersLeft)

        // A removed member can neither send nor read, until it rejoins.
        let secret = try await tom.sendText("while Harry is out", to: cid)
        let observed3 = try await harry.sendText("hello?", to: cid).code
        XCTAssertEqual(observed3, 4401)
        let observed4 = try await harry.history(cid).code
        XCTAssertEqual(observed4, 4312)
        let stray = await harry.settle { $0.cmd == .direct }
        XCTAssertTrue(stray.isEmpty)
        let observed5 = try await harry.request(join).op
        XCTAssertEqual(observed5, .added)
        let logs = try required(try await harry.history(cid).logs)
        XCTAssertEqual(logs.map(\.msgId), [secret.uid].compactMap { $0 })

        // Bob quits.
        let quit = Command.conv(.quit, cid)
        let observed6 = try await bob.request(quit).op
        XCTAssertEqual(observed6, .removed)
        _ = try await bob.next { $0.op == .left }
        _ = try await jerry.next { $0.op == .membersLeft && $0.m == ["Bob"] }

        let count = Command.conv(.count, cid)
        let observed7 = try await tom.request(count).count
        XCTAssertEqual(observed7, 3)
    }

    func testOnlyMembersMayAddOrRemoveOthers() async throws {
        let server = try await startServer()
        let (tom, mallory) = try await server.login("Tom", "Mallory")
        let cid = try await tom.startConversation(members: ["Jerry"])
        var add = Command.conv(.add, cid, members: ["Eve"])
        let refused = try await mallory.request(add)
        XCTAssertEqual(refused.code, 4317)
        let remove = Command.conv(.remove, cid, members: ["Jerry"])
        let observed8 = try await mallory.request(remove).code
        XCTAssertEqual(observed8, 4317)
        add.cid = "missing"
        let observed9 = try await tom.request(add).code
        XCTAssertEqual(observed9, 4401)
        add.cid = cid
        add.m = [""]
        let observed10 = try await tom.request(add).code
        XCTAssertEqual(observed10, 4903)
    }

    func testConcurrentUniqueStartsYieldOneConversation() async throws {
        let server = try await startServer()
        var clients: [TestClient] = []
        for k in 0..<4 { clients.append(try await server.login("u\(k)")) }
        let members = ["u0", "u1", "u2", "u3"]
        let ids = try await withThrowingTaskGroup(of: String.self) { group in
            for k in 0..<20 {
                let client = clients[k % 4]
                group.addTask { try await client.startConversation(members: members.shuffled(), unique: true) }
            }
            var ids: Set<String> = []
            for try await id in group { ids.insert(id) }
            return ids
        }
        XCTAssertEqual(ids.count, 1)
    }

    func testChatRoomsKeepNoMembersAndOneRoomPerConnection() async throws {
        let server = try await startServer()
        let (tom, jerry, bob) = try await server.login("Tom", "Jerry", "Bob")
        var start = Command(cmd: .conv, op: .start)
        start.name = "lobby"
        start.transient = true
        let lobby = try required(try await tom.request(start).cid)
        start.name = "kitchen"
        let kitchen = try required(try await bob.request(start).cid)

        var join = Command.conv(.join, lobby)
        let observed11 = try await jerry.request(join).op
        XCTAssertEqual(observed11, .added)
        let bobJoinedLobby = try await bob.request(join).op // Bob leaves the kitchen
        XCTAssertEqual(bobJoinedLobby, .added)
        var count = Command.conv(.count, lobby)
        let observed12 = try await tom.request(count).count
        XCTAssertEqual(observed12, 3)
        count.cid = kitchen
        let observed13 = try await tom.request(count).count
        XCTAssertEqual(observed13, 0)

        let ack = try await tom.sendText("hi room", to: lobby, receipt: true)
        XCTAssertNil(ack.code)
        for client in [jerry, bob] {
            let message = try await client.nextMessage()
            XCTAssertEqual(message.text, "hi room")
            XCTAssertNil(message.r, "chat rooms produce no receipts")
            client.acknowledge(message)
        }
        let noise = await tom.settle { $0.cmd == .rcp || $0.op == .membersJoined }
        XCTAssertTrue(noise.isEmpty, "no receipts and no membership events in chat rooms")

        join.cid = kitchen
        let observed14 = try await bob.request(join).op
        XCTAssertEqual(observed14, .added)
        try await tom.sendText("Bob left", to: lobby)
        let observed15 = try await jerry.nextMessage().text
        XCTAssertEqual(observed15, "Bob left")
        let bobMessages = await bob.settle { $0.cmd == .direct }
        XCTAssertTrue(bobMessages.isEmpty, "joining the kitchen left the lobby")
        let observed16 = try await bob.sendText("not here", to: lobby).code
        XCTAssertEqual(observed16, 4401)

        var query = Command(cmd: .conv, op: .query)
        query.where = ["objectId": .string(lobby)]
        let info = try required(try await tom.request(query).results?.first)
        XCTAssertEqual(info.tr, true)
        XCTAssertNil(info.m)

        await jerry.close()
        let jerryAgain = try await server.login("Jerry")
        let offline = await jerryAgain.settle { $0.cmd == .direct }
        XCTAssertTrue(offline.isEmpty, "chat rooms keep no offline messages")
    }

    func testUpdateNameAndAttributesPartiallyAndMute() async throws {
        let server = try await startServer()
        let (tom, jerry, mallory) = try await server.login("Tom", "Jerry", "Mallory")
        let cid = try await tom.startConversation(
            members: ["Jerry"], name: "old", attr: ["type": "private", "pinned": true, "nested": ["a": 1, "b": 2]])

        var update = Command.conv(.update, cid)
        update.attr = ["name": "new", "attr.type": "public", "attr.pinned": ["__op": "Delete"], "attr.nested.b": 3, "attr.nested.c": "x"]
        let reply = try await tom.request(update)
        XCTAssertEqual(reply.op, .updated)
        XCTAssertNotNil(reply.udate)
        let event = try await jerry.next { $0.op == .updated }
        XCTAssertEqual(event.initBy, "Tom")
        XCTAssertEqual(event.attr?["attr.type"], "public")
        let echoed = await tom.settle { $0.op == .updated }
        XCTAssertTrue(echoed.isEmpty, "the updating connection gets the reply, not the event")

        var query = Command(cmd: .conv, op: .query)
        query.where = ["objectId": .string(cid)]
        let info = try required(try await tom.request(query).results?.first)
        XCTAssertEqual(info.name, "new")
        XCTAssertEqual(info.attr, ["type": "public", "nested": ["a": 1, "b": 3, "c": "x"]])

        let observed17 = try await mallory.request(update).code
        XCTAssertEqual(observed17, 4309)
        update.attr = ["color": "red"]
        let observed18 = try await tom.request(update).code
        XCTAssertEqual(observed18, 4903)

        var mute = Command.conv(.mute, cid)
        let observed19 = try await jerry.request(mute).op
        XCTAssertEqual(observed19, .muted)
        let observed20 = try await tom.request(query).results?.first?.mu
        XCTAssertEqual(observed20, ["Jerry"])
        mute.op = .unmute
        let observed21 = try await jerry.request(mute).op
        XCTAssertEqual(observed21, .unmuted)
        let observed22 = try await tom.request(query).results?.first?.mu
        XCTAssertEqual(observed22, [])
    }
}
