import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS

/// A blocking TLS client connection for tests (swift-nio-ssl on a NIO channel): bytes in, bytes out, and
/// the certificate the server presented. Use from a test's own task, like `RawWebSocket`.
public final class TLSTestStream: @unchecked Sendable {
    private let channel: any Channel
    private let inbox: Collector
    /// The serial number of the certificate the server presented, in hex (`openssl x509 -serial` spelling).
    public let peerCertificateSerial: String
    /// The subject of that certificate's common name.
    public let peerCertificateCommonName: String?

    /// Connects to 127.0.0.1:`port` and completes a TLS handshake that trusts only the CA certificates in
    /// `caFile` and checks the certificate is for `serverName`. `maximumVersion` caps the versions
    /// offered and `cipherSuites` (OpenSSL names) limits the TLS 1.2 suites offered (to check what the
    /// server accepts). Throws the handshake's error.
    public init(
        port: Int, trusting caFile: String, serverName: String = "localhost", maximumVersion: TLSVersion? = nil,
        cipherSuites: String? = nil
    ) throws {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.trustRoots = .file(caFile)
        configuration.minimumTLSVersion = .tlsv1
        configuration.maximumTLSVersion = maximumVersion
        if let cipherSuites { configuration.cipherSuites = cipherSuites }
        let context = try NIOSSLContext(configuration: configuration)
        let inbox = Collector()
        self.inbox = inbox
        let channel = try ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let tls = try NIOSSLClientHandler(context: context, serverHostname: serverName)
                    try channel.pipeline.syncOperations.addHandlers([tls, inbox])
                }
            }
            .connect(host: "127.0.0.1", port: port).wait()
        self.channel = channel
        do {
            try inbox.waitForHandshake(timeout: 10)
            let certificate = try channel.nioSSL_peerCertificate().wait()
            peerCertificateSerial = (certificate?.serialNumber ?? []).map { String(format: "%02X", $0) }.joined()
            peerCertificateCommonName = certificate.flatMap(Self.commonName)
        } catch {
            channel.close(promise: nil)
            throw error
        }
    }

    deinit { channel.close(promise: nil) }

    /// Writes and flushes `bytes`; throws `EPIPE` when the connection is gone.
    public func write(_ bytes: [UInt8]) throws {
        do { try channel.writeAndFlush(ByteBuffer(bytes: bytes)).wait() } catch { throw POSIXError(.EPIPE) }
    }

    /// What arrived within `timeout` seconds (empty when nothing did). Throws `ECONNRESET` once the
    /// connection is closed and everything received was read.
    public func read(timeout: Double) throws -> [UInt8] {
        try inbox.take(timeout: timeout)
    }

    /// Closes the connection.
    public func close() { channel.close(promise: nil) }

    /// An HTTPS GET of `path` (with `Connection: close`): the whole response, status line to body.
    public static func get(_ path: String, port: Int, trusting caFile: String) throws -> String {
        let stream = try TLSTestStream(port: port, trusting: caFile)
        try stream.write(Array("GET \(path) HTTP/1.1\r\nHost: localhost:\(port)\r\nConnection: close\r\n\r\n".utf8))
        var response: [UInt8] = []
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            do { response += try stream.read(timeout: 1) } catch { break }
        }
        return String(decoding: response, as: UTF8.self)
    }

    private static func commonName(_ certificate: NIOSSLCertificate) -> String? {
        // The subject's CN, read from `description` ("<NIOSSLCertificate;serial_number=…;common_name=…>").
        let text = certificate.description
        guard let range = text.range(of: "common_name=") else { return nil }
        return String(text[range.upperBound...].prefix { $0 != ";" && $0 != ">" })
    }

    /// Keeps what the channel receives for the blocking readers.
    private final class Collector: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        private let condition = NSCondition()
        private var buffered: [UInt8] = []
        private var closed = false
        private var handshake: Result<Void, any Error>?

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = unwrapInboundIn(data)
            let bytes = buffer.readBytes(length: buffer.readableBytes) ?? []
            condition.withLock {
                buffered += bytes
                condition.broadcast()
            }
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case TLSUserEvent.handshakeCompleted = event {
                condition.withLock {
                    if handshake == nil { handshake = .success(()) }
                    condition.broadcast()
                }
            }
            context.fireUserInboundEventTriggered(event)
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            condition.withLock {
                if handshake == nil { handshake = .failure(error) }
                condition.broadcast()
            }
            context.close(promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            condition.withLock {
                closed = true
                if handshake == nil { handshake = .failure(POSIXError(.ECONNRESET)) }
                condition.broadcast()
            }
        }

        func waitForHandshake(timeout: Double) throws {
            let deadline = Date().addingTimeInterval(timeout)
            let result: Result<Void, any Error>? = condition.withLock {
                while handshake == nil, condition.wait(until: deadline) {}
                return handshake
            }
            guard let result else { throw POSIXError(.ETIMEDOUT) }
            try result.get()
        }

        func take(timeout: Double) throws -> [UInt8] {
            let deadline = Date().addingTimeInterval(timeout)
            return try condition.withLock {
                while buffered.isEmpty, !closed, condition.wait(until: deadline) {}
                if buffered.isEmpty, closed { throw POSIXError(.ECONNRESET) }
                defer { buffered = [] }
                return buffered
            }
        }
    }
}
