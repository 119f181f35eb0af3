import BotHost
import BotHub
import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import IMServer
import XCTest

/// `hookbot run` with `[server] tls_cert` / `tls_key`: the embedded server speaks TLS only, its bot stays
/// attached in process, and an SDK client talks to the bot over `wss://`.
final class EmbeddedTLSTests: XCTestCase {
    func testTheEmbeddedServerServesWSSWithTheConfiguredCertificate() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-embedded-tls-\(UUID().uuidString)")
        let plugins = directory.appendingPathComponent("plugins")
        try FileManager.default.createDirectory(at: plugins, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try BotHostTests.moderation.write(to: plugins.appendingPathComponent("mod.lua"), atomically: true, encoding: .utf8)
        let ca = try TestCertificateAuthority(name: "Hookbot Embedded CA", in: directory.appendingPathComponent("tls"))
        try ca.issueServerCertificate(
            commonName: "embedded", serial: "0E",
            certificatePath: directory.appendingPathComponent("tls/server.pem").path,
            keyPath: directory.appendingPathComponent("tls/server.key").path)
        let text = """
            [server]
            port = 0
            tls_cert = "tls/server.pem"
            tls_key = "tls/server.key"
            """
        var configuration = try BotConfiguration.parse(text, relativeTo: directory)
        XCTAssertEqual(configuration.server.tlsCertificate, directory.appendingPathComponent("tls/server.pem").path)
        configuration.plugins.directory = plugins
        configuration.statePath = directory.appendingPathComponent("state.sqlite").path
        configuration.server.database = directory.appendingPathComponent("hub.sqlite").path
        configuration.adminSocketPath = nil

        var overWebSocket = configuration
        overWebSocket.server.attachment = .webSocket
        do {
            _ = try await EmbeddedHub.start(configuration: overWebSocket)
            XCTFail("a WebSocket-attached bot started against the TLS-only embedded server")
        } catch {
            XCTAssertEqual("\(error)", #"server.bot_attachment = "websocket" cannot be used with server.tls_cert"#)
        }

        let hub = try await EmbeddedHub.start(configuration: configuration)
        XCTAssertEqual(hub.server.webSocketScheme, "wss")
        XCTAssertEqual(try TLSTestStream(port: hub.port, trusting: ca.certificatePath).peerCertificateSerial, "0E")
        var options = IMClientOptions(url: "wss://localhost:\(hub.port)/ws")
        options.trustRoots = .pemFile(ca.certificatePath)
        let tom = IMClient(clientId: "Tom", options: options)
        try await tom.open()
        let lobby = tom.conversation(hub.lobbyID)
        try await lobby.join()
        try await lobby.sendRefused("a forbidden-word here") // the bot's moderation applies
        _ = try await lobby.send(.text("a fine message"))
        await tom.close()
        await hub.stop()
    }
}
