import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import XCTest

/// An application type: a poke with a strength.
struct Poke: IMCustomMessage, Codable, Equatable {
    static let messageType = 7
    var strength: Int
    var note: String
}

/// The reference guide's scenarios, against a real server on loopback.
final class ScenarioTests: XCTestCase {
    /// Tom creates a conversation with Jerry and sends him a text; Jerry receives it; Tom gets a receipt.
    func testTomSendsToJerry() async throws {
        let server = try await startServer()
        let ((tom, jerry), logs) = try await openedClients(of: server, "Tom", "Jerry")
        let (tomEvents, jerryEvents) = (logs[0], logs[1])
        let secondJerryListener = EventLog(jerry)
        let opened = try await tomEvents.next("opened") { if case .opened = $0 { true } else { nil } }
        XCTAssertTrue(opened)
        let state = await tom.state
        XCTAssertEqual(state, .opened)

        let conversation = try await tom.createConversation(name: "Tom & Jerry", members: ["Jerry"])
        XCTAssertEqual(conversation.members, ["Jerry", "Tom"])
        let sent = try await conversation.send(.text("Jerry, wake up!", attributes: ["mood": "cheerful"]), options: .receipt)
        XCTAssertEqual(sent.status, .sent)

        let received = try await jerryEvents.message(in: conversation.id)
        XCTAssertEqual(received.id, sent.id)
        let atSecondSubscriber = try await secondJerryListener.message(in: conversation.id)
        XCTAssertEqual(atSecondSubscriber.id, sent.id)
        XCTAssertEqual(received.from, "Tom")
        XCTAssertEqual(received.timestamp, sent.timestamp)
        XCTAssertEqual(received.content.text, "Jerry, wake up!")
        XCTAssertEqual(received.content.attributes?["mood"], "cheerful")
        XCTAssertEqual(received.content.messageType, MessageType.text.rawValue)
        XCTAssertFalse(received.isOffline)
        XCTAssertTrue(received.receiptRequested)

        let receipt = try await tomEvents.next("receipt") { if case .delivered(let r) = $0 { r } else { nil } }
        XCTAssertEqual(receipt.messageId, sent.id)
        XCTAssertEqual(receipt.by, "Jerry")

        let reply = try await jerry.conversation(conversation.id).send(.text("Five more minutes"))
        let atTom = try await tomEvents.message(in: conversation.id)
        XCTAssertEqual(atTom.id, reply.id)
        XCTAssertEqual(atTom.content.text, "Five more minutes")
    }

    /// Tom's group with Jerry, Bob, Harry and William: everyone online gets Tom's message and Bob's reply;
    /// William, offline, gets both when he logs in.
    func testTomsGroupOfFive() async throws {
        let server = try await startServer()
        let online = ["Tom", "Jerry", "Bob", "Harry"].map { server.client($0) }
        let logs = try await openClients(online)
        let group = try await online[0].createConversation(name: "Tom and friends", members: ["Jerry", "Bob", "Harry", "William"])
        let question = try await group.send(.text("Where are you?"))
        for log in logs.dropFirst() {
            let message = try await log.message(in: group.id)
            XCTAssertEqual(message.id, question.id)
            XCTAssertEqual(message.content.text, "Where are you?")
        }
        let answer = try await online[2].conversation(group.id).send(.text("At Jerry's. When are you and Harry coming?"))
        for index in [0, 1, 3] {
            let message = try await logs[index].message(in: group.id)
            XCTAssertEqual(message.id, answer.id)
            XCTAssertEqual(message.from, "Bob")
        }

        let william = server.client("William")
        let williamEvents = EventLog(william)
        try await william.open()
        let backlog = try await williamEvents.messages(2, in: group.id)
        XCTAssertEqual(backlog.map(\.id), [question.id, answer.id])
        XCTAssertTrue(backlog.allSatisfy(\.isOffline))
        let members = try await william.conversation(group.id).countMembers()
        XCTAssertEqual(members, 5)

        for client in online + [william] { await client.close() }
    }

    /// Jerry is offline while Tom sends; when he logs in, the messages arrive once, in order, and not again
    /// at the next login.
    func testJerryOfflineThenOnline() async throws {
        let server = try await startServer()
        let tom = try await openedClient(of: server, "Tom")
        let conversation = try await tom.createConversation(members: ["Jerry"])
        var sent: [IMMessage] = []
        for k in 0..<5 { sent.append(try await conversation.send(.text("message \(k)"))) }

        let jerry = server.client("Jerry")
        let jerryEvents = EventLog(jerry)
        try await jerry.open()
        let received = try await jerryEvents.messages(5, in: conversation.id)
        XCTAssertEqual(received.map(\.id), sent.map(\.id))
        XCTAssertEqual(received.map(\.content.text), (0..<5).map { "message \($0)" })
        XCTAssertTrue(received.allSatisfy(\.isOffline))
        let live = try await conversation.send(.text("you are back"))
        let liveAtJerry = try await jerryEvents.message(in: conversation.id)
        XCTAssertEqual(liveAtJerry.id, live.id)
        XCTAssertFalse(liveAtJerry.isOffline)
        await jerry.close()

        let jerryAgain = server.client("Jerry")
        let againEvents = EventLog(jerryAgain)
        try await jerryAgain.open()
        let extra = await againEvents.settle().compactMap(\.receivedMessage)
        XCTAssertEqual(extra.map(\.id), [], "acknowledged messages were delivered again")

        let history = try await jerryAgain.conversation(conversation.id).messages(limit: 10)
        XCTAssertEqual(history.map(\.id), sent.map(\.id) + [live.id])
        await jerryAgain.close()
    }

