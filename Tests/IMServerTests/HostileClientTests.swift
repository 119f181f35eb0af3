import Foundation
import HookbotTestSupport
import IMCore
import IMServer
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Clients that attack the server by holding connections: silent TCP sockets, WebSockets that never log
/// in, peers that stop answering pings. The server closes them (per-address cap, handshake and login
/// deadlines, pings), stays bounded in memory, and keeps serving a well-behaved client meanwhile: it logs
/// in and gets its messages acknowledged within a bounded time, and every acknowledged message is stored.
final class HostileClientTests: XCTestCase {
    /// Ceiling for the test process's resident memory growth while 300 silent connections are open
    /// (measured: under 10 MiB; documented in docs/PROTOCOL.md, "Connection limits").
    static let memoryCeilingMiB = 64.0

    func testSilentConnectionsAreCappedPerAddressAndClosedAtTheHandshakeDeadline() async throws {
        let server = try await ServerHarness.start { configuration in
            configuration.maxConnectionsPerAddress = 4
            configuration.handshakeTimeout = .milliseconds(400)
        }
        let started = Date()
        let attackers = try (0..<6).map { _ in try SilentSocket(port: server.port, from: "127.0.0.2") }
        // Two over the cap are closed at once; the other four at the handshake deadline.
        // Meanwhile a well-behaved client on another address logs in and is served.
        async let served: Void = Self.assertServed(server, as: "Tom")
        let closedAt = await SilentSocket.closeTimes(of: attackers, since: started, timeout: 5).compactMap { $0 }.sorted()
        try await served
        XCTAssertEqual(closedAt.count, 6, "every attacking connection is closed")
        XCTAssertLessThan(closedAt[1], 0.35, "connections over the per-address cap are closed at once: \(closedAt)")
        XCTAssertGreaterThanOrEqual(closedAt[2], 0.35, "the admitted ones wait for the handshake deadline: \(closedAt)")
        await server.stop()
    }

    func testAWebSocketThatNeverLogsInIsClosedAtTheLoginDeadline() async throws {
        let server = try await ServerHarness.start { configuration in
            configuration.loginTimeout = .milliseconds(500)
        }
        let idle = try RawWebSocket(port: server.port)
        let tom = try await server.login("Tom")
        let started = Date()
        XCTAssertThrowsError(try idle.readUntil(timeout: 5) { _ in false }, "the server closes a WebSocket that never logs in")
        XCTAssertLessThan(Date().timeIntervalSince(started), 3)
        // A logged-in client stays past the deadline.
        try await Task.sleep(for: .milliseconds(300))
        let cid = try await tom.startConversation(members: ["Jerry"])
        let ack = try await tom.sendText("still here", to: cid)
        XCTAssertNotNil(ack.uid ?? ack.id, "\(ack)")
        await server.stop()
    }

    func testAPeerThatStopsAnsweringPingsIsClosed() async throws {
        let server = try await ServerHarness.start { configuration in
            configuration.pingInterval = .milliseconds(300)
        }
        let silent = try RawWebSocket(port: server.port)
        try silent.sendText(#"{"cmd":"session","op":"open","peerId":"Mute","i":1}"#)
        XCTAssertTrue(try silent.readUntil(timeout: 5, occurrences: 1, of: "opened"))
        let started = Date()
        // It never answers the server's pings: closed after at most two intervals (plus scheduling slack).
        XCTAssertThrowsError(try silent.readUntil(timeout: 5) { _ in false })
        XCTAssertLessThan(Date().timeIntervalSince(started), 3)
        // A client that answers pings (every SDK does) is still there.
        try await Self.assertServed(server, as: "Tom")
        await server.stop()
    }

    func testManySilentConnectionsKeepMemoryBoundedAndOthersServed() async throws {
        let server = try await ServerHarness.start { configuration in
            configuration.handshakeTimeout = .seconds(2)
            configuration.maxConnectionsPerAddress = 1000
        }
        try await Self.assertServed(server, as: "Warmup")
        let before = try residentMemoryMiB()
        let attackers = try (0..<300).map { _ in try SilentSocket(port: server.port, from: "127.0.0.3") }
        try await Self.assertServed(server, as: "Tom")
        let during = try residentMemoryMiB()
        XCTAssertLessThan(during - before, Self.memoryCeilingMiB, "300 silent connections: \(before) → \(during) MiB")
        let closed = await SilentSocket.closeTimes(of: attackers, since: Date(), timeout: 10).compactMap { $0 }.count
        XCTAssertEqual(closed, 300, "every silent connection is closed at the handshake deadline")
        await server.stop()
    }

    /// Logs in as `clientID`, sends three messages, each acknowledged within 2 s, and finds them in history.
    private static func assertServed(_ server: ServerHarness, as clientID: String) async throws {
        let started = ContinuousClock.now
        let client = try await server.login(clientID)
        let cid = try await client.startConversation(members: ["Someone"])
        for index in 0..<3 {
            let sent = ContinuousClock.now
            let ack = try await client.sendText("message \(index)", to: cid)
            XCTAssertEqual(ack.cmd, .ack, "\(ack)")
            XCTAssertLessThan(ContinuousClock.now - sent, .seconds(2))
        }
        let history = try await client.history(cid, limit: 10)
        XCTAssertEqual(history.logs?.count, 3, "every acknowledged message is stored")
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(5))
        await client.close()
    }
}

/// A TCP connection from a chosen loopback address that never sends anything.
private final class SilentSocket: Sendable {
    let fd: Int32

    init(port: Int, from source: String) throws {
        fd = try connectLoopback(port: port, from: source)
    }

    deinit { close(fd) }

    /// When the server closed each connection (seconds since `start`; nil: still open after `timeout`).
    /// Polls them all on a thread of its own, so that no task of the cooperative pool blocks.
    static func closeTimes(of sockets: [SilentSocket], since start: Date, timeout: Double) async -> [Double?] {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                var times = [Double?](repeating: nil, count: sockets.count)
                let deadline = Date().addingTimeInterval(timeout)
                var buffer = [UInt8](repeating: 0, count: 1024)
                while times.contains(where: { $0 == nil }), deadline.timeIntervalSinceNow > 0 {
                    let open = sockets.indices.filter { times[$0] == nil }
                    var descriptors = open.map { pollfd(fd: sockets[$0].fd, events: Int16(POLLIN), revents: 0) }
                    guard poll(&descriptors, nfds_t(descriptors.count), 20) > 0 else { continue }
                    for (slot, index) in open.enumerated() where descriptors[slot].revents != 0 {
                        if recv(sockets[index].fd, &buffer, buffer.count, 0) <= 0 { times[index] = Date().timeIntervalSince(start) }
                    }
                }
                continuation.resume(returning: times)
            }
        }
    }
}
