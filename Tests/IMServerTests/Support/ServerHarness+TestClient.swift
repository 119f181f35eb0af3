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

extension TestClient: CommandRequesting {
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
