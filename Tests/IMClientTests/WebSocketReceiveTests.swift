import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import XCTest

/// The SDK's WebSocket (`WebSocketChannel`): what arrives in one read is handled in order and acknowledged
/// together, pings keep an idle connection, against a real server on loopback.
final class WebSocketReceiveTests: XCTestCase {
    /// Jerry is offline while Tom sends 40 messages (Chinese, emoji, a mention); when he logs in, the backlog
    /// arrives in bursts. He gets every message once, in order, and acknowledges them: a later login on a new
    /// device (a client that has seen nothing) gets none of them again.
    func testABacklogArrivesInOrderAndIsAcknowledged() async throws {
        let server = try await ServerHarness.start()
        let tom = server.client("Tom")
        _ = try await openClients([tom])
        let group = try await tom.createConversation(name: "周末聚会 🎉", members: ["Jerry", "Bob"])
        var sent: [IMMessage] = []
        for k in 0..<40 {
            let text = k % 3 == 0 ? "第\(k)条：明天见 👋" : k % 3 == 1 ? "@Jerry are you coming? #\(k)" : "ok \(k) 🍕"
            sent.append(try await group.send(.text(text)))
        }

        let jerry = server.client("Jerry")
        let jerryEvents = EventLog(jerry)
        try await jerry.open()
        let backlog = try await jerryEvents.messages(40, in: group.id)
        XCTAssertEqual(backlog.map(\.id), sent.map(\.id))
        XCTAssertEqual(backlog.map(\.content.text), sent.map(\.content.text))
        XCTAssertTrue(backlog.allSatisfy(\.isOffline))
        let again = await jerryEvents.settle().compactMap(\.receivedMessage)
        XCTAssertEqual(again.map(\.id), [], "messages delivered twice")

        // A message while he is online arrives live, then he leaves; the acks went out before the close.
        let live = try await group.send(.text("最后一条 ✅"))
        let atJerry = try await jerryEvents.message(in: group.id)
        XCTAssertEqual(atJerry.id, live.id)
        XCTAssertFalse(atJerry.isOffline)
        await jerry.close()

        let jerryElsewhere = server.client("Jerry")
        let elsewhereEvents = EventLog(jerryElsewhere)
        try await jerryElsewhere.open()
        let redelivered = await elsewhereEvents.settle(for: .milliseconds(600)).compactMap(\.receivedMessage)
        XCTAssertEqual(redelivered.map(\.id), [], "acknowledged messages were delivered again")
        let next = try await group.send(.text("still here?"))
        let atElsewhere = try await elsewhereEvents.message(in: group.id)
        XCTAssertEqual(atElsewhere.id, next.id)

        await tom.close()
        await jerryElsewhere.close()
        await server.stop()
    }

    /// With pings every 50 ms the server's pongs keep an idle connection open: after a second of silence the
    /// client is still opened on its first connection and sends and receives.
    func testPingsKeepAnIdleConnection() async throws {
        let server = try await ServerHarness.start()
        let tom = server.client("Tom") { $0.pingInterval = .milliseconds(50) }
        let jerry = server.client("Jerry")
        let logs = try await openClients([tom, jerry])
        try await Task.sleep(for: .seconds(1))
        let connection = logs[0].history.filter(\.isConnectionEvent)
        XCTAssertEqual(connection.count, 1, "Tom's connection changed while idle: \(connection)")
        let conversation = try await tom.createConversation(members: ["Jerry"])
        let sent = try await conversation.send(.text("还在吗？"))
        let received = try await logs[1].message(in: conversation.id)
        XCTAssertEqual(received.id, sent.id)
        let reply = try await jerry.conversation(conversation.id).send(.text("在 🙂"))
        let atTom = try await logs[0].message(in: conversation.id)
        XCTAssertEqual(atTom.id, reply.id)
        let state = await tom.state
        XCTAssertEqual(state, .opened)
        await tom.close()
        await jerry.close()
        await server.stop()
    }
}
