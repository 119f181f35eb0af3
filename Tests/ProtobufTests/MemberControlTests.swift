import Foundation
import HookbotTestSupport
import IMCore
import IMProto
import IMServer
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Member mutes ("shut-up", timed and conversation-wide), block lists and roles (docs/PROTOCOL.md,
/// "Mutes, block lists and roles"), each through the JSON protocol and LeanCloud's protobuf, field by
/// field. On SQLite, and on PostgreSQL under `HOOKBOT_TEST_BACKEND=postgres`.
final class MemberControlTests: XCTestCase {
    static let modes: [WireClient.Mode] = [.json, .binary]

    private func login(_ server: ServerHarness, _ ids: [String], _ mode: WireClient.Mode) async throws -> [WireClient] {
        var clients: [WireClient] = []
        for id in ids { clients.append(try await WireClient.login(id, port: server.port, mode: mode)) }
        return clients
    }

    private func mute(_ ids: [String]?, in cid: String, all: Bool = false, seconds: Int? = nil, reason: String? = nil) -> Command {
        var command = Command.conv(.addShutup, cid, members: ids)
        command.all = all ? true : nil
        command.duration = seconds
        command.detail = reason
        return command
    }

    private func unmute(_ ids: [String]?, in cid: String, all: Bool = false) -> Command {
        var command = Command.conv(.removeShutup, cid, members: ids)
        command.all = all ? true : nil
        return command
    }

    private func blacklist(_ op: OpType, _ ids: [String]?, in cid: String) -> Command {
        var command = Command(cmd: .blacklist, op: op)
        command.srcCid = cid
        command.toPids = ids
        return command
    }

    private func setRole(_ target: String, _ role: String, in cid: String) -> Command {
        var command = Command.conv(.memberInfoUpdate, cid)
        command.targetClientId = target
        command.role = role
        return command
    }

    private func assertCode(
        _ reply: Command, _ code: Int, _ reason: String, _ context: String, file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertEqual(reply.code, code, "\(context): \(reply)", file: file, line: line)
        XCTAssertEqual(reply.reason, reason, "\(context)", file: file, line: line)
        XCTAssertFalse(reply.detail?.isEmpty ?? true, "\(context): a reason in detail", file: file, line: line)
    }

    func testTimedMuteIsEnforcedByTheServerAndEndsByItself() async throws {
        let server = try await startServer()
        for mode in Self.modes {
            let c = try await login(server, ["Tom", "Jerry", "Bob"], mode)
            let (tom, jerry, bob) = (c[0], c[1], c[2])
            let cid = try await tom.startConversation(members: ["Jerry", "Bob"])

            let added = try await tom.request(mute(["Jerry"], in: cid, seconds: 2, reason: "spam"))
            XCTAssertEqual(added.cmd, .conv, "\(mode)")
            XCTAssertEqual(added.op, .shutupAdded, "\(mode)")
            XCTAssertEqual(added.cid, cid)
            XCTAssertEqual(added.allowedPids, ["Jerry"])
            XCTAssertEqual(added.duration, 2)
            let muted = try await jerry.next { $0.op == .shutuped }
            XCTAssertEqual(muted.cid, cid)
            XCTAssertEqual(muted.initBy, "Tom")
            XCTAssertEqual(muted.duration, 2)
            let seen = try await bob.next { $0.op == .membersShutuped }
            XCTAssertEqual(seen.cid, cid)
            XCTAssertEqual(seen.m, ["Jerry"])
            XCTAssertEqual(seen.initBy, "Tom")

            let refused = try await jerry.sendText("let me talk", to: cid)
            assertCode(refused, 4905, "MEMBER_MUTED", "\(mode)")
            XCTAssertTrue(refused.detail?.contains("spam") == true, "\(refused)")
            let query = try await bob.request(Command.queryShutup(cid))
            XCTAssertEqual(query.op, .shutupResult, "\(mode)")
            XCTAssertEqual(query.m, ["Jerry"])
            XCTAssertNil(query.next)
            XCTAssertNil(query.all)
            // Nothing reached the others.
            let leaked = await bob.settle { $0.cmd == .direct }
            XCTAssertTrue(leaked.isEmpty)

            // No bot, no process: the mute ends when its time is up.
            try await Task.sleep(for: .milliseconds(2_200))
            let ack = try await jerry.sendText("back", to: cid)
            XCTAssertNil(ack.code, "\(mode): \(ack)")
            XCTAssertNotNil(ack.uid ?? ack.mid ?? ack.id)
            let after = try await bob.request(Command.queryShutup(cid))
            XCTAssertEqual(after.m ?? [], [], "\(mode)")

            // Untimed: until lifted.
            _ = try await tom.request(mute(["Bob"], in: cid))
            assertCode(try await bob.sendText("hello?", to: cid), 4905, "MEMBER_MUTED", "\(mode)")
            let removed = try await tom.request(unmute(["Bob"], in: cid))
            XCTAssertEqual(removed.op, .shutupRemoved, "\(mode)")
            XCTAssertEqual(removed.allowedPids, ["Bob"])
            let unmuted = try await bob.next { $0.op == .unshutuped }
            XCTAssertEqual(unmuted.initBy, "Tom")
            let others = try await jerry.next { $0.op == .membersUnshutuped }
            XCTAssertEqual(others.m, ["Bob"])
            let reply1 = try await bob.sendText("thanks", to: cid)
            XCTAssertNil(reply1.code)

            // Bad input gets a code and a reason.
            assertCode(try await tom.request(mute(["Bob"], in: cid, seconds: 0)), 4903, "INVALID_FIELD", "\(mode) duration 0")
            assertCode(try await tom.request(mute(nil, in: cid)), 4903, "INVALID_FIELD", "\(mode) no m")
            assertCode(try await tom.request(mute(["Bob"], in: "nope")), 4401, "INVALID_MESSAGING_TARGET", "\(mode) no conversation")
            for client in c { await client.close() }
        }
    }

    func testMuteAllSparesOwnerManagersAndMembersUnmutedByName() async throws {
        let server = try await startServer()
        for mode in Self.modes {
            let c = try await login(server, ["Tom", "Jerry", "Bob", "Alice"], mode)
            let (tom, jerry, bob, alice) = (c[0], c[1], c[2], c[3])
            let cid = try await tom.startConversation(members: ["Jerry", "Bob", "Alice"])
            let reply2 = try await tom.request(setRole("Bob", "Manager", in: cid))
            XCTAssertEqual(reply2.op, .memberInfoUpdated)

            let all = try await tom.request(mute(nil, in: cid, all: true))
            XCTAssertEqual(all.op, .shutupAdded, "\(mode): \(all)")
            XCTAssertEqual(all.all, true)
            let event = try await alice.next { $0.op == .membersShutuped }
            XCTAssertEqual(event.all, true)
            XCTAssertEqual(event.initBy, "Tom")
            let own = try await jerry.next { $0.op == .shutuped }
            XCTAssertEqual(own.all, true)
            let spared = await bob.settle { $0.op == .shutuped }
            XCTAssertTrue(spared.isEmpty, "a manager is not muted: \(spared)")

            assertCode(try await jerry.sendText("hi", to: cid), 4905, "MEMBER_MUTED", "\(mode)")
            assertCode(try await alice.sendText("hi", to: cid), 4905, "MEMBER_MUTED", "\(mode)")
            let reply3 = try await tom.sendText("owner speaks", to: cid)
            XCTAssertNil(reply3.code)
            let reply4 = try await bob.sendText("manager speaks", to: cid)
            XCTAssertNil(reply4.code)
            let query = try await alice.request(Command.queryShutup(cid))
            XCTAssertEqual(query.all, true, "\(mode)")

            // Unmuting by name lets one member speak while the rest stay muted.
            let reply5 = try await tom.request(unmute(["Jerry"], in: cid))
            XCTAssertEqual(reply5.allowedPids, ["Jerry"])
            let reply6 = try await jerry.sendText("thanks", to: cid)
            XCTAssertNil(reply6.code)
            assertCode(try await alice.sendText("me too?", to: cid), 4905, "MEMBER_MUTED", "\(mode)")

            let lifted = try await tom.request(unmute(nil, in: cid, all: true))
            XCTAssertEqual(lifted.op, .shutupRemoved)
            let reply7 = try await alice.sendText("finally", to: cid)
            XCTAssertNil(reply7.code)
            let reply8 = try await alice.request(Command.queryShutup(cid))
            XCTAssertNil(reply8.all)
            for client in c { await client.close() }
        }
    }

    func testBlockedClientIsRemovedCannotRejoinNorBeAdded() async throws {
        let server = try await startServer()
        for mode in Self.modes {
            let c = try await login(server, ["Tom", "Jerry", "Bob", "Alice"], mode)
            let (tom, jerry, bob, alice) = (c[0], c[1], c[2], c[3])
            let cid = try await tom.startConversation(members: ["Jerry", "Bob"])

            let blocked = try await tom.request(blacklist(.block, ["Jerry"], in: cid))
            XCTAssertEqual(blocked.cmd, .blacklist, "\(mode): \(blocked)")
            XCTAssertEqual(blocked.op, .blocked)
            XCTAssertEqual(blocked.srcCid, cid)
            XCTAssertEqual(blocked.allowedPids, ["Jerry"])
            XCTAssertNil(blocked.failedPids)
            let kicked = try await jerry.next { $0.op == .kicked }
            XCTAssertEqual(kicked.cid, cid)
            XCTAssertEqual(kicked.initBy, "Tom")
            let own = try await jerry.next { $0.cmd == .conv && $0.op == .blocked }
            XCTAssertEqual(own.cid, cid)
            XCTAssertEqual(own.initBy, "Tom")
            let left = try await bob.next { $0.op == .membersLeft }
            XCTAssertEqual(left.m, ["Jerry"])
            let seen = try await bob.next { $0.op == .membersBlocked }
            XCTAssertEqual(seen.m, ["Jerry"])
            XCTAssertEqual(seen.initBy, "Tom")

            var query = Command(cmd: .blacklist, op: .query)
            query.srcCid = cid
            let list = try await bob.request(query)
            XCTAssertEqual(list.cmd, .blacklist, "\(mode)")
            XCTAssertEqual(list.op, .queryResult)
            XCTAssertEqual(list.blockedPids, ["Jerry"])

            // Rejoining and being added are refused with 4315; others are still added.
            let join = Command.conv(.join, cid)
            assertCode(try await jerry.request(join), 4315, "CONVERSATION_BLACKLISTED", "\(mode) rejoin")
            var add = Command.conv(.add, cid, members: ["Jerry", "Alice"])
            let partly = try await bob.request(add)
            XCTAssertEqual(partly.op, .added, "\(mode): \(partly)")
            XCTAssertEqual(partly.allowedPids, ["Alice"])
            XCTAssertEqual(partly.failedPids?.first?.pids, ["Jerry"])
            XCTAssertEqual(partly.failedPids?.first?.code, 4315)
            XCTAssertEqual(partly.failedPids?.first?.reason, "CONVERSATION_BLACKLISTED")
            add.m = ["Jerry"]
            assertCode(try await tom.request(add), 4315, "CONVERSATION_BLACKLISTED", "\(mode) add")
            let reply9 = try await jerry.sendText("still here?", to: cid)
            XCTAssertEqual(reply9.code, 4401)

            // Members may not block; the owner cannot be blocked.
            assertCode(try await alice.request(blacklist(.block, ["Bob"], in: cid)), 4308, "CONVERSATION_NOT_ALLOWED", "\(mode)")
            assertCode(try await bob.request(blacklist(.block, ["Tom"], in: cid)), 4308, "CONVERSATION_NOT_ALLOWED", "\(mode)")

            let unblocked = try await tom.request(blacklist(.unblock, ["Jerry"], in: cid))
            XCTAssertEqual(unblocked.op, .unblocked, "\(mode)")
            XCTAssertEqual(unblocked.allowedPids, ["Jerry"])
            _ = try await jerry.next { $0.cmd == .conv && $0.op == .unblocked }
            let reply10 = try await jerry.request(join)
            XCTAssertEqual(reply10.allowedPids, ["Jerry"], "\(mode)")
            let reply11 = try await bob.request(query)
            XCTAssertEqual(reply11.blockedPids ?? [], [])
            for client in c { await client.close() }
        }
    }

    func testEachRolePermissions() async throws {
        let server = try await startServer()
        for mode in Self.modes {
            let c = try await login(server, ["Tom", "Jerry", "Bob", "Alice"], mode)
            let (tom, jerry, bob, alice) = (c[0], c[1], c[2], c[3])
            let cid = try await tom.startConversation(members: ["Jerry", "Bob", "Alice"])

            let updated = try await tom.request(setRole("Jerry", "Manager", in: cid))
            XCTAssertEqual(updated.op, .memberInfoUpdated, "\(mode): \(updated)")
            XCTAssertEqual(updated.targetClientId, "Jerry")
            XCTAssertEqual(updated.role, "Manager")
            let changed = try await bob.next { $0.op == .memberInfoChanged }
            XCTAssertEqual(changed.cid, cid)
            XCTAssertEqual(changed.targetClientId, "Jerry")
            XCTAssertEqual(changed.role, "Manager")
            XCTAssertEqual(changed.initBy, "Tom")

            // A manager moderates members, not the owner nor another manager, and cannot change roles.
            let reply12 = try await jerry.request(mute(["Bob"], in: cid))
            XCTAssertEqual(reply12.allowedPids, ["Bob"], "\(mode)")
            let reply13 = try await jerry.request(unmute(["Bob"], in: cid))
            XCTAssertEqual(reply13.allowedPids, ["Bob"])
            assertCode(try await jerry.request(mute(["Tom"], in: cid)), 4308, "CONVERSATION_NOT_ALLOWED", "\(mode) manager mutes owner")
            assertCode(try await jerry.request(setRole("Bob", "Manager", in: cid)), 4308, "CONVERSATION_NOT_ALLOWED", "\(mode)")
            let reply14 = try await tom.request(setRole("Bob", "Manager", in: cid))
            XCTAssertEqual(reply14.role, "Manager")
            assertCode(try await jerry.request(mute(["Bob"], in: cid)), 4308, "CONVERSATION_NOT_ALLOWED", "\(mode) manager mutes manager")
            // A member moderates nobody and removes members only.
            assertCode(try await alice.request(mute(["Tom"], in: cid)), 4308, "CONVERSATION_NOT_ALLOWED", "\(mode) member mutes")
            assertCode(try await alice.request(unmute(["Alice"], in: cid)), 4308, "CONVERSATION_NOT_ALLOWED", "\(mode) member unmutes")
            var kick = Command.conv(.remove, cid, members: ["Jerry"])
            assertCode(try await alice.request(kick), 4308, "CONVERSATION_NOT_ALLOWED", "\(mode) member kicks manager")
            kick.m = ["Alice"]
            let reply15 = try await bob.request(kick)
            XCTAssertEqual(reply15.allowedPids, ["Alice"], "\(mode) manager kicks member")
            kick.m = ["Jerry"]
            assertCode(try await bob.request(kick), 4308, "CONVERSATION_NOT_ALLOWED", "\(mode) manager kicks manager")
            // The owner: demotes, removes anyone; the owner's role never changes.
            let reply16 = try await tom.request(setRole("Bob", "Member", in: cid))
            XCTAssertEqual(reply16.role, "Member")
            assertCode(try await tom.request(setRole("Tom", "Member", in: cid)), 4308, "CONVERSATION_NOT_ALLOWED", "\(mode)")
            assertCode(try await tom.request(setRole("Bob", "Owner", in: cid)), 4903, "INVALID_FIELD", "\(mode)")
            assertCode(try await tom.request(setRole("Alice", "Manager", in: cid)), 4401, "INVALID_MESSAGING_TARGET", "\(mode)")
            let reply17 = try await tom.request(kick)
            XCTAssertEqual(reply17.allowedPids, ["Jerry"], "\(mode) owner kicks manager")
            for client in c { await client.close() }
        }
    }

    /// `GET /1.1/classes/_ConversationMemberInfo`, as the JS SDK's `getAllMemberInfo()` sends it.
    private func memberInfo(_ port: Int, cid: String, token: String?, clientID: String? = nil) async throws -> (Int, [String: Any]) {
        var components = URLComponents(string: "http://127.0.0.1:\(port)/1.1/classes/_ConversationMemberInfo")!
        components.queryItems = [URLQueryItem(name: "where", value: #"{"cid":"\#(cid)"}"#)]
        if let clientID { components.queryItems?.append(URLQueryItem(name: "client_id", value: clientID)) }
        var request = URLRequest(url: components.url!)
        if let token { request.setValue(token, forHTTPHeaderField: "X-LC-IM-Session-Token") }
        let (data, response) = try await URLSession.shared.data(for: request)
        let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, object)
    }

    func testMemberInfoEndpointAnswersMembersWithAValidSessionToken() async throws {
        let server = try await startServer()
        var tokens: [String: String] = [:]
        var clients: [String: WireClient] = [:]
        for id in ["Tom", "Jerry", "Bob", "Eve"] {
            let client = try await WireClient.connect(port: server.port, mode: .binary)
            var open = Command(cmd: .session, op: .open)
            open.peerId = id
            let opened = try await client.request(open)
            tokens[id] = try XCTUnwrap(opened.st, "session opened carries st")
            clients[id] = client
        }
        let tom = try XCTUnwrap(clients["Tom"])
        let cid = try await tom.startConversation(members: ["Jerry", "Bob"])
        _ = try await tom.request(setRole("Jerry", "Manager", in: cid))

        let (status, body) = try await memberInfo(server.port, cid: cid, token: tokens["Bob"], clientID: "Bob")
        XCTAssertEqual(status, 200, "\(body)")
        let results = try XCTUnwrap(body["results"] as? [[String: Any]])
        let roles = Dictionary(uniqueKeysWithValues: results.map { ($0["clientId"] as? String ?? "", $0["role"] as? String ?? "") })
        XCTAssertEqual(roles, ["Tom": "Owner", "Jerry": "Manager", "Bob": "Member"])
        XCTAssertEqual(Set(results.compactMap { $0["cid"] as? String }), [cid])

        // Refused with a code and a reason: no token, an unknown one, another client's, an outsider's.
        for (token, clientID, status, code) in [
            (nil, nil, 401, 4112), ("not-a-token", nil, 401, 4112), (tokens["Bob"], "Tom", 400, 4103), (tokens["Eve"], nil, 403, 4317),
        ] as [(String?, String?, Int, Int)] {
            let (answered, error) = try await memberInfo(server.port, cid: cid, token: token, clientID: clientID)
            XCTAssertEqual(answered, status, "\(error)")
            XCTAssertEqual(error["code"] as? Int, code, "\(error)")
            XCTAssertNotNil(error["reason"] as? String)
            XCTAssertNil(error["results"])
        }
        // A closed session's token no longer answers.
        _ = try await tom.request(Command(cmd: .session, op: .close))
        let (closed, _) = try await memberInfo(server.port, cid: cid, token: tokens["Tom"])
        XCTAssertEqual(closed, 401)
        for client in clients.values { await client.close() }
    }

    /// Mutes, blocks and roles are stored: a restarted server still enforces them.
    func testControlsSurviveARestart() async throws {
        let server = try await ServerHarness.start()
        var tom = try await WireClient.login("Tom", port: server.port, mode: .binary)
        let cid = try await tom.startConversation(members: ["Jerry", "Bob", "Alice"])
        _ = try await tom.request(mute(["Jerry"], in: cid, reason: "until further notice"))
        _ = try await tom.request(blacklist(.block, ["Bob"], in: cid))
        _ = try await tom.request(setRole("Alice", "Manager", in: cid))
        await tom.close()
        let restarted = try await server.restarted()
        tom = try await WireClient.login("Tom", port: restarted.port, mode: .binary)
        let jerry = try await WireClient.login("Jerry", port: restarted.port, mode: .json)
        let bob = try await WireClient.login("Bob", port: restarted.port, mode: .json)
        let alice = try await WireClient.login("Alice", port: restarted.port, mode: .json)
        assertCode(try await jerry.sendText("hello?", to: cid), 4905, "MEMBER_MUTED", "after a restart")
        let join = Command.conv(.join, cid)
        assertCode(try await bob.request(join), 4315, "CONVERSATION_BLACKLISTED", "after a restart")
        let unmuted = try await alice.request(unmute(["Jerry"], in: cid))
        XCTAssertEqual(unmuted.allowedPids, ["Jerry"], "the manager is still one: \(unmuted)")
        let ack = try await jerry.sendText("thanks", to: cid)
        XCTAssertNil(ack.code)
        for client in [tom, jerry, bob, alice] { await client.close() }
        await restarted.stop()
    }

    /// Nodes sharing one PostgreSQL database: a mute made on one node applies on another within a second
    /// (each node re-reads a conversation's controls it cached more than a second ago), and its events
    /// reach members on every node.
    func testMuteMadeOnOneNodeAppliesOnAnother() async throws {
        guard TestDatabase.backend == .postgres else { throw XCTSkip("nodes share a PostgreSQL database") }
        let url = try TestDatabase.postgresURL(schema: TestDatabase.schemaName())
        let first = try await ServerHarness.start { $0.databaseURL = url }
        let second = try await ServerHarness.start { $0.databaseURL = url }
        let tom = try await WireClient.login("Tom", port: first.port, mode: .binary)
        let jerry = try await WireClient.login("Jerry", port: second.port, mode: .json)
        let cid = try await tom.startConversation(members: ["Jerry"])
        // Jerry's node caches the conversation's (empty) controls.
        let before = try await jerry.sendText("before", to: cid)
        XCTAssertNil(before.code, "\(before)")
        _ = try await tom.request(mute(["Jerry"], in: cid))
        let event = try await jerry.next { $0.op == .shutuped }
        XCTAssertEqual(event.initBy, "Tom")
        let start = ContinuousClock.now
        var refused: Command?
        while ContinuousClock.now - start < .seconds(3) {
            let ack = try await jerry.sendText("still allowed?", to: cid)
            if ack.code != nil {
                refused = ack
                break
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        let refusal = try XCTUnwrap(refused, "the other node never applied the mute")
        XCTAssertEqual(refusal.code, 4905)
        XCTAssertLessThan(ContinuousClock.now - start, .milliseconds(1_500), "applied within a second (and a send)")
        await tom.close()
        await jerry.close()
        await first.stop()
        await second.stop()
    }

    /// What LeanCloud's JS SDK reads from the replies and events lies in the LeanCloud fields, not in
    /// Hookbot's extension field.
    func testSDKReadsLeanCloudFields() throws {
        var result = Command(cmd: .blacklist, op: .queryResult, i: 3)
        result.srcCid = "c1"
        result.blockedPids = ["Jerry", "Bob"]
        result.next = "2"
        var g = try ProtobufCommandCodec.generic(from: result)
        XCTAssertEqual(g.cmd, .blacklist)
        XCTAssertEqual(g.op, .queryResult)
        XCTAssertEqual(g.blacklistMessage.blockedPids, ["Jerry", "Bob"])
        XCTAssertEqual(g.blacklistMessage.next, "2")
        XCTAssertFalse(g.hasHookbotFields)

        var blocked = Command(cmd: .blacklist, op: .blocked, i: 4)
        blocked.srcCid = "c1"
        blocked.allowedPids = ["Jerry"]
        blocked.failedPids = [FailedPids(pids: ["Tom"], error: IMError(.conversationNotAllowed, "owner"))]
        g = try ProtobufCommandCodec.generic(from: blocked)
        XCTAssertEqual(g.op, .blocked)
        XCTAssertEqual(g.blacklistMessage.allowedPids, ["Jerry"])
        XCTAssertEqual(g.blacklistMessage.failedPids.first?.code, 4308)
        XCTAssertEqual(g.blacklistMessage.failedPids.first?.pids, ["Tom"])

        var shutup = Command(cmd: .conv, op: .shutupResult, i: 5)
        shutup.cid = "c1"
        shutup.m = ["Jerry"]
        shutup.next = "10"
        g = try ProtobufCommandCodec.generic(from: shutup)
        XCTAssertEqual(g.op, .shutupResult)
        XCTAssertEqual(g.convMessage.m, ["Jerry"])
        XCTAssertEqual(g.convMessage.next, "10")
        XCTAssertFalse(g.hasHookbotFields)

        var info = Command.conv(.memberInfoChanged, "c1")
        info.targetClientId = "Jerry"
        info.role = "Manager"
        info.initBy = "Tom"
        g = try ProtobufCommandCodec.generic(from: info)
        XCTAssertEqual(g.op, .memberInfoChanged)
        XCTAssertEqual(g.convMessage.info.pid, "Jerry")
        XCTAssertEqual(g.convMessage.info.role, "Manager")
        XCTAssertEqual(g.convMessage.initBy, "Tom")

        for (op, lc) in [
            (OpType.membersShutuped, LCProtoOpType.membersShutuped), (.shutuped, .shutuped), (.membersBlocked, .membersBlocked),
        ] {
            var event = Command(cmd: .conv, op: op)
            event.cid = "c1"
            event.m = ["Jerry"]
            event.initBy = "Tom"
            g = try ProtobufCommandCodec.generic(from: event)
            XCTAssertEqual(g.op, lc)
            XCTAssertEqual(g.convMessage.m, ["Jerry"])
            XCTAssertFalse(g.hasHookbotFields)
        }
        // The SDK's own request frames decode to the model's fields.
        var request = LCProtoGenericCommand()
        request.cmd = .blacklist
        request.op = .block
        request.i = 7
        request.blacklistMessage.srcCid = "c1"
        request.blacklistMessage.toPids = ["Jerry"]
        let decoded = try ProtobufCommandCodec().decode(try request.serializedBytes() as [UInt8])
        XCTAssertEqual(decoded.first?.cmd, .blacklist)
        XCTAssertEqual(decoded.first?.op, .block)
        XCTAssertEqual(decoded.first?.srcCid, "c1")
        XCTAssertEqual(decoded.first?.toPids, ["Jerry"])
        var update = LCProtoGenericCommand.conv(.memberInfoUpdate, cid: "c1")
        update.convMessage.targetClientID = "Jerry"
        update.convMessage.info.pid = "Jerry"
        update.convMessage.info.role = "Manager"
        let roleUpdate = try ProtobufCommandCodec().decode(try update.serializedBytes() as [UInt8])
        XCTAssertEqual(roleUpdate.first?.op, .memberInfoUpdate)
        XCTAssertEqual(roleUpdate.first?.targetClientId, "Jerry")
        XCTAssertEqual(roleUpdate.first?.role, "Manager")
    }
}

extension Command {
    fileprivate static func queryShutup(_ cid: String) -> Command {
        let command = Command.conv(.queryShutup, cid)
        return command
    }
}
