import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import IMServer
import Logging
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// The server's own TLS (`ServerConfiguration.tls`): the Swift SDK and a raw WebSocket over `wss://`,
/// HTTPS probes, the certificate renewed on disk while the server runs, the protocol floor, and the
/// start-up errors of unusable files. Certificates come from throwaway CAs the tests make with openssl.
final class TLSTests: XCTestCase {
    private var directory: URL!

    override func setUp() {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-tls-\(UUID().uuidString)")
    }

    override func tearDown() {
        try? FileManager.default.removeItem(at: directory)
    }

    private var certificatePath: String { directory.appendingPathComponent("server.pem").path }
    private var keyPath: String { directory.appendingPathComponent("server.key").path }

    /// A server with this test's certificate that stops when the test ends.
    private func startTLSServer(
        checkingEvery interval: Duration = .milliseconds(100), logger: Logger? = nil,
        configure: (inout ServerConfiguration) -> Void = { _ in }
    ) async throws -> ServerHarness {
        try await startServer(logger: logger) { configuration in
            var tls = TLSSettings(certificatePath: certificatePath, privateKeyPath: keyPath)
            tls.reloadInterval = interval
            configuration.tls = tls
            configure(&configuration)
        }
    }

    private func client(_ id: String, of server: ServerHarness, trusting ca: TestCertificateAuthority) -> IMClient {
        server.client(id) { options in
            options.url = "wss://localhost:\(server.port)/ws"
            options.trustRoots = .pemFile(ca.certificatePath)
        }
    }

    private static func frame(_ command: Command) -> String { JSONCommandCodec().encode(command) }

