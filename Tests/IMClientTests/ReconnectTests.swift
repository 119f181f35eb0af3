import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import XCTest

/// Connection loss, reconnects, single-device kicks and sends while paused.
final class ReconnectTests: XCTestCase {
    /// The server restarts mid-conversation (same port, same database). Both clients pause, reconnect by
    /// themselves and resume; messages sent while paused go out in order; nothing is lost or duplicated.
    func testReconnectAfterServerRestartLosesAndDuplicatesNothing() async throws {
        let server = try await ServerHarness.start()
        let tom = server.client("Tom", tag: "Mobile")
        let jerry = server.client("Jerry")
        let logs = try await openClients([tom, jerry])
        let (tomEvents, jerryEvents) = (logs[0], logs[1])
        let conversation = try await tom.createConversation(members: ["Jerry"])
        var sentByTom: [String] = []
        for k in 0..<3 { sentByTom.append(try await conversation.send(.text("before \(k)")).id) }
        let early = try await jerryEvents.messages(3, in: conversation.id)
        XCTAssertEqual(early.map(\.id), sentByTom)

        await server.stop()
        _ = try await tomEvents.next("Tom paused") { if case .paused = $0 { true } else { nil } }
        _ = try await jerryEvents.next("Jerry paused") { if case .paused = $0 { true } else { nil } }

        // Sends made while paused, queued in this order.
        var tasks: [Task<Result<IMMessage, IMError>, Never>] = []
        for k in 0..<3 {
            tasks.append(
                Task { () -> Result<IMMessage, IMError> in
                    do throws(IMError) {
                        return .success(try await conversation.send(.text("while down \(k)")))
                    } catch {
                        return .failure(error)
                    }
                })
            try await Task.sleep(for: .milliseconds(100))
        }
        let jerryReply = Task { () throws(IMError) -> IMMessage in
            try await jerry.conversation(conversation.id).send(.text("are you there?"))
        }

        let second = try await server.restarted()
        _ = try await tomEvents.next("Tom resumed") { if case .resumed = $0 { true } else { nil } }
        _ = try await jerryEvents.next("Jerry resumed") { if case .resumed = $0 { true } else { nil } }
        var queued: [IMMessage] = []
        for task in tasks { queued.append(try await task.value.get()) }
        XCTAssertEqual(queued.map(\.content.text), ["while down 0", "while down 1", "while down 2"])
        XCTAssertEqual(queued.map(\.timestamp), queued.map(\.timestamp).sorted(), "queued sends went out out of order")
        let reply = try await jerryReply.value

        let late = try await jerryEvents.messages(3, in: conversation.id)
        XCTAssertEqual(late.map(\.id), queued.map(\.id))
        let atTom = try await tomEvents.message(in: conversation.id)
        XCTAssertEqual(atTom.id, reply.id)
        let extra = await jerryEvents.settle().compactMap(\.receivedMessage)
        XCTAssertEqual(extra.map(\.id), [], "messages delivered twice")

        let history = try await tom.conversation(conversation.id).messages(limit: 100)
        XCTAssertEqual(history.count, 7)
        XCTAssertEqual(Set(history.map(\.id)).count, 7)
        XCTAssertEqual(Set(history.map(\.id)), Set(sentByTom + queued.map(\.id) + [reply.id]))
        let states = await (tom.state, jerry.state)
        XCTAssertEqual(states.0, .opened)
        XCTAssertEqual(states.1, .opened)

        await tom.close()
        await jerry.close()
        await second.stop()
    }

    /// A send in flight when the server goes down is resent after the reconnect with the same token:
    /// it is stored exactly once whether or not the first attempt was committed.
    func testMessageInFlightDuringRestartIsStoredOnce() async throws {
        let server = try await ServerHarness.start()
        let tom = try await openedClient(of: server, "Tom")
        let conversation = try await tom.createConversation(members: ["Jerry"])
        let inFlight = Task { () throws(IMError) -> IMMessage in try await conversation.send(.text("in flight")) }
        await server.stop()
        let second = try await server.restarted()
        let sent = try await inFlight.value
        let history = try await conversation.messages(limit: 10)
        XCTAssertEqual(history.map(\.id), [sent.id])
        XCTAssertEqual(history.first?.content.text, "in flight")
        await tom.close()
        await second.stop()
    }

    /// Chat room presence is per connection: after a reconnect the client re-enters the room it was in.
    func testChatRoomIsRejoinedAfterReconnect() async throws {
        let server = try await ServerHarness.start()
        let ((tom, jerry), logs) = try await openedClients(of: server, "Tom", "Jerry")
        let room = try await tom.createChatRoom(name: "Live")
        try await room.join()
        try await jerry.conversation(room.id).join()
        await server.stop()
        let second = try await server.restarted()
        for log in logs { _ = try await log.next("resumed") { if case .resumed = $0 { true } else { nil } } }
        let online = try await room.countMembers()
        XCTAssertEqual(online, 2)
        let sent = try await room.send(.text("still here?"))
        let received = try await logs[1].message(in: room.id)
        XCTAssertEqual(received.id, sent.id)
        await tom.close()
        await jerry.close()
        await second.stop()
    }

