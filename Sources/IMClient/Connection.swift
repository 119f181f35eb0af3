import Foundation
import HummingbirdWSClient
import IMCore
import Logging
import NIOSSL
import Synchronization

/// One connection to the server: a WebSocket, or an in-process attachment (`LocalEndpoint`) where
/// commands cross as values. Commands queued with `send` leave in order; received ones arrive on
/// `inbound`, which finishes when the connection ends for any reason.
final class Link: Sendable {
    /// A received text frame.
    enum Frame: Sendable {
        case command(Command)
        /// A frame that does not decode to a `Command` (for example a `cmd` this SDK does not know).
        case undecodable(String)
    }

    /// Identifies the link in the client's bookkeeping.
    let id: Int
    let inbound: AsyncStream<Frame>
    private let transport: Transport
    private let task: Mutex<Task<Void, Never>?>
    private let codec = JSONCommandCodec()
    /// The largest frame this link sends (servers close connections that send larger ones).
    private let maxFrameSize: Int

    private enum Transport: Sendable {
        /// Encoded frames for the WebSocket writer.
        case webSocket(AsyncStream<String>.Continuation)
        case local(LocalConnection, LocalInbox)
    }

    private init(id: Int, inbound: AsyncStream<Frame>, transport: Transport, maxFrameSize: Int = .max) {
        self.id = id
        self.maxFrameSize = maxFrameSize
        self.inbound = inbound
        self.transport = transport
        task = Mutex(nil)
    }

    /// Attaches to a server in the same process. Throws when it is not running.
    static func attach(
        id: Int, to endpoint: any LocalEndpoint,
        review: HookReviewer?
    ) throws(IMError) -> Link {
        let inbox = LocalInbox()
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
    var localInbox: LocalInbox? {
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
        let failure = Mutex<String?>(nil)
        let (frames, outbound) = AsyncStream<String>.makeStream()
        let (inbound, inboundContinuation) = AsyncStream<Frame>.makeStream()
        let (ready, readyContinuation) = AsyncStream<Bool>.makeStream()
        let link = Link(id: id, inbound: inbound, transport: .webSocket(outbound), maxFrameSize: maxFrameSize)
        let configuration = WebSocketClientConfiguration(
            maxFrameSize: maxFrameSize, autoPing: pingInterval.map { .enabled(timePeriod: $0) } ?? .disabled)
        let codec = JSONCommandCodec()
        let task = Task {
            do {
                try await WebSocketClient.connect(url: url, configuration: configuration, tlsConfiguration: tls, logger: logger) {
                    inbound, outbound, _ in
                    readyContinuation.yield(true)
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask {
                            for await frame in frames { try await outbound.write(.text(frame)) }
                            try await outbound.close(.normalClosure, reason: nil)
                        }
                        for try await message in inbound.messages(maxSize: maxFrameSize) {
                            guard case .text(let text) = message else { continue }
                            if let command = try? codec.decode(text) {
                                inboundContinuation.yield(.command(command))
                            } else {
                                inboundContinuation.yield(.undecodable(text))
                            }
                        }
                        group.cancelAll()
                    }
                }
            } catch {
                failure.withLock { $0 = "\(error)" }
                logger.debug("connection ended", metadata: ["error": "\(error)"])
            }
            readyContinuation.finish()
            inboundContinuation.finish()
            outbound.finish()
        }
        link.task.withLock { $0 = task }
        let timer = Task {
            try await Task.sleep(for: timeout)
            readyContinuation.finish()
        }
        defer { timer.cancel() }
        for await _ in ready { return link }
        task.cancel()
        link.close()
        let reason = failure.withLock { $0 }.map { ": \($0)" } ?? ""
        throw IMError(.connectionFailed, "could not connect to \(url)\(reason)")
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
            outbound.yield(frame)
        case .local(let connection, _):
            connection.send(command)
        }
    }

    /// Closes the connection after the commands already queued; `inbound` then finishes.
    func close() {
        switch transport {
        case .webSocket(let outbound): outbound.finish()
        case .local(let connection, _): connection.close()
        }
    }

    /// Closes the connection and waits until it has ended, at most `timeout` (then drops it).
    func closeAndWait(timeout: Duration) async {
        close()
        guard let task = task.withLock({ $0 }) else {
            if case .local(_, let inbox) = transport { await inbox.ended() }
            return
        }
        let timer = Task {
            try? await Task.sleep(for: timeout)
            if !Task.isCancelled { task.cancel() }
        }
        await task.value
        timer.cancel()
    }

    /// Drops the connection at once.
    func abort() {
        close()
        task.withLock { $0 }?.cancel()
    }
}
