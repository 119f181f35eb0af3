import Foundation
import HookbotTestSupport
import IMCore
import Logging
import XCTest

@testable import IMServer

extension ServerHarness {
    /// A raw JSON-protocol client logged in as `clientID`.
    func login(_ clientID: String, tag: String? = nil, deviceID: String? = nil) async throws -> TestClient {
        try await TestClient.login(clientID, port: port, tag: tag, deviceID: deviceID)
    }

    /// Logs in each of `clientIDs`, one after the other, as a test's cast does before its scenario starts:
    /// `let (tom, jerry, bob) = try await server.login("Tom", "Jerry", "Bob")`. (A pack of names is written as
    /// `StringProtocol` values because Swift cannot yet require a pack's elements to be `String` itself.)
    func login<each Name: StringProtocol>(_ clientIDs: repeat each Name) async throws -> (repeat Logged<each Name>) {
        (repeat try await login(String(each clientIDs)))
    }

    /// The client `login(_:...)` gives for each name of its pack.
    typealias Logged<Name> = TestClient

    /// Opens a session for `clientID` and returns the client with the session's token (`st`), which HTTP calls
    /// made as that client (uploads, file tokens) carry.
    func session(_ clientID: String) async throws -> (client: TestClient, token: String) {
        let client = try await TestClient.connect(port: port)
        var open = Command(cmd: .session, op: .open)
        open.peerId = clientID
        let opened = try await client.request(open)
        return (client, try XCTUnwrap(opened.st, "session opened carries st: \(opened)"))
    }

    /// The session token of a session opened for `clientID` (see `session(_:)`).
    func sessionToken(_ clientID: String) async throws -> String { try await session(clientID).token }

    /// Logs `clientID` in, registers a webhook device with `token`, and drops the connection without closing
    /// the session (a dropped connection keeps devices), waiting until the server no longer sees it.
    func registerOffline(_ clientID: String, token: String) async throws {
        let client = try await login(clientID)
        var add = Command(cmd: .device, op: .add)
        add.device = .object(["provider": "webhook", "token": .string(token)])
        let reply = try await client.request(add)
        XCTAssertEqual(reply.op, .added, "\(reply)")
        await client.close()
        try await waitUntilOffline(clientID)
    }

    /// Waits until the server holds no connection of `clientIDs` (it sees a closed client's socket go a moment
    /// after `close()` returns); throws `Timeout` when one is still connected after `timeout`.
    func waitUntilOffline(_ clientIDs: String..., timeout: Duration = .seconds(10)) async throws {
        try await waitUntil("\(clientIDs.joined(separator: ", ")) to be offline", timeout: timeout, every: .milliseconds(10)) {
            clientIDs.allSatisfy { server.service.registry.connections(of: $0).isEmpty }
        }
    }
}

extension TestClient: CommandRequesting {
    /// Sends `msg` (the message's text as the wire carries it) into `cid` and returns the ack, checking that the
    /// server accepted it.
    @discardableResult
    func sendAccepted(_ msg: String, to cid: String) async throws -> Command {
        var direct = Command(cmd: .direct)
        direct.cid = cid
        direct.msg = msg
        let ack = try await request(direct)
        XCTAssertNil(ack.code, ack.reason ?? "")
        return ack
    }

    /// Waits until the server no longer counts `members` as logged in (asked with `session query`); throws
    /// `Timeout` when one still is after `timeout`.
    func waitUntilOffline(_ members: [String], timeout: Duration = .seconds(10)) async throws {
        var query = Command(cmd: .session, op: .query)
        query.sessionPeerIds = members
        try await waitUntil("\(members) to be offline", timeout: timeout) {
            try await request(query).onlineSessionPeerIds?.isEmpty ?? true
        }
    }

    /// Waits for the next message delivered to this client.
    func nextMessage(timeout: Duration = .seconds(10)) async throws -> Command {
        try await next(timeout: timeout, "direct") { $0.cmd == .direct }
    }

    /// Acknowledges a delivered message, as SDKs do.
    func acknowledge(_ direct: Command) {
        var ack = Command(cmd: .ack)
        ack.cid = direct.cid
        ack.mid = direct.id
        ack.t = direct.timestamp
        send(ack)
    }

    func history(_ cid: String, limit: Int? = nil, before: Int64? = nil) async throws -> Command {
        var logs = Command(cmd: .logs)
        logs.cid = cid
        logs.limit = limit
        logs.t = before
        return try await request(logs)
    }
}

extension Command {
    /// The text of a typed text message body.
    var text: String? { msg.flatMap(TypedMessage.decode)?.text }
}

/// Unwraps an optional produced by an `await` (XCTUnwrap's autoclosure cannot await).
func required<T>(_ value: T?, _ message: String = "", file: StaticString = #filePath, line: UInt = #line) throws -> T {
    try XCTUnwrap(value, message, file: file, line: line)
}
