import Foundation
import HookbotTestSupport
import IMCore
import IMServer
import Logging
import XCTest

extension ServerHarness {
    /// A raw JSON-protocol client logged in as `clientID`.
    func login(_ clientID: String, tag: String? = nil, deviceID: String? = nil) async throws -> TestClient {
        try await TestClient.login(clientID, port: port, tag: tag, deviceID: deviceID)
    }
}

extension TestClient {
    /// Starts a conversation and returns its id.
    func startConversation(
        members: [String], name: String? = nil, unique: Bool = false,
        attr: JSONValue? = nil
    ) async throws -> String {
        var start = Command(cmd: .conv, op: .start)
        start.m = members
        start.name = name
        start.unique = unique ? true : nil
        start.attr = attr
        let reply = try await request(start)
        guard reply.op == .started, let cid = reply.cid else {
            throw IMError(code: reply.code ?? 0, reason: reply.reason ?? "conv start failed")
        }
        return cid
    }

    /// Sends a text message and returns the ack.
    @discardableResult
    func sendText(
        _ text: String, to cid: String, transient: Bool = false, receipt: Bool = false,
        dedupeToken: String? = nil
    ) async throws -> Command {
        var direct = Command(cmd: .direct)
        direct.cid = cid
        direct.msg = TypedMessage.text(text).encoded()
        direct.transient = transient ? true : nil
        direct.r = receipt ? true : nil
        direct.dt = dedupeToken
        return try await request(direct)
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
