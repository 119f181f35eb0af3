import Foundation
import HookbotTestSupport
import IMServer
import XCTest

/// Stopping a server while a client ignores the close handshake.
final class ShutdownTests: XCTestCase {
    func testAClientThatNeverClosesIsDroppedAfterTheGrace() async throws {
        let server = try await ServerHarness.start { $0.shutdownGrace = .milliseconds(300) }
        let socket = try RawWebSocket(port: server.port)
        try socket.sendText(#"{"cmd":"session","op":"open","i":1,"peerId":"Stubborn"}"#)
        XCTAssertTrue(try socket.readUntil(timeout: 5, occurrences: 1, of: #""op":"opened""#))

        // The client reads nothing more and never answers the close frame; before the grace period, stop()
        // waited for it forever.
        let stopped = Task { await server.stop() }
        let finished = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await stopped.value
                return true
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(20))
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        XCTAssertTrue(finished, "stop() is still waiting for a client that never closes")
        // It was told to go away, then the connection was dropped.
        XCTAssertTrue(try socket.readUntil(timeout: 5, occurrences: 1, of: "goaway"))
        XCTAssertThrowsError(try socket.readUntil(timeout: 5, occurrences: 1, of: "never sent"))
    }
}