    func testClientsOverWSSKeepTheirConnectionWhileTheCertificateIsRenewed() async throws {
        let first = try TestCertificateAuthority(name: "Hookbot Test CA One", in: directory)
        let second = try TestCertificateAuthority(name: "Hookbot Test CA Two", in: directory)
        try first.issueServerCertificate(
            commonName: "hookbot node 1", serial: "1001", certificatePath: certificatePath, keyPath: keyPath)
        let server = try await startTLSServer()

        // The SDK over wss://, trusting only the first CA.
        let tom = client("Tom", of: server, trusting: first)
        let jerry = client("Jerry", of: server, trusting: first)
        let logs = try await openClients([tom, jerry])
        // A raw WebSocket over TLS, speaking JSON frames itself.
        let raw = try RawWebSocket(tlsPort: server.port, trusting: first.certificatePath)
        XCTAssertEqual(raw.peerCertificateSerial, "1001")
        XCTAssertTrue(raw.handshake.hasPrefix("HTTP/1.1 101"), raw.handshake)
        var open = Command(cmd: .session, op: .open, i: 1)
        open.peerId = "Raw"
        try raw.sendText(Self.frame(open))
        XCTAssertTrue(try raw.readUntil(timeout: 5) { String(decoding: $0, as: UTF8.self).contains("opened") })

        let conversation = try await tom.createConversation(name: "secure", members: ["Jerry", "Raw"])
        try await conversation.send(.text("hello over wss"))
        let received1 = try await logs[1].message(in: conversation.id)
        XCTAssertEqual(received1.content.text, "hello over wss")
        XCTAssertTrue(try raw.readUntil(timeout: 5, occurrences: 1, of: "hello over wss"))
        var fromRaw = Command(cmd: .direct, i: 2)
        fromRaw.cid = conversation.id
        fromRaw.msg = TypedMessage.text("raw over tls").encoded()
        try raw.sendText(Self.frame(fromRaw))
        let received2 = try await logs[0].message(in: conversation.id)
        XCTAssertEqual(received2.content.text, "raw over tls")
        let atJerry = try await logs[1].message(in: conversation.id)
        XCTAssertEqual(atJerry.content.text, "raw over tls")

        // LeanCloud's protobuf subprotocols are negotiated over TLS as over plain WebSockets.
        let protobuf = try RawWebSocket(tlsPort: server.port, trusting: first.certificatePath, offering: "lc.protobuf2.3")
        XCTAssertTrue(protobuf.handshake.lowercased().contains("sec-websocket-protocol: lc.protobuf2.3"), protobuf.handshake)

        // HTTP endpoints on the same port are HTTPS; plain HTTP/WebSocket gets nowhere.
        let health = try TLSTestStream.get("/health", port: server.port, trusting: first.certificatePath)
        XCTAssertTrue(health.hasPrefix("HTTP/1.1 200"), health)
        let metrics = try TLSTestStream.get("/metrics", port: server.port, trusting: first.certificatePath)
        XCTAssertTrue(metrics.contains("hookbot_connections"), String(metrics.prefix(300)))
        XCTAssertThrowsError(try RawWebSocket(port: server.port), "a plain WebSocket upgraded on the TLS port")

        // The certificate is renewed on disk (by another CA): new connections get it, open ones carry on.
        try second.issueServerCertificate(
            commonName: "hookbot node 2", serial: "2002", certificatePath: certificatePath, keyPath: keyPath)
        var renewed: TLSTestStream?
        let deadline = ContinuousClock.now + .seconds(10)
        while renewed == nil, ContinuousClock.now < deadline {
            renewed = try? TLSTestStream(port: server.port, trusting: second.certificatePath)
            if renewed == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        XCTAssertEqual(renewed?.peerCertificateSerial, "2002", "a new connection sees the renewed certificate")
        XCTAssertEqual(renewed?.peerCertificateCommonName, "hookbot node 2")
        let rawAfter = try RawWebSocket(tlsPort: server.port, trusting: second.certificatePath)
        XCTAssertEqual(rawAfter.peerCertificateSerial, "2002")
        XCTAssertThrowsError(
            try TLSTestStream(port: server.port, trusting: first.certificatePath), "the old certificate is still served")

        // An SDK client that trusts only the old CA is refused, with the reason; one that trusts the new CA
        // joins the conversation.
        let stale = client("Stale", of: server, trusting: first)
        do {
            try await stale.open()
            XCTFail("a client trusting only the replaced certificate's CA connected")
        } catch {
            XCTAssertEqual((error as? IMError)?.clientCode, .connectionFailed)
            XCTAssertTrue("\(error)".contains("CERTIFICATE_VERIFY_FAILED"), "\(error)")
        }
        let spike = client("Spike", of: server, trusting: second)
        let spikeLog = try await openClients([spike])[0]
        _ = try await conversation.add(members: ["Spike"])

        // The connections opened before the renewal still work both ways, without reconnecting.
        try await conversation.send(.text("after the renewal"))
        let received3 = try await logs[1].message(in: conversation.id)
        XCTAssertEqual(received3.content.text, "after the renewal")
        let received4 = try await spikeLog.message(in: conversation.id)
        XCTAssertEqual(received4.content.text, "after the renewal")
        XCTAssertTrue(try raw.readUntil(timeout: 5, occurrences: 1, of: "after the renewal"))
        fromRaw.i = 3
        fromRaw.msg = TypedMessage.text("raw still here").encoded()
        try raw.sendText(Self.frame(fromRaw))
        let received5 = try await logs[0].message(in: conversation.id)
        XCTAssertEqual(received5.content.text, "raw still here")
        XCTAssertFalse(
            (logs[0].history + logs[1].history).contains {
                if case .paused = $0 { true } else { false }
            }, "an open SDK connection was dropped by the renewal")
        for client in [tom, jerry, spike] { await client.close() }
    }

    /// A connection that never starts its TLS handshake is closed at the handshake deadline, as a silent
    /// plain connection is: the deadline runs from the TCP accept, before TLS.
    func testASilentConnectionIsClosedAtTheHandshakeDeadline() async throws {
        let ca = try TestCertificateAuthority(name: "Hookbot Test CA", in: directory)
        try ca.issueServerCertificate(commonName: "hookbot", serial: "0D", certificatePath: certificatePath, keyPath: keyPath)
        let server = try await startTLSServer { $0.handshakeTimeout = .milliseconds(300) }
        let fd = try connectLoopback(port: server.port)
        defer { close(fd) }
        let started = ContinuousClock.now
        var pollfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        XCTAssertEqual(poll(&pollfd, 1, 5000), 1, "the server neither closed nor wrote within 5 s")
        var byte: UInt8 = 0
        XCTAssertEqual(recv(fd, &byte, 1, 0), 0, "closed without a byte written")
        let elapsed = ContinuousClock.now - started
        XCTAssertGreaterThanOrEqual(elapsed, .milliseconds(250))
        XCTAssertLessThan(elapsed, .seconds(3))
    }

    /// With the default trust roots, the SDK trusts the system's CAs, or the bundle SSL_CERT_FILE names.
    func testTheDefaultTrustRootsFollowSSLCertFile() async throws {
        let ca = try TestCertificateAuthority(name: "Hookbot Own CA", in: directory)
        try ca.issueServerCertificate(commonName: "hookbot", serial: "5E", certificatePath: certificatePath, keyPath: keyPath)
        let server = try await startTLSServer()
        func client() -> IMClient { server.client("Tom") { $0.url = "wss://localhost:\(server.port)/ws" } }
        unsetenv("SSL_CERT_FILE")
        let untrusting = client()
        do {
            try await untrusting.open()
            XCTFail("the system's CAs trusted a throwaway CA")
        } catch {
            XCTAssertTrue("\(error)".contains("CERTIFICATE_VERIFY_FAILED"), "\(error)")
        }
        setenv("SSL_CERT_FILE", ca.certificatePath, 1)
        defer { unsetenv("SSL_CERT_FILE") }
        let trusting = client()
        try await trusting.open()
        await trusting.close()
    }

    func testTLSOlderThan12AndSuitesWithoutForwardSecrecyOrAEADAreRefused() async throws {
        let ca = try TestCertificateAuthority(name: "Hookbot Test CA", in: directory)
        try ca.issueServerCertificate(commonName: "hookbot", serial: "77", certificatePath: certificatePath, keyPath: keyPath)
        let log = LogRecorder()
        let server = try await startTLSServer(logger: log.logger(level: .debug))
        XCTAssertThrowsError(try TLSTestStream(port: server.port, trusting: ca.certificatePath, maximumVersion: .tlsv11))
        XCTAssertNoThrow(try TLSTestStream(port: server.port, trusting: ca.certificatePath, maximumVersion: .tlsv12))
        XCTAssertNoThrow(try TLSTestStream(port: server.port, trusting: ca.certificatePath, maximumVersion: .tlsv13))
        // TLS 1.2: ECDHE with AES-GCM or ChaCha20 only (no static RSA key exchange, no CBC).
        for (suite, accepted) in [
            ("ECDHE-ECDSA-AES128-GCM-SHA256", true), ("ECDHE-ECDSA-CHACHA20-POLY1305", true),
            ("ECDHE-ECDSA-AES128-SHA", false), ("AES128-GCM-SHA256", false), ("AES128-SHA", false),
        ] {
            let result = Result {
                try TLSTestStream(port: server.port, trusting: ca.certificatePath, maximumVersion: .tlsv12, cipherSuites: suite)
            }
            XCTAssertEqual((try? result.get()) != nil, accepted, "\(suite): \(result)")
        }
        // Refused handshakes (and plain HTTP on the TLS port) are logged at debug level, not as errors.
        XCTAssertThrowsError(try RawWebSocket(port: server.port))
        // A pause, not a signal: the server logs a refusal after the client has seen it.
        try await Task.sleep(for: .milliseconds(200))
        XCTAssertEqual(log.records(atLeast: .warning).map(\.message), [])
        XCTAssertGreaterThanOrEqual(log.records("TLS failed").count, 4)
    }

    func testUnusableCertificateFilesStopTheServerWithTheReason() async throws {
        let ca = try TestCertificateAuthority(name: "Hookbot Test CA", in: directory)
        try ca.issueServerCertificate(commonName: "hookbot", serial: "51", certificatePath: certificatePath, keyPath: keyPath)
        let otherCertificate = directory.appendingPathComponent("other.pem").path
        let otherKey = directory.appendingPathComponent("other.key").path
        try ca.issueServerCertificate(commonName: "other", serial: "52", certificatePath: otherCertificate, keyPath: otherKey)
        let garbage = directory.appendingPathComponent("garbage.pem").path
        try "not a certificate\n".write(toFile: garbage, atomically: true, encoding: .utf8)
        let missing = directory.appendingPathComponent("missing.pem").path

        func startupError(certificate: String, key: String) -> String {
            var configuration = ServerConfiguration()
            configuration.port = 0
            configuration.databasePath = directory.appendingPathComponent("unused.sqlite").path
            configuration.tls = TLSSettings(certificatePath: certificate, privateKeyPath: key)
            do {
                _ = try IMServer(configuration: configuration)
                return "started"
            } catch {
                XCTAssertTrue(error is ServerConfigurationError, "\(type(of: error))")
                return "\(error)"
            }
        }
        XCTAssertEqual(startupError(certificate: missing, key: keyPath), "TLS certificate \(missing): no such file")
        XCTAssertEqual(startupError(certificate: certificatePath, key: missing), "TLS private key \(missing): no such file")
        XCTAssertTrue(
            startupError(certificate: directory.path, key: keyPath).hasPrefix("TLS certificate \(directory.path): cannot be read"))
        XCTAssertTrue(startupError(certificate: garbage, key: keyPath).hasPrefix("TLS certificate \(garbage): "))
        XCTAssertTrue(
            startupError(certificate: certificatePath, key: garbage).hasPrefix("TLS private key \(garbage): not a PEM private key"))
        XCTAssertTrue(
            startupError(certificate: certificatePath, key: otherKey).hasPrefix(
                "TLS private key \(otherKey) does not belong to the certificate \(certificatePath)"),
            startupError(certificate: certificatePath, key: otherKey))
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.appendingPathComponent("unused.sqlite").path))

        // A renewal that does not load (the certificate replaced, its key not yet) keeps the pair in use.
        // (Checked by hand here: the server's own check is made rare so that it does not race the test's.)
        let server = try await startTLSServer(checkingEvery: .seconds(3600))
        try FileManager.default.removeItem(atPath: certificatePath)
        try FileManager.default.copyItem(atPath: otherCertificate, toPath: certificatePath)
        XCTAssertFalse(server.server.reloadCertificateIfChanged())
        let stream = try TLSTestStream(port: server.port, trusting: ca.certificatePath)
        XCTAssertEqual(stream.peerCertificateSerial, "51")
        // ...until the key follows.
        try FileManager.default.removeItem(atPath: keyPath)
        try FileManager.default.copyItem(atPath: otherKey, toPath: keyPath)
        XCTAssertTrue(server.server.reloadCertificateIfChanged())
        XCTAssertEqual(try TLSTestStream(port: server.port, trusting: ca.certificatePath).peerCertificateSerial, "52")
    }
}
