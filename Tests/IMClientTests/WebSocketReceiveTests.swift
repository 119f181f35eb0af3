import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import XCTest

/// The SDK's WebSocket (`WebSocketChannel`): what arrives in one read is handled in order and acknowledged
/// together, pings keep an idle connection, against a real server on loopback.
final class WebSocketReceiveTests: XCTestCase {
    /// Tom submits 40 messages at once (Chinese, emoji, a mention) to a group; they reach Jerry in bursts of
    /// several per read. He gets each once, in order, and acknowledges them: Jerry logging in on another device
    /// (a client that has seen nothing) gets none of them again.
    func testABurstArrivesInOrderOnceAndIsAcknowledged() async throws {
        let server = try await ServerHarness.start()
        let tom = server.client("Tom")
        let jerry = server.client("Jerry")
        let logs = try await openClients([tom, jerry])
        let group = try await tom.createConversation(name: "周末聚会 🎉", members: ["Jerry", "Bob"])
        var pending: [IMPendingMessage] = []
        for k in 0..<40 {
            let text = k % 3 == 0 ? "第\(k)条：明天见 👋" : k % 3 == 1 ? "@Jerry are you coming? #\(k)" : "ok \(k) 🍕"
            pending.append(try await group.submit(.text(text)))
        }
        var sent: [IMMessage] = []
        for message in pending { sent.append(try await message.message()) }
        let burst = try await logs[1].messages(40, in: group.id)
        XCTAssertEqual(burst.map(\.id), sent.map(\.id))
        XCTAssertEqual(burst.map(\.content.text), sent.map(\.content.text))
        XCTAssertFalse(burst.contains(where: \.isOffline))
        let twice = await logs[1].settle().compactMap(\.receivedMessage)
        XCTAssertEqual(twice.map(\.id), [], "messages delivered twice")
        await jerry.close()

        let otherDevice = server.client("Jerry")
        let otherEvents = EventLog(otherDevice)
        try await otherDevice.open()
        let redelivered = await otherEvents.settle(for: .milliseconds(600)).compactMap(\.receivedMessage)
        XCTAssertEqual(redelivered.map(\.id), [], "acknowledged messages were delivered again")
        await tom.close()
        await otherDevice.close()
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
