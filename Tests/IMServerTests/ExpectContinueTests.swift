import Foundation
import HookbotTestSupport
import XCTest

@testable import IMServer

/// `Expect: 100-continue` (what curl sends with bodies over 1 MB): the server answers `100 Continue` at once, so the
/// client need not wait a second before sending the body; a declared length over the upload limit gets no
/// `100 Continue` but the 413 straight away, before a byte of the body is sent.
final class ExpectContinueTests: XCTestCase {
    func testUploadsThatExpectContinueGetItAndOversizeOnesGet413First() async throws {
        let server = try await startServer { configuration in
            configuration.masterKey = "secret"
            configuration.media.maxUploadBytes = 10_000
        }
        let body = Data(MediaFixtures.png(width: 8, height: 8, padding: 100))

        let fd = try connectLoopback(port: server.port)
        defer { close(fd) }
        try sendUploadHead(fd, name: "a.png", length: body.count)
        // The interim answer comes before any body byte is sent (curl would wait 1 s for it).
        let interim = try receive(fd, until: "\r\n\r\n", timeout: 0.8)
        XCTAssertTrue(interim.hasPrefix("HTTP/1.1 100 Continue"), interim)
        try send(fd, body)
        let final = try receive(fd, until: "}", timeout: 5)
        XCTAssertTrue(final.hasPrefix("HTTP/1.1 201"), final)

        // Over the limit: no 100 Continue, the 413 at once, with the body never sent.
        let big = try connectLoopback(port: server.port)
        defer { close(big) }
        try sendUploadHead(big, name: "b.png", length: 20000)
        let refused = try receive(big, until: "}", timeout: 5)
        XCTAssertTrue(refused.hasPrefix("HTTP/1.1 413"), refused)
        XCTAssertTrue(refused.contains("4601"), refused)
    }

    /// The head of an upload as the master key that declares `length` bytes and expects `100 Continue`.
    private func sendUploadHead(_ fd: Int32, name: String, length: Int) throws {
        try send(
            fd,
            "POST /media?name=\(name) HTTP/1.1\r\nHost: 127.0.0.1\r\nX-LC-Key: secret,master\r\nContent-Length: \(length)\r\n"
                + "Expect: 100-continue\r\n\r\n")
    }

    private func send(_ fd: Int32, _ text: String) throws { try send(fd, Data(text.utf8)) }

    private func send(_ fd: Int32, _ data: Data) throws {
        let sent = data.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == data.count else { throw POSIXError(.EPIPE) }
    }

    /// What arrives until `marker` has been seen or `timeout` seconds have passed.
    private func receive(_ fd: Int32, until marker: String, timeout: Double) throws -> String {
        var received = Data()
        let deadline = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !String(decoding: received, as: UTF8.self).contains(marker), deadline.timeIntervalSinceNow > 0 {
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, Int32(max(1, deadline.timeIntervalSinceNow * 1000))) > 0 else { break }
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { break }
            received.append(contentsOf: buffer[0..<count])
        }
        return String(decoding: received, as: UTF8.self)
    }
}
