import HookbotTestSupport
import IMCore
import XCTest

final class MembershipTests: XCTestCase {
    func testJoinInviteKickQuitProduceTheirEvents() async throws {
        let server = try await ServerHarness.start()
        addTeardownBlock { await server.stop() }
        let tom = try await server.login("Tom")
        let jerry = try await server.login("Jerry")
        let bob = try await server.login("Bob")
        let harry = try await server.login("Harry")
        let cid = try await tom.startConversation(members: ["Jerry"], name: "group")
        let invitedAtStart = try await jerry.next { $0.op == .invited }
        XCTAssertEqual(invitedAtStart.initBy, "Tom")

        // Bob joins by himself.
        var join = Command(cmd: .conv, op: .join)
        join.cid = cid
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
        var add = Command(cmd: .conv, op: .add)
        add.cid = cid
        add.m = ["Harry"]
        let observed1 = try await tom.request(add).m
        XCTAssertEqual(observed1, ["Harry"])
        let invited = try await harry.next { $0.op == .invited }
        XCTAssertEqual(invited.initBy, "Tom")
        for client in [tom, jerry, bob, harry] {
            let event = try await client.next { $0.op == .membersJoined && $0.m == ["Harry"] }
            XCTAssertEqual(event.initBy, "Tom")
        }

        // Tom kicks Harry.
        var remove = Command(cmd: .conv, op: .remove)
        remove.cid = cid
        remove.m = ["Harry"]
        let observed2 = try await tom.request(remove).m
        XCTAssertEqual(observed2, ["Harry"])
        let kicked = try await harry.next { $0.op == .kicked }
        XCTAssertEqual(kicked.initBy, "Tom")
        for client in [tom, jerry, bob] {
            let event = try await client.next { $0.op == .membersLeft && $0.m == ["Harry"] }
            XCTAssertEqual(event.initBy, "Tom")
        }

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
        var quit = Command(cmd: .conv, op: .quit)
        quit.cid = cid
        let observed6 = try await bob.request(quit).op
        XCTAssertEqual(observed6, .removed)
        _ = try await bob.next { $0.op == .left }
        _ = try await jerry.next { $0.op == .membersLeft && $0.m == ["Bob"] }

        var count = Command(cmd: .conv, op: .count)
        count.cid = cid
        let observed7 = try await tom.request(count).count
        XCTAssertEqual(observed7, 3)
    }

    func testOnlyMembersMayAddOrRemoveOthers() async throws {
        let server = try await ServerHarness.start()
        addTeardownBlock { await server.stop() }
        let tom = try await server.login("Tom")
        let mallory = try await server.login("Mallory")
        let cid = try await tom.startConversation(members: ["Jerry"])
        var add = Command(cmd: .conv, op: .add)
        add.cid = cid
        add.m = ["Eve"]
        let refused = try await mallory.request(add)
        XCTAssertEqual(refused.code, 4317)
        var remove = Command(cmd: .conv, op: .remove)
        remove.cid = cid
        remove.m = ["Jerry"]
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
        let server = try await ServerHarness.start()
        addTeardownBlock { await server.stop() }
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
        let server = try await ServerHarness.start()
        addTeardownBlock { await server.stop() }
        let tom = try await server.login("Tom")
        let jerry = try await server.login("Jerry")
        let bob = try await server.login("Bob")
        var start = Command(cmd: .conv, op: .start)
        start.name = "lobby"
        start.transient = true
        let lobby = try required(try await tom.request(start).cid)
        start.name = "kitchen"
        let kitchen = try required(try await bob.request(start).cid)

        var join = Command(cmd: .conv, op: .join)
        join.cid = lobby
        let observed11 = try await jerry.request(join).op
        XCTAssertEqual(observed11, .added)
        let bobJoinedLobby = try await bob.request(join).op // Bob leaves the kitchen
        XCTAssertEqual(bobJoinedLobby, .added)
        var count = Command(cmd: .conv, op: .count)
        count.cid = lobby
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
        let server = try await ServerHarness.start()
        addTeardownBlock { await server.stop() }
        let tom = try await server.login("Tom")
        let jerry = try await server.login("Jerry")
        let mallory = try await server.login("Mallory")
        let cid = try await tom.startConversation(
            members: ["Jerry"], name: "old", attr: ["type": "private", "pinned": true, "nested": ["a": 1, "b": 2]])

        var update = Command(cmd: .conv, op: .update)
        update.cid = cid
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

        var mute = Command(cmd: .conv, op: .mute)
        mute.cid = cid
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
