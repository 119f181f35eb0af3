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

extension WireClient: CommandRequesting {

    func nextMessage(timeout: Duration = .seconds(10)) async throws -> Command {
        try await next(timeout: timeout, "direct") { $0.cmd == .direct }
    }
}

extension Command {
    var text: String? { msg.flatMap(TypedMessage.decode)?.text }
}
