import Foundation
import IMCore
import Logging
import NIOSSL

/// One connection to the server: a WebSocket, or an in-process attachment (`LocalEndpoint`) where
/// commands cross as values. Commands queued with `send` leave in order; received ones arrive on
/// `inbound`, which finishes when the connection ends for any reason.
final class Link: Sendable {
    /// What a WebSocket read brought.
    enum Frame: Sendable {
        /// The commands of one read from the socket, in order.
        case commands([Command])
        /// A frame that does not decode to a `Command` (for example a `cmd` this SDK does not know).
        case undecodable(String)
    }

    /// Identifies the link in the client's bookkeeping.
    let id: Int
    let inbound: AsyncStream<Frame>
    private let transport: Transport
    private let codec = JSONCommandCodec()
    /// The largest frame this link sends (servers close connections that send larger ones).
    private let maxFrameSize: Int

    private enum Transport: Sendable {
        case webSocket(WebSocketChannel)
        case local(LocalConnection, LocalInbox<Command>)
    }

    private init(id: Int, inbound: AsyncStream<Frame>, transport: Transport, maxFrameSize: Int = .max) {
        self.id = id
        self.maxFrameSize = maxFrameSize
        self.inbound = inbound
        self.transport = transport
    }

    /// Attaches to a server in the same process. Throws when it is not running.
    static func attach(
        id: Int, to endpoint: any LocalEndpoint,
        review: HookReviewer?
    ) throws(IMError) -> Link {
        let inbox = LocalInbox<Command>()
        guard
            let connection = endpoint.connectLocally(
                receive: { inbox.append($0) }, closed: { inbox.finish() }, review: review)
        else { throw IMError(.connectionFailed, "the in-process server is not running") }
        // What arrives is read from `localInbox`, in batches; `inbound` stays empty.
        let (inbound, continuation) = AsyncStream<Frame>.makeStream()
        continuation.finish()
        return Link(id: id, inbound: inbound, transport: .local(connection, inbox))
    }

    /// An in-process link's received commands (nil for a WebSocket, whose frames arrive on `inbound`).
    var localInbox: LocalInbox<Command>? {
        if case .local(_, let inbox) = transport { inbox } else { nil }
    }

    /// Opens a WebSocket to `url` (over TLS for `wss://`, trusting `trustRoots`). Throws when the connection
    /// is not established within `timeout`, with the reason when there is one (a refused connection, a
    /// certificate that does not verify).
    static func connect(
        id: Int, url: String, timeout: Duration, pingInterval: Duration?, maxFrameSize: Int,
        trustRoots: IMTrustRoots = .system, logger: Logger
    ) async throws(IMError) -> Link {
        let tls = url.lowercased().hasPrefix("wss://") ? try tlsConfiguration(trusting: trustRoots) : nil
        let (inbound, continuation) = AsyncStream<Frame>.makeStream()
        let codec = JSONCommandCodec()
        do {
            let socket = try await WebSocketChannel.connect(
                url: url, tls: tls, timeout: timeout, pingInterval: pingInterval, maxFrameSize: maxFrameSize,
                receive: { texts in
                    // On the event loop: a read's messages decoded there and handed over together.
                    var commands: [Command] = []
                    commands.reserveCapacity(texts.count)
                    for text in texts {
                        if let command = try? codec.decode(text) {
                            commands.append(command)
                        } else {
                            if !commands.isEmpty { continuation.yield(.commands(commands)) }
                            commands.removeAll()
                            continuation.yield(.undecodable(text))
                        }
                    }
                    if !commands.isEmpty { continuation.yield(.commands(commands)) }
                },
                closed: { continuation.finish() })
            return Link(id: id, inbound: inbound, transport: .webSocket(socket), maxFrameSize: maxFrameSize)
        } catch {
            continuation.finish()
            logger.debug("connection failed", metadata: ["error": "\(error)"])
            throw IMError(.connectionFailed, "could not connect to \(url): \(error)")
        }
    }

    /// The client side of TLS: TLS 1.2 at least, the server's certificate verified against `roots` and
    /// the URL's host name.
    static func tlsConfiguration(trusting roots: IMTrustRoots) throws(IMError) -> TLSConfiguration {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.minimumTLSVersion = .tlsv12
        // How long a close waits for the server's close_notify after the client's (swift-nio-ssl's default
        // is 5 s). The WebSocket close handshake has already ended the conversation by then, and a channel
        // that no longer reads would not see the answer: without this, closing a client could take 5 s.
        configuration.shutdownTimeout = .milliseconds(500)
        do {
            switch roots {
            case .system:
                // As OpenSSL and curl do: SSL_CERT_FILE names a bundle to use instead of the system's.
                if let file = ProcessInfo.processInfo.environment["SSL_CERT_FILE"], !file.isEmpty {
                    configuration.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(file))
                }
            case .pemFile(let path): configuration.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(path))
            case .pem(let text): configuration.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(text.utf8)))
            }
        } catch {
            throw IMError(.connectionFailed, "the trust roots cannot be read as PEM certificates: \(error)")
        }
        if case .certificates(let list) = configuration.trustRoots, list.isEmpty {
            throw IMError(.connectionFailed, "the trust roots hold no PEM certificate")
        }
        return configuration
    }

    /// Queues a command for sending. A command whose frame would be larger than the frame limit is not
    /// sent (the server would close the connection for it): that throws 4109.
    func send(_ command: Command) throws(IMError) {
        switch transport {
        case .webSocket(let outbound):
            let frame = codec.encode(command)
            guard frame.utf8.count <= maxFrameSize else {
                throw IMError(.frameTooLong, "the command is \(frame.utf8.count) bytes; frames are limited to \(maxFrameSize)")
            }
            outbound.send(frame)
        case .local(let connection, _):
            connection.send(command)
        }
    }

    /// Closes the connection after the commands already queued; `inbound` then finishes.
    func close() {
        switch transport {
        case .webSocket(let socket): socket.close()
        case .local(let connection, _): connection.close()
        }
    }

    /// Closes the connection and waits until it has ended, at most `timeout` (then drops it).
    func closeAndWait(timeout: Duration) async {
        switch transport {
        case .webSocket(let socket):
            await socket.closeAndWait(timeout: timeout)
        case .local(let connection, let inbox):
            connection.close()
            await inbox.ended()
        }
    }

    /// Drops the connection at once.
    func abort() {
        switch transport {
        case .webSocket(let socket): socket.abort()
        case .local(let connection, _): connection.close()
        }
    }
}
