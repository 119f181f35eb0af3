import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import XCTest

/// Membership, conversation data, queries, recall, read state, cmd and transient messages, history.
final class ConversationTests: XCTestCase {
    func testMembershipEvents() async throws {
        let server = try await startServer()
        let clients = ["Jerry", "Bob", "Harry", "William"].map { server.client($0) }
        let logs = try await openClients(clients)
        let (jerry, bob, harry, william) = (clients[0], clients[1], clients[2], clients[3])
        let conversation = try await jerry.createConversation(name: "Tom and friends", members: ["Bob"])

        let added = try await conversation.add(members: ["Harry"])
        XCTAssertEqual(added, ["Harry"])
        let invitedBy = try await logs[2].next("invited") {
            if case .invited(let cid, let by) = $0, cid == conversation.id { by } else { nil }
        }
        XCTAssertEqual(invitedBy, "Jerry")
        let joined = try await logs[1].next("members joined") {
            if case .membersJoined(let cid, let members, let by, _) = $0, cid == conversation.id, members == ["Harry"] {
                (members, by ?? "")
            } else {
                nil
            }
        }
        XCTAssertEqual(joined.0, ["Harry"])
        XCTAssertEqual(joined.1, "Jerry")

        try await william.conversation(conversation.id).join()
        _ = try await logs[3].next("joined") { if case .joined(let cid, _) = $0, cid == conversation.id { true } else { nil } }
        let williamJoined = try await logs[0].next("William joined") {
            if case .membersJoined(_, let members, _, _) = $0, members == ["William"] { true } else { nil }
        }
        XCTAssertTrue(williamJoined)
        let count = try await conversation.countMembers()
        XCTAssertEqual(count, 4)

        let removed = try await conversation.remove(members: ["Harry"])
        XCTAssertEqual(removed, ["Harry"])
        let kickedBy = try await logs[2].next("kicked") {
            if case .kicked(let cid, let by) = $0, cid == conversation.id { by } else { nil }
        }
        XCTAssertEqual(kickedBy, "Jerry")
        do {
            try await harry.conversation(conversation.id).send(.text("let me in"))
            XCTFail("a removed member sent a message")
        } catch {
            XCTAssertEqual(error.knownCode, .invalidMessagingTarget)
        }

        try await bob.conversation(conversation.id).quit()
        _ = try await logs[1].next("left") { if case .left(let cid, _) = $0, cid == conversation.id { true } else { nil } }
        let left = try await logs[0].next("Bob left") {
            if case .membersLeft(_, let members, let by) = $0, members == ["Bob"] { by } else { nil }
        }
        XCTAssertEqual(left, "Bob")
        let fetched = try await XCTUnwrapAsync(try await conversation.fetch())
        XCTAssertEqual(Set(fetched.members ?? []), ["Jerry", "William"])
        XCTAssertEqual(fetched.creator, "Jerry")

        for client in clients { await client.close() }
    }

