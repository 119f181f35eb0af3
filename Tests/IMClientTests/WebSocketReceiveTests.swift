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

    /// `maxFrameSize` both ways: a message whose frame would pass Tom's limit fails with 4109 before anything is
    /// written (his connection stays up); a frame larger than Jerry's limit closes his connection (he is paused),
    /// while a message within it reaches him.
    func testFramesLargerThanMaxFrameSize() async throws {
        let server = try await ServerHarness.start()
        let tom = server.client("Tom") { $0.maxFrameSize = 8 << 10 }
        let jerry = server.client("Jerry") { $0.maxFrameSize = 8 << 10 }
        let logs = try await openClients([tom, jerry])
        let conversation = try await tom.createConversation(members: ["Jerry"])
        let long = String(repeating: "长", count: 3_000) // 9,000 bytes of UTF-8
        do {
            _ = try await conversation.send(.text(long))
            XCTFail("a message larger than maxFrameSize was sent")
        } catch {
            XCTAssertEqual(error.code, IMErrorCode.frameTooLong.rawValue, "\(error)")
        }
        let fits = try await conversation.send(.text(String(repeating: "短", count: 2_000)))
        let atJerry = try await logs[1].message(in: conversation.id)
        XCTAssertEqual(atJerry.id, fits.id)

        // Bob (the default limit, 1 MiB) sends what Jerry's limit refuses.
        let bob = server.client("Bob")
        _ = try await openClients([bob])
        _ = try await conversation.add(members: ["Bob"])
        _ = try await bob.conversation(conversation.id).send(.text(long))
        _ = try await logs[1].next("Jerry paused") { if case .paused = $0 { true } else { nil } }
        await tom.close()
        await jerry.close()
        await bob.close()
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
