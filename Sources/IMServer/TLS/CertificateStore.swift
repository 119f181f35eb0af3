import Foundation
import HummingbirdCore
import Logging
import NIOCore
import NIOSSL
import ServiceLifecycle
import Synchronization

/// The server's TLS context, loaded from `TLSSettings`' files and replaced when they change.
///
/// HummingbirdTLS's `TLSChannel` builds its `NIOSSLContext` once, when the server starts; a certificate
/// renewed on disk would then need a restart. `ReloadingTLSChannel` does the same as `TLSChannel` (a
/// `NIOSSLServerHandler` in front of the HTTP pipeline) but takes the context in use when each connection
/// is accepted, so a reload reaches new connections while open ones keep theirs.
final class CertificateStore: Sendable {
    let settings: TLSSettings
    private let logger: Logger
    /// The context in use and the file contents it was made of (or the contents last tried, when they
    /// did not load, so that a broken pair is reported once).
    private let state: Mutex<(context: NIOSSLContext, loaded: Files, tried: Files)>
    /// The last error reading the files, so that a file missing for a while is reported once.
    private let readError = Mutex<String?>(nil)

    struct Files: Equatable {
        var certificate: Data
        var privateKey: Data
    }

    /// Loads the pair; throws `ServerConfigurationError` naming the file and the problem.
    init(settings: TLSSettings, logger: Logger) throws {
        self.settings = settings
        self.logger = logger
        let files = try Self.read(settings)
        let context = try Self.makeContext(files, settings: settings)
        state = Mutex((context, files, files))
    }

    /// The context for a connection accepted now.
    var context: NIOSSLContext { state.withLock { $0.context } }

    /// Reads the files and, when they differ from the pair in use, loads them. Returns true when a new
    /// pair is in use; a pair that does not load is logged (once) and the previous one kept.
    @discardableResult
    func reloadIfChanged() -> Bool {
        let files: Files
        do {
            files = try Self.read(settings)
            readError.withLock { $0 = nil }
        } catch {
            let text = "\(error)"
            if readError.withLock({ state in
                defer { state = text }
                return state != text
            }) {
                logger.warning("TLS certificate not reloaded; the previous one stays in use", metadata: ["error": "\(text)"])
            }
            return false
        }
        let (loaded, tried) = state.withLock { ($0.loaded, $0.tried) }
        guard files != loaded, files != tried else { return false }
        state.withLock { $0.tried = files }
        do {
            let context = try Self.makeContext(files, settings: settings)
            state.withLock { $0 = (context, files, files) }
            logger.notice("TLS certificate reloaded", metadata: ["certificate": "\(settings.certificatePath)"])
            return true
        } catch {
            logger.warning(
                "TLS certificate not reloaded; the previous one stays in use", metadata: ["error": "\(error)"])
            return false
        }
    }

    private static func read(_ settings: TLSSettings) throws -> Files {
        Files(
            certificate: try contents(of: settings.certificatePath, what: "TLS certificate"),
            privateKey: try contents(of: settings.privateKeyPath, what: "TLS private key"))
    }

    private static func contents(of path: String, what: String) throws -> Data {
        guard FileManager.default.fileExists(atPath: path) else {
            throw ServerConfigurationError("\(what) \(path): no such file")
        }
        do { return try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            let reason = (error as NSError).userInfo[NSUnderlyingErrorKey].map { "\($0)" } ?? error.localizedDescription
            throw ServerConfigurationError("\(what) \(path): cannot be read (\(reason))")
        }
    }

    private static func makeContext(_ files: Files, settings: TLSSettings) throws -> NIOSSLContext {
        let chain: [NIOSSLCertificate]
        do { chain = try NIOSSLCertificate.fromPEMBytes(Array(files.certificate)) } catch {
            throw ServerConfigurationError("TLS certificate \(settings.certificatePath): not a PEM certificate (\(error))")
        }
        guard !chain.isEmpty else {
            throw ServerConfigurationError("TLS certificate \(settings.certificatePath): holds no PEM certificate")
        }
        let key: NIOSSLPrivateKey
        do { key = try NIOSSLPrivateKey(bytes: Array(files.privateKey), format: .pem) } catch {
            throw ServerConfigurationError(
                "TLS private key \(settings.privateKeyPath): not a PEM private key, or protected by a passphrase (\(error))")
        }
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        configuration.minimumTLSVersion = .tlsv12
        configuration.cipherSuites = TLSSettings.cipherSuites
        // After its close_notify, how long the server waits for the peer's before dropping the connection
        // (swift-nio-ssl's default is 5 s). A WebSocket client that has stopped reading after the close
        // handshake never answers, and would hold the socket that long; nothing is lost by not waiting,
        // since everything the server wrote was flushed before its close_notify.
        configuration.shutdownTimeout = .milliseconds(500)
        do { return try NIOSSLContext(configuration: configuration) } catch {
            throw ServerConfigurationError(
                "TLS private key \(settings.privateKeyPath) does not belong to the certificate \(settings.certificatePath) (\(error))"
            )
        }
    }
}

/// Checks `CertificateStore`'s files every `reloadInterval` while the server runs.
struct CertificateWatcher: Service {
    let store: CertificateStore

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try await Task.sleep(for: store.settings.reloadInterval)
                store.reloadIfChanged()
            }
        }
    }
}

/// A child channel that speaks TLS with the context in use when the connection is accepted, then hands
/// the decrypted stream to `base` (the HTTP/WebSocket pipeline).
struct ReloadingTLSChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value
    let base: Base
    let store: CertificateStore

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let context = store.context
        return channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandlers([
                NIOSSLServerHandler(context: context), HandshakeFailureHandler(logger: logger),
            ])
        }.flatMap {
            base.setup(channel: channel, logger: logger)
        }
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

/// Closes a connection whose TLS fails (a failed handshake: a client that does not trust the certificate, an
/// old protocol version, plain HTTP on the TLS port) and logs it at debug level. Passed on, the error (or
/// the close that follows it) would reach the WebSocket upgrade handler, which logs every such connection at
/// error level.
final class HandshakeFailureHandler: ChannelInboundHandler, RemovableChannelHandler, Sendable {
    typealias InboundIn = NIOAny
    private let logger: Logger

    init(logger: Logger) { self.logger = logger }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard error is NIOSSLError || error is BoringSSLError else {
            context.fireErrorCaught(error)
            return
        }
        logger.debug(
            "TLS failed", metadata: ["remote": "\(context.channel.remoteAddress?.description ?? "unknown")", "error": "\(error)"])
        // As when a peer closes its side before its first request: the upgrade handler ends quietly.
        context.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        context.close(promise: nil)
    }
}