    func testUpdateMuteAndQuery() async throws {
        let server = try await startServer()
        let ((tom, jerry), logs) = try await openedClients(of: server, "Tom", "Jerry")
        let conversation = try await tom.createConversation(
            name: "Cat and mouse", members: ["Jerry"],
            attributes: ["type": "private", "pinned": true, "settings": ["color": "blue", "size": 3]])
        let unique1 = try await tom.createConversation(members: ["Jerry"], options: .unique)
        let unique2 = try await jerry.createConversation(members: ["Tom"], options: .unique)
        XCTAssertEqual(unique1.id, unique2.id)
        XCTAssertNotEqual(unique1.id, conversation.id)

        try await conversation.update(name: "Tom & Jerry", attributes: ["settings.color": "red"], removingAttributes: ["pinned"])
        let update = try await logs[1].next("updated") {
            if case .conversationUpdated(let cid, let patch, let by, _) = $0, cid == conversation.id { (patch, by) } else { nil }
        }
        XCTAssertEqual(update.0["name"], "Tom & Jerry")
        XCTAssertEqual(update.0["attr.settings.color"], "red")
        XCTAssertEqual(update.1, "Tom")
        let fetched = try await XCTUnwrapAsync(try await tom.fetchConversation(id: conversation.id))
        XCTAssertEqual(fetched.name, "Tom & Jerry")
        XCTAssertEqual(fetched.attributes?["settings"], ["color": "red", "size": 3])
        XCTAssertNil(fetched.attributes?["pinned"])
        XCTAssertEqual(fetched.attributes?["type"], "private")

        try await jerry.conversation(conversation.id).mute()
        let muted = try await tom.fetchConversation(id: conversation.id)
        XCTAssertEqual(muted?.mutedMembers, ["Jerry"])
        try await jerry.conversation(conversation.id).unmute()
        let unmuted = try await tom.fetchConversation(id: conversation.id)
        XCTAssertEqual(unmuted?.mutedMembers ?? [], [])

        let byName = try await tom.conversations(matching: IMConversationQuery().whereKey("name", matchesRegex: "^tom", options: "i"))
        XCTAssertEqual(byName.map(\.id), [conversation.id])
        let byAttr = try await tom.conversations(
            matching: IMConversationQuery()
                .whereKey(IMConversationQuery.attr("settings.size"), greaterThan: 2)
                .whereKey(IMConversationQuery.attr("settings.size"), lessThan: 4))
        XCTAssertEqual(byAttr.map(\.id), [conversation.id])
        let contains = try await tom.conversations(matching: IMConversationQuery().whereKey("name", containsString: "& Jer"))
        XCTAssertEqual(contains.map(\.id), [conversation.id])
        let withMembers = try await tom.conversations(
            matching: IMConversationQuery()
                .whereKey("m", containsAll: ["Tom", "Jerry"]).sort(by: "createdAt"))
        XCTAssertEqual(withMembers.map(\.id), [conversation.id, unique1.id])
        let paged = try await tom.conversations(
            matching: IMConversationQuery()
                .whereMember("Tom").sort(by: "createdAt", descending: true).skip(1).limit(1))
        XCTAssertEqual(paged.map(\.id), [conversation.id])
        let notPrivate = try await tom.conversations(
            matching: IMConversationQuery()
                .whereMember("Tom").whereKey(IMConversationQuery.attr("type"), notEqualTo: "private"))
        XCTAssertEqual(notPrivate.map(\.id), [unique1.id])
        let withType = try await tom.conversations(
            matching: IMConversationQuery().whereMember("Tom").whereKeyExists(IMConversationQuery.attr("type")))
        XCTAssertEqual(withType.map(\.id), [conversation.id])
        let either = try await tom.conversations(
            matching: .or([
                IMConversationQuery().whereKey("objectId", equalTo: .string(unique1.id)),
                IMConversationQuery().whereKey("name", equalTo: "Tom & Jerry"),
            ]).sort(by: "createdAt"))
        XCTAssertEqual(either.map(\.id), [conversation.id, unique1.id])
        let missing = try await tom.fetchConversation(id: "000000000000000000000000")
        XCTAssertNil(missing)
        do {
            _ = try await tom.conversations(matching: IMConversationQuery().whereKey("nonsense", equalTo: 1))
            XCTFail("a query on an unknown field succeeded")
        } catch {
            XCTAssertEqual(error.knownCode, .invalidField)
            XCTAssertNotNil(error.detail)
        }
    }