    /// Tom hosts a chat room; Jerry and Bob join; everyone in the room gets the messages.
    func testChatRoom() async throws {
        let server = try await startServer()
        let clients = ["Tom", "Jerry", "Bob"].map { server.client($0) }
        let logs = try await openClients(clients)
        let room = try await clients[0].createChatRoom(name: "HelloKitty vs Garfield", attributes: ["topic": "pageant"])
        XCTAssertTrue(room.isChatRoom)
        try await room.join()
        for client in clients.dropFirst() {
            let found = try await client.conversations(
                matching: IMConversationQuery()
                    .whereKey(IMConversationQuery.attr("topic"), equalTo: "pageant")
                    .whereKey("tr", equalTo: true))
            XCTAssertEqual(found.map(\.id), [room.id])
            XCTAssertTrue(found[0].isChatRoom)
            try await found[0].join()
        }
        let online = try await room.countMembers()
        XCTAssertEqual(online, 3)

        let cheer = try await room.send(.text("Welcome to the show"))
        for log in logs.dropFirst() {
            let message = try await log.message(in: room.id)
            XCTAssertEqual(message.id, cheer.id)
        }
        try await clients[2].conversation(room.id).quit()
        let afterQuit = try await room.countMembers()
        XCTAssertEqual(afterQuit, 2)

        for client in clients { await client.close() }
    }

    /// A custom type registered by Tom but not by Jerry: Jerry gets a generic typed message with its
    /// fields; Jerry sends the same type back as a generic typed message and Tom decodes it to `Poke`.
    func testCustomTypeRegisteredOnOneSideOnly() async throws {
        let server = try await startServer()
        let tomRegistry = IMMessageRegistry()
        try tomRegistry.register(Poke.self)
        let tom = server.client("Tom", registry: tomRegistry)
        let jerry = server.client("Jerry")
        let logs = try await openClients([tom, jerry])
        let conversation = try await tom.createConversation(members: ["Jerry"])

        let sent = try await conversation.send(Poke(strength: 3, note: "wake up"))
        XCTAssertEqual(sent.content.as(Poke.self), Poke(strength: 3, note: "wake up"))
        let atJerry = try await logs[1].message(in: conversation.id)
        guard case .typed(let typed) = atJerry.content else { return XCTFail("expected a generic typed message, got \(atJerry.content)") }
        XCTAssertEqual(typed.type, 7)
        XCTAssertEqual(typed.fields["strength"], 3)
        XCTAssertEqual(typed.fields["note"], "wake up")

        var back = TypedMessage(type: 7, fields: ["strength": 5, "note": "go away"])
        back.attributes = ["via": "generic"]
        try await jerry.conversation(conversation.id).send(.typed(back))
        let atTom = try await logs[0].message(in: conversation.id)
        XCTAssertEqual(atTom.content.as(Poke.self), Poke(strength: 5, note: "go away"))
        XCTAssertEqual(atTom.typedMessage?.attributes?["via"], "generic")

        let history = try await tom.conversation(conversation.id).messages(limit: 10)
        XCTAssertEqual(history.compactMap { $0.content.as(Poke.self)?.strength }, [3, 5])

        await tom.close()
        await jerry.close()
    }

    /// Rich media message kinds survive the round trip.
    func testMediaMessages() async throws {
        let server = try await startServer()
        let ((tom, jerry), logs) = try await openedClients(of: server, "Tom", "Jerry")
        let conversation = try await tom.createConversation(members: ["Jerry"])
        let photo = FileInfo(url: "https://example.com/potala.jpg", name: "potala.jpg", format: "jpg", size: 1024, width: 640, height: 480)
        let contents: [IMMessageContent] = [
            .image(photo, text: "The sky", attributes: ["location": "Lhasa"]),
            .audio(FileInfo(url: "https://example.com/a.m4a", duration: 3.5)),
            .video(FileInfo(url: "https://example.com/v.mp4", duration: 10)),
            .file(FileInfo(url: "https://example.com/f.pdf", name: "f.pdf")),
            .location(Location(latitude: 29.65, longitude: 91.11), text: "here"),
            .common("plain body, not typed JSON"),
        ]
        for content in contents { try await conversation.send(content) }
        let received = try await logs[1].messages(contents.count, in: conversation.id)
        // A URL-only file gets the objId of the server's external file record (LeanCloud's typed-messages
        // plugin needs one); everything else arrives as sent.
        var file = received[0].content.typedMessage?.file
        XCTAssertNotNil(file?.objId)
        file?.objId = nil
        XCTAssertEqual(file, photo)
        XCTAssertEqual(received[0].content.attributes?["location"], "Lhasa")
        XCTAssertEqual(received[0].content.messageType, MessageType.image.rawValue)
        XCTAssertEqual(received[1].content.typedMessage?.file?.duration, 3.5)
        XCTAssertEqual(received[2].content.messageType, MessageType.video.rawValue)
        XCTAssertEqual(received[3].content.typedMessage?.file?.name, "f.pdf")
        XCTAssertEqual(received[4].content.typedMessage?.location, Location(latitude: 29.65, longitude: 91.11))
        guard case .common(let body) = received[5].content else { return XCTFail("expected a common message") }
        XCTAssertEqual(body, "plain body, not typed JSON")
    }
}
