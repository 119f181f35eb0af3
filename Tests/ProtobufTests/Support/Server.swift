import Foundation
import IMCore
import HookbotTestSupport
import IMServer
import Logging
import XCTest

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