    func testRecallReadCmdAndTransient() async throws {
        let server = try await startServer()
        let ((tom, jerry), logs) = try await openedClients(of: server, "Tom", "Jerry")
        let (tomEvents, jerryEvents) = (logs[0], logs[1])
        let conversation = try await tom.createConversation(members: ["Jerry"])

        let oops = try await conversation.send(.text("oops"))
        _ = try await jerryEvents.message(in: conversation.id)
        let recalled = try await conversation.recall(oops)
        XCTAssertTrue(recalled.isRecalled)
        let atJerry = try await jerryEvents.next("recalled") { if case .recalled(let m) = $0 { m } else { nil } }
        XCTAssertEqual(atJerry.id, oops.id)
        XCTAssertEqual(atJerry.content.messageType, MessageType.recalled.rawValue)
        let history = try await conversation.messages()
        XCTAssertEqual(history.first?.status, .recalled)

        let important = try await conversation.send(.text("read me"), options: IMSendOptions(receipt: true, priority: .high))
        let received = try await jerryEvents.message(in: conversation.id)
        XCTAssertEqual(received.priority, .high)
        try await jerry.conversation(conversation.id).markRead()
        let read = try await tomEvents.next("read receipt") { if case .read(let r) = $0 { r } else { nil } }
        XCTAssertEqual(read.by, "Jerry")
        XCTAssertEqual(read.timestamp, important.timestamp)

        let typing = try await conversation.send(.text("Tom is typing…"), options: .transient)
        XCTAssertTrue(typing.isTransient)
        let transient = try await jerryEvents.message(in: conversation.id)
        XCTAssertTrue(transient.isTransient)
        XCTAssertEqual(transient.id, typing.id)

        let cmd = try await conversation.sendCmd(action: "game.move", ext: ["x": 3, "y": 4, "capture": true, "piece": "knight"])
        let cmdAtJerry = try await jerryEvents.next("cmd") { if case .cmd(let c) = $0 { c } else { nil } }
        XCTAssertEqual(cmdAtJerry.action, "game.move")
        XCTAssertEqual(cmdAtJerry.ext["piece"], "knight")
        XCTAssertEqual(cmdAtJerry.ext["x"], 3)
        XCTAssertEqual(cmdAtJerry.from, "Tom")
        XCTAssertEqual(cmdAtJerry.id, cmd.id)
        do {
            try await conversation.sendCmd(action: "hookbot.reserved")
            XCTFail("a reserved action was accepted")
        } catch {
            XCTAssertEqual(error.knownCode, .invalidField)
        }

        let stored = try await conversation.messages(limit: 10)
        XCTAssertEqual(stored.map(\.id), [oops.id, important.id], "transient or cmd messages were stored")
    }

    func testUnreadCountsAtLogin() async throws {
        let server = try await startServer()
        let tom = try await openedClient(of: server, "Tom")
        let conversation = try await tom.createConversation(members: ["Jerry"])
        for k in 0..<3 { try await conversation.send(.text("unread \(k)")) }
        let jerry = server.client("Jerry")
        let events = EventLog(jerry)
        try await jerry.open()
        let unread = try await events.next("unread") { if case .unread(let counts) = $0 { counts } else { nil } }
        XCTAssertEqual(unread.first?.conversationId, conversation.id)
        XCTAssertEqual(unread.first?.count, 3)
        XCTAssertEqual(unread.first?.lastMessage?.content.text, "unread 2")
        await jerry.close()
    }

    func testHistoryPaging() async throws {
        let server = try await startServer()
        let tom = try await openedClient(of: server, "Tom")
        let conversation = try await tom.createConversation(members: ["Jerry"])
        var sent: [IMMessage] = []
        for k in 0..<25 { sent.append(try await conversation.send(.text("m\(k)"))) }
        let newest = try await conversation.messages(limit: 10)
        XCTAssertEqual(newest.map(\.id), sent[15...].map(\.id))
        XCTAssertTrue(newest.allSatisfy { $0.status == .sent && $0.from == "Tom" })
        let previous = try await conversation.messages(before: try XCTUnwrap(newest.first), limit: 10)
        XCTAssertEqual(previous.map(\.id), sent[5..<15].map(\.id))
        let first = try await conversation.messages(beforeTimestamp: try XCTUnwrap(previous.first).timestamp, limit: 10)
        XCTAssertEqual(first.map(\.id), sent[..<5].map(\.id))
        let after = try await conversation.messages(afterTimestamp: sent[20].timestamp, limit: 100)
        XCTAssertEqual(after.map(\.id), sent[21...].map(\.id))
    }

    /// The raw escape hatch: any command as a request; errors come back as IMError; unknown commands the
    /// server sends arrive as events.
    func testRawCommands() async throws {
        let server = try await startServer()
        let tom = try await openedClient(of: server, "Tom")
        let echo = try await tom.send(Command(cmd: .echo))
        XCTAssertEqual(echo.cmd, .echo)
        XCTAssertNotNil(echo.t)
        do {
            var logs = Command(cmd: .logs)
            logs.cid = "nope"
            _ = try await tom.send(logs)
            XCTFail("logs of an unknown conversation succeeded")
        } catch {
            XCTAssertEqual(error.knownCode, .invalidMessagingTarget)
        }
    }
}

/// `XCTUnwrap` for an awaited optional.
func XCTUnwrapAsync<T>(_ value: @autoclosure () async throws -> T?, file: StaticString = #filePath, line: UInt = #line) async throws -> T {
    let resolved = try await value()
    return try XCTUnwrap(resolved, file: file, line: line)
}