    /// `close()` while paused fails the waiting requests with CLIENT_CLOSED and stops reconnecting.
    func testCloseWhilePausedStopsReconnecting() async throws {
        let server = try await ServerHarness.start()
        let tom = server.client("Tom")
        let events = EventLog(tom)
        try await tom.open()
        let conversation = try await tom.createConversation(members: ["Jerry"])
        await server.stop()
        _ = try await events.next("paused") { if case .paused = $0 { true } else { nil } }
        let waiting = Task { () throws(IMError) -> IMMessage in try await conversation.send(.text("never")) }
        try await Task.sleep(for: .milliseconds(100))
        await tom.close()
        switch await waiting.result {
        case .success: XCTFail("a waiting send succeeded after close()")
        case .failure(let error): XCTAssertEqual((error as? IMError)?.clientCode, .clientClosed)
        }
        _ = try await events.next("closed") { if case .closed(nil) = $0 { true } else { nil } }
        let second = try await server.restarted()
        events.clear()
        let later = await events.settle(for: .seconds(1))
        XCTAssertTrue(later.filter(\.isConnectionEvent).isEmpty, "a closed client reconnected: \(later)")
        let state = await tom.state
        XCTAssertEqual(state, .closed)
        await second.stop()
    }

    /// Logging in elsewhere with the same tag kicks the first device with 4111; it does not reconnect,
    /// and a non-forced open from it is refused while the other device holds the tag.
    func testKickedByTag() async throws {
        let server = try await startServer()
        let phone = server.client("Tom", tag: "Mobile")
        let desktop = server.client("Tom")
        let logs = try await openClients([phone, desktop])
        let phoneEvents = logs[0]

        let tablet = server.client("Tom", tag: "Mobile")
        try await tablet.open()
        let error = try await phoneEvents.next("kicked") { if case .kickedOffline(let e) = $0 { e } else { nil } }
        XCTAssertEqual(error.code, 4111)
        XCTAssertEqual(error.knownCode, .sessionConflict)
        let phoneState = await phone.state
        XCTAssertEqual(phoneState, .kicked(error))

        phoneEvents.clear()
        let later = await phoneEvents.settle(for: .seconds(1))
        XCTAssertTrue(later.filter(\.isConnectionEvent).isEmpty, "a kicked client reconnected: \(later)")
        do {
            _ = try await phone.createConversation(members: ["Jerry"])
            XCTFail("a kicked client sent a request")
        } catch {
            XCTAssertEqual(error.clientCode, .clientNotOpen)
        }
        do {
            try await phone.open(force: false)
            XCTFail("a non-forced open took the tag")
        } catch {
            XCTAssertEqual(error.code, 4111)
        }
        let states = await (tablet.state, desktop.state)
        XCTAssertEqual(states.0, .opened)
        XCTAssertEqual(states.1, .opened, "a connection without a tag was kicked")

        try await phone.open(force: true)
        let tabletError = try await EventLogAfterOpen.kicked(tablet)
        XCTAssertEqual(tabletError.code, 4111)

        await phone.close()
        await desktop.close()
    }

    /// A send made while the connection is down fails with SEND_TIMEOUT after the configured time and is
    /// never sent later.
    func testSendWhilePausedFailsAfterTimeout() async throws {
        let server = try await ServerHarness.start()
        let tom = server.client("Tom") { $0.sendTimeout = .seconds(1) }
        let events = EventLog(tom)
        try await tom.open()
        let conversation = try await tom.createConversation(members: ["Jerry"])
        await server.stop()
        _ = try await events.next("paused") { if case .paused = $0 { true } else { nil } }

        let started = ContinuousClock.now
        do {
            try await conversation.send(.text("into the void"))
            XCTFail("a send while paused succeeded")
        } catch {
            XCTAssertEqual(error.clientCode, .sendTimeout)
            XCTAssertEqual(error.reason, "SEND_TIMEOUT")
        }
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(10))

        let second = try await server.restarted()
        _ = try await events.next("resumed") { if case .resumed = $0 { true } else { nil } }
        let history = try await conversation.messages()
        XCTAssertEqual(history.count, 0, "a timed-out send was sent after all")
        await tom.close()
        let state = await tom.state
        XCTAssertEqual(state, .closed)
        do {
            try await conversation.send(.text("after close"))
            XCTFail("a closed client sent")
        } catch {
            XCTAssertEqual(error.clientCode, .clientNotOpen)
        }
        await second.stop()
    }
}

/// Waits for a client that is already open to be kicked.
enum EventLogAfterOpen {
    static func kicked(_ client: IMClient) async throws -> IMError {
        for _ in 0..<100 {
            if case .kicked(let error) = await client.state { return error }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw Timeout(waitingFor: "kick")
    }
}
