import Foundation
import HookbotTestSupport
import IMCore
import XCTest

/// A client that stops reading must not hold the server's memory or slow anybody else down.
final class SlowReaderTests: XCTestCase {
    private let body = String(repeating: "z", count: 60_000)

    func testAClientThatNeverReadsItsPushesIsDisconnected() async throws {
        let server = try await startServer {
            $0.pauseReadingAboveQueuedBytes = 512 << 10
            $0.closeAboveQueuedBytes = 2 << 20
        }
        let slow = try RawWebSocket(port: server.port)
        try slow.sendText(#"{"cmd":"session","op":"open","i":1,"peerId":"Slow"}"#)
        XCTAssertTrue(try slow.readUntil(timeout: 5) { String(decoding: $0, as: UTF8.self).contains("opened") })
        let (tom, jerry) = try await server.login("Tom", "Jerry")
        let cid = try await tom.startConversation(members: ["Jerry", "Slow"])
        // 24 MB of pushes (more than loopback socket buffers hold) for a client that reads none of them.
        for k in 0..<400 {
            let ack = try await tom.sendText("\(k) \(body)", to: cid)
            XCTAssertNotNil(ack.uid, "message \(k) acknowledged")
        }
        for _ in 0..<400 { _ = try await jerry.next(timeout: .seconds(10), where: { $0.cmd == .direct }) }
        // The server dropped the reader that fell behind: reading what is left ends in the close.
        XCTAssertThrowsError(try slow.readUntil(timeout: 20) { _ in false }, "the connection stayed open")
        XCTAssertLessThan(server.server.queuedOutboundBytes, 1 << 20)
    }

    func testAClientThatDoesNotReadItsRepliesIsNotReadFromUntilItDoes() async throws {
        let server = try await startServer {
            $0.pauseReadingAboveQueuedBytes = 512 << 10
            $0.closeAboveQueuedBytes = 256 << 20
        }
        let tom = try await server.login("Tom")
        let cid = try await tom.startConversation(members: ["Slow"])
        for k in 0..<20 { try await tom.sendText("\(k) \(body)", to: cid) }
        let slow = try RawWebSocket(port: server.port)
        try slow.sendText(#"{"cmd":"session","op":"open","i":1,"peerId":"Slow"}"#)
        XCTAssertTrue(try slow.readUntil(timeout: 5) { String(decoding: $0, as: UTF8.self).contains("opened") })
        // 80 requests for ~512 KB each (40 MB of replies), and no reading for a while.
        for k in 0..<80 { try slow.sendText(#"{"cmd":"logs","i":\#(k + 2),"cid":"\#(cid)","limit":100}"#) }
        try await Task.sleep(for: .seconds(1))
        XCTAssertLessThan(server.server.queuedOutboundBytes, 2 << 20, "the server kept reading and queueing replies")
        // Others are served meanwhile.
        let echo = try await tom.request(Command(cmd: .echo))
        XCTAssertEqual(echo.cmd, .echo)
        // Once the client reads, every request is answered.
        XCTAssertTrue(try slow.readUntil(timeout: 30, occurrences: 80, of: #""cmd":"logs""#))
    }
}
