import Foundation
import HookbotTestSupport
import IMCore
import XCTest

/// An idle, logged-in WebSocket session holds a few KB of the server's memory: no task, no stream, no
/// buffer a burst grew (issue 30; `hookbot bench --only idle` measures the release build).
final class IdleSessionMemoryTests: XCTestCase {
    /// Ceiling per idle session for the debug build, whose objects are larger than the release build's
    /// (release: about 9 KB; before sessions were served without tasks: about 100 KB).
    static let ceilingKB = 24.0

    func testAThousandIdleSessionsCostLittleAndStillGetTheirMessages() async throws {
        let binary = try XCTUnwrap(ServerProcess.binaryURL(), "hookbot is not built")
        let directory = try makeTemporaryDirectory("idle")
        let server = try await ServerProcess.launch(
            binary: binary, store: ["--db", directory.appendingPathComponent("s.sqlite").path, "--max-connections-per-address", "1400"])
        defer { server.kill() }
        let pid = server.process.processIdentifier

        // Members who log in and then say nothing, as most of a large community is at any moment.
        func logIn(_ range: Range<Int>) throws -> [RawWebSocket] {
            try range.map { index in
                let socket = try RawWebSocket(port: server.port)
                try socket.sendText(#"{"cmd":"session","op":"open","i":1,"peerId":"成员-\#(index)"}"#)
                XCTAssertTrue(try socket.readUntil(timeout: 10, occurrences: 1, of: #""op":"opened""#), "member \(index) logged in")
                return socket
            }
        }
        // The first ones warm the server up (threads, arenas, the store's caches): measured from there.
        var members = try logIn(0..<200)
        try await Task.sleep(for: .milliseconds(500))
        let before = try Self.residentKB(of: pid)
        members += try logIn(200..<1200)
        try await Task.sleep(for: .milliseconds(500))
        let after = try Self.residentKB(of: pid)
        let perSession = (after - before) / 1000
        XCTAssertLessThan(perSession, Self.ceilingKB, "\(before) KB → \(after) KB for 1,000 more idle sessions")

        // Idle is not gone: a member who speaks up reaches one who has been quiet all along.
        let tom = try await TestClient.login("Tom", port: server.port)
        let cid = try await tom.startConversation(members: ["成员-733"])
        let ack = try await tom.sendText("@成员-733 在吗？晚上一起吃饭 🍜", to: cid)
        XCTAssertEqual(ack.cmd, .ack, "\(ack)")
        XCTAssertTrue(try members[733].readUntil(timeout: 10, occurrences: 1, of: "晚上一起吃饭 🍜"), "the idle member got the message")
        await tom.close()
    }

    private static func residentKB(of pid: Int32) throws -> Double {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kilobytes = Double(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        else { throw POSIXError(.EINVAL) }
        return kilobytes
    }
}
