import Foundation
import HookbotTestSupport
import IMCore
import IMServer
import Logging
import XCTest

extension ServerHarness {
    /// Sends a WebSocket upgrade request over a plain socket and returns the response head.
    func upgradeResponse(offering subprotocols: String?) throws -> String {
        try RawWebSocket(port: port, offering: subprotocols).handshake
    }
}

extension WireClient {
    func startConversation(members: [String], name: String? = nil, attr: JSONValue? = nil) async throws -> String {
        var start = Command(cmd: .conv, op: .start)
        start.m = members
        start.name = name
        start.attr = attr
        let reply = try await request(start)
        guard reply.op == .started, let cid = reply.cid else {
            throw IMError(code: reply.code ?? 0, reason: reply.reason ?? "conv start failed")
        }
        return cid
    }

    @discardableResult
    func sendText(_ text: String, to cid: String, receipt: Bool = false) async throws -> Command {
        var direct = Command(cmd: .direct)
        direct.cid = cid
        direct.msg = TypedMessage.text(text).encoded()
        direct.r = receipt ? true : nil
        return try await request(direct)
    }

    func nextMessage(timeout: Duration = .seconds(10)) async throws -> Command {
        try await next(timeout: timeout, "direct") { $0.cmd == .direct }
    }
}

extension Command {
    var text: String? { msg.flatMap(TypedMessage.decode)?.text }
}
