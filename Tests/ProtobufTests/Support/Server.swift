import Foundation
import IMCore
import IMServer
import Logging
import XCTest

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A real server on an ephemeral loopback port with its own SQLite file.
final class ProtoTestServer: Sendable {
    let server: IMServer
    let port: Int

    private init(server: IMServer, port: Int) {
        self.server = server
        self.port = port
    }

    static func start(configure: (inout ServerConfiguration) -> Void = { _ in }) async throws -> ProtoTestServer {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-proto-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.databasePath = directory.appendingPathComponent("hookbot.sqlite").path
        configure(&configuration)
        var logger = Logger(label: "proto-test-server")
        logger.logLevel = ProcessInfo.processInfo.environment["TEST_LOG"].flatMap { Logger.Level(rawValue: $0) } ?? .critical
        let server = try IMServer(configuration: configuration, logger: logger)
        return ProtoTestServer(server: server, port: try await server.start())
    }

    func stop() async { await server.stop() }

    /// Sends a WebSocket upgrade request over a plain socket and returns the response head.
    func upgradeResponse(offering subprotocols: String?) throws -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
        var request = "GET /ws HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        request += "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        if let subprotocols { request += "Sec-WebSocket-Protocol: \(subprotocols)\r\n" }
        request += "\r\n"
        _ = request.withCString { send(fd, $0, strlen($0), 0) }
        var response = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        while !response.ends(with: Array("\r\n\r\n".utf8)) {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { break }
            response += buffer[0..<count]
            if let range = String(decoding: response, as: UTF8.self).range(of: "\r\n\r\n") {
                return String(String(decoding: response, as: UTF8.self)[..<range.lowerBound])
            }
        }
        return String(decoding: response, as: UTF8.self)
    }
}

private extension Array where Element == UInt8 {
    func ends(with suffix: [UInt8]) -> Bool { count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix }
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
