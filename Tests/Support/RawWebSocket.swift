import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A WebSocket client on a plain socket (or a TLS connection), for clients that misbehave on purpose (one
/// that stops reading) and for looking at the upgrade handshake itself. Blocking calls; use from a test's
/// own task.
public final class RawWebSocket: @unchecked Sendable {
    private enum Stream {
        case plain(Int32)
        case tls(TLSTestStream)
    }

    private let stream: Stream
    private var received: [UInt8] = []
    /// The server's answer to the upgrade request: status line and headers.
    public private(set) var handshake = ""

    /// Connects to `ws://127.0.0.1:port/ws`, offering `subprotocols` (a `Sec-WebSocket-Protocol` value).
    public init(port: Int, offering subprotocols: String? = nil) throws {
        stream = .plain(try connectLoopback(port: port))
        try upgrade(port: port, offering: subprotocols)
    }

    /// Connects to `wss://localhost:port/ws` (127.0.0.1) trusting only the CA certificates in `caFile`.
    public init(tlsPort port: Int, trusting caFile: String, offering subprotocols: String? = nil) throws {
        stream = .tls(try TLSTestStream(port: port, trusting: caFile))
        try upgrade(port: port, offering: subprotocols)
    }

    /// Over TLS: the serial number (hex) of the certificate the server presented.
    public var peerCertificateSerial: String? {
        if case .tls(let tls) = stream { return tls.peerCertificateSerial }
        return nil
    }

    private func upgrade(port: Int, offering subprotocols: String?) throws {
        var request = "GET /ws HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        request += "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        if let subprotocols { request += "Sec-WebSocket-Protocol: \(subprotocols)\r\n" }
        request += "\r\n"
        try write(Array(request.utf8))
        guard try readUntil(timeout: 5, { String(decoding: $0, as: UTF8.self).contains("\r\n\r\n") }),
            let end = String(decoding: received, as: UTF8.self).range(of: "\r\n\r\n")
        else { throw POSIXError(.ETIMEDOUT) }
        let text = String(decoding: received, as: UTF8.self)
        handshake = String(text[..<end.lowerBound])
    }

    deinit {
        switch stream {
        case .plain(let fd): close(fd)
        case .tls(let tls): tls.close()
        }
    }

    /// Sends one masked text frame.
    public func sendText(_ text: String) throws {
        let payload = Array(text.utf8)
        var frame: [UInt8] = [0x81]
        if payload.count < 126 {
            frame.append(0x80 | UInt8(payload.count))
        } else if payload.count <= 0xFFFF {
            frame.append(0x80 | 126)
            frame += [UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            frame.append(0x80 | 127)
            frame += (0..<8).reversed().map { UInt8((payload.count >> ($0 * 8)) & 0xFF) }
        }
        let mask: [UInt8] = [0x12, 0x34, 0x56, 0x78]
        frame += mask
        frame += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        try write(frame)
    }

    private func write(_ bytes: [UInt8]) throws {
        guard case .plain(let fd) = stream else {
            if case .tls(let tls) = stream { try tls.write(bytes) }
            return
        }
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { throw POSIXError(.EPIPE) }
            offset += sent
        }
    }

    /// Reads until `done` holds for everything received so far (true), or `timeout` seconds pass (false).
    /// Throws `ECONNRESET` when the server closed the connection.
    public func readUntil(timeout: Double, _ done: ([UInt8]) -> Bool) throws -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while !done(received) {
            let left = deadline.timeIntervalSinceNow
            if left <= 0 { return false }
            guard case .plain(let fd) = stream else {
                if case .tls(let tls) = stream { received += try tls.read(timeout: min(left, 1)) }
                continue
            }
            var pollfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pollfd, 1, Int32(min(left, 1) * 1000)) > 0 else { continue }
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { throw POSIXError(.ECONNRESET) }
            received += buffer[0..<count]
        }
        return true
    }

    /// Reads until `text` occurred `count` times in what was received (true), or `timeout` seconds pass.
    public func readUntil(timeout: Double, occurrences count: Int, of text: String) throws -> Bool {
        let needle = Array(text.utf8)
        var found = 0
        var scanned = 0
        return try readUntil(timeout: timeout) { received in
            while scanned + needle.count <= received.count {
                if received[scanned] == needle[0], received[scanned..<scanned + needle.count].elementsEqual(needle) {
                    found += 1
                    scanned += needle.count
                } else {
                    scanned += 1
                }
            }
            return found >= count
        }
    }
}

/// A TCP socket connected to 127.0.0.1:`port`, from the loopback address `source` when given (so that a
/// test can play a client on another address, such as 127.0.0.2).
public func connectLoopback(port: Int, from source: String? = nil) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw POSIXError(.EMFILE) }
    func address(_ host: String, port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr(host)
        return address
    }
    func call(_ address: sockaddr_in, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
        withUnsafePointer(to: address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }
    if let source, call(address(source, port: 0), { bind(fd, $0, $1) }) != 0 {
        close(fd)
        throw POSIXError(.EADDRNOTAVAIL)
    }
    guard call(address("127.0.0.1", port: port), { connect(fd, $0, $1) }) == 0 else {
        close(fd)
        throw POSIXError(.ECONNREFUSED)
    }
    return fd
}
