import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import IMCore
import Logging
import NIOCore
import NIOHTTP1
import ServiceLifecycle
import Synchronization
import Telemetry

/// The IM server: a WebSocket endpoint at `/ws` speaking the JSON command protocol, backed by SQLite, or by
/// PostgreSQL shared with other nodes (a cluster; see `ClusterNode`).
public final class IMServer: Sendable {
    public let configuration: ServerConfiguration
    /// The metrics this server records (and serves at `/metrics`).
    public let telemetry: Telemetry
    let service: IMService
    private let logger: Logger
    private let running = Mutex<(group: ServiceGroup, task: Task<Void, any Error>)?>(nil)
    private let nextConnectionID = Atomic<UInt64>(1)
    /// How to drop each open WebSocket connection at once (by connection id), for shutdown.
    private let sockets = Mutex(OpenSockets())
    let locals = LocalAttachments()
    let connectionGuard: ConnectionGuard
    /// The TLS certificate in use, when the port speaks TLS (`configuration.tls`).
    let certificates: CertificateStore?
    /// Uploaded files (`/media`), when the storage backend keeps them (SQLite for now); see docs/MEDIA.md.
    public let media: (any MediaStore)?

    private let routes = Mutex<[@Sendable (Router<BasicRequestContext>) -> Void]>([])
    private let readinessChecks = Mutex<[@Sendable () async -> String?]>([])

    /// Checks the configuration and loads the TLS certificate (when configured): `ServerConfigurationError`
    /// says what is wrong with them. Then opens (and migrates) the database. The server does not listen
    /// until `start()` or `run()`.
    /// - Parameter telemetry: where the server records its metrics (a registry of its own by default).
    public init(
        configuration: ServerConfiguration, logger: Logger = Logger(label: "hookbot.server"),
        telemetry: Telemetry = Telemetry()
    ) throws {
        self.configuration = configuration
        self.logger = logger
        self.telemetry = telemetry
        try configuration.validate()
        certificates = try configuration.tls.map { try CertificateStore(settings: $0, logger: logger) }
        let metrics = ServerMetrics(factory: telemetry.factory)
        service = try IMService(configuration: configuration, logger: logger, metrics: metrics)
        media = service.media
        connectionGuard = ConnectionGuard(configuration: configuration, metrics: metrics, logger: logger)
    }

    /// Adds HTTP routes to the server's port (the console, for example); call before `start()` or `run()`.
    public func addRoutes(_ register: @escaping @Sendable (Router<BasicRequestContext>) -> Void) {
        routes.withLock { $0.append(register) }
    }

    /// Adds a condition to `GET /ready`: the check returns nil when ready, else the reason it is not.
    public func addReadinessCheck(_ check: @escaping @Sendable () async -> String?) {
        readinessChecks.withLock { $0.append(check) }
    }

    /// Nil when the server can serve (its storage answers, and every added check passes), else why not.
    public func notReadyReason() async -> String? {
        do {
            try await service.store.ping()
        } catch {
            return "storage is not available: \(String(reflecting: error))"
        }
        if let cluster = service.cluster, !cluster.isListening {
            return "not listening for the cluster's announcements"
        }
        for check in readinessChecks.withLock({ $0 }) {
            if let reason = await check() { return reason }
        }
        return nil
    }

    /// Transactions committed by the message pipeline, and the messages they stored.
    public var storageStats: (transactions: Int, messages: Int) { service.storageCounters.snapshot }
    /// Of `storageStats`' transactions, those committed on the event loop that enqueued their message (SQLite, an idle
    /// writer thread: `ServerConfiguration.inlineCommitLimit`).
    public var inlineTransactions: Int { service.storageCounters.inlineTransactions }

    /// CPU seconds used so far by the message pipeline's writer thread (SQLite), or nil (PostgreSQL).
    public var writerCPUSeconds: Double? { service.storageCounters.writerCPUSeconds }

    /// Whether the interceptor with this client id is logged in (readiness checks, benchmarks).
    public func isInterceptorAttached(_ clientID: String) -> Bool { service.interceptors.isAttached(clientID) }

    /// Bytes queued for logged-in WebSocket clients and not yet written (all connections together).
    public var queuedOutboundBytes: Int {
        var seen = Set<ObjectIdentifier>()
        return service.registry.allConnections.reduce(0) { total, connection in
            seen.insert(ObjectIdentifier(connection.transport)).inserted ? total + connection.transport.pendingBytes : total
        }
    }

    /// Messages under review now, and the most there have been at once (bounded by the interception
    /// configuration's `reviewsInFlight` and, per sender, `reviewsPerSender`).
    public var reviewsInFlight: (now: Int, peak: Int) { service.interception.admission.inFlight }

    /// Counters of the interception role.
    public var interceptionStats: InterceptionStats { service.interceptors.stats }

    /// How long interception held each message reviewed since the last call (the newest 8,192 at most), in
    /// milliseconds, oldest first: from the review's request to its verdict's application, the time a message
    /// spends in review that it would not spend without an interceptor.
    public func takeInterceptionHoldTimes() -> [Double] { service.interception.holds.take() }

    /// Starts listening in the background and returns the bound port.
    public func start() async throws -> Int {
        service.goingAway.store(false, ordering: .sequentiallyConsistent)
        try await service.joinCluster()
        let (portStream, portContinuation) = AsyncStream<Int>.makeStream()
        let app = makeApplication { port in
            portContinuation.yield(port)
            portContinuation.finish()
        }
        let group = ServiceGroup(
            configuration: .init(services: [app] + certificateWatcher + mediaRetention + pushServices + memoryTrimmer, logger: logger))
        let task = Task {
            defer { portContinuation.finish() }
            try await group.run()
        }
        running.withLock { $0 = (group, task) }
        for await port in portStream { return port }
        running.withLock { $0 = nil }
        _ = try await task.value
        throw IMError(.internalError, "server did not start listening on \(configuration.host):\(configuration.port)")
    }

    /// Stops a server started with `start()` and waits until it has shut down.
    public func stop() async {
        guard
            let (group, task) = running.withLock({ state in
                defer { state = nil }
                return state
            })
        else { return }
        service.goAway()
        let stragglers = Task { await closeStragglers() }
        await locals.closeAll()
        await group.triggerGracefulShutdown()
        _ = try? await task.value
        // WebSockets are not the HTTP server's tasks (it does not wait for them): wait until they have closed,
        // or were dropped after the grace period.
        await stragglers.value
        await service.pipeline.flush()
        await service.pushes?.queued()
        await service.leaveCluster()
    }

    /// Whether the server was started with `start()` and not stopped yet.
    var isRunning: Bool { running.withLock { $0 != nil } }

    func allocateConnectionID() -> UInt64 {
        nextConnectionID.wrappingAdd(1, ordering: .relaxed).oldValue
    }

    /// Runs in the foreground until SIGINT or SIGTERM.
    public func run(onListening: @escaping @Sendable (Int) -> Void = { _ in }) async throws {
        service.goingAway.store(false, ordering: .sequentiallyConsistent)
        try await service.joinCluster()
        let app = makeApplication(onListening)
        let group = ServiceGroup(
            configuration: .init(
                services: [app, GoAwayOnShutdown(server: self)] + certificateWatcher + mediaRetention + pushServices + memoryTrimmer,
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger))
        try await group.run()
        await service.pipeline.flush()
        await service.pushes?.queued()
        await service.leaveCluster()
    }

    /// `wss` when the port speaks TLS, `ws` otherwise (and `https`/`http` for its HTTP endpoints).
    public var webSocketScheme: String { certificates == nil ? "ws" : "wss" }

    /// Loads the TLS certificate files now if they changed (the server also checks every
    /// `TLSSettings.reloadInterval`). Returns true when a new certificate is in use.
    @discardableResult
    public func reloadCertificateIfChanged() -> Bool { certificates?.reloadIfChanged() ?? false }

    private var memoryTrimmer: [any Service] {
        service.memoryTrim.threshold > 0 ? [MemoryTrimService(trim: service.memoryTrim, logger: logger)] : []
    }

    private var certificateWatcher: [any Service] { certificates.map { [CertificateWatcher(store: $0)] } ?? [] }

    private func makeApplication(_ onListening: @escaping @Sendable (Int) -> Void) -> some ApplicationProtocol {
        let router = Router()
        Probes.register(on: router, telemetry: telemetry) { [self] in await notReadyReason() }
        MemberInfoRoute.register(on: router, service: service)
        MediaRoute.register(on: router, service: service, media: media)
        LeanCloudFilesRoute.register(on: router, service: service, media: media)
        for register in routes.withLock({ $0 }) { register(router) }
        let connectionGuard = connectionGuard
        let certificates = certificates
        let maxUploadBytes = configuration.media.maxUploadBytes
        let maxFrameBytes = configuration.maxFrameBytes
        let http1 = HTTP1Channel.Configuration(
            additionalChannelHandlers: [FirstRequestArrived(connectionGuard), ExpectContinue(maxBodyBytes: maxUploadBytes)],
            idleTimeout: TimeAmount(configuration.httpIdleTimeout))
        let server = HTTPServerBuilder { responder -> any ServerChildChannel in
            let http = IMChannel(responder: responder, http1: http1, maxFrameSize: maxFrameBytes) { [self] head, channel in
                connectionGuard.requestArrived(on: channel)
                return accept(head, channel: channel)
            }
            // With TLS, the handshake comes first: the connection guard's deadline covers it too.
            if let certificates {
                return GuardedChildChannel(inner: ReloadingTLSChannel(base: http, store: certificates), connectionGuard: connectionGuard)
            }
            return GuardedChildChannel(inner: http, connectionGuard: connectionGuard)
        }
        return Application(
            router: router,
            server: server,
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "hookbot"),
            onServerRunning: { [service] channel in
                service.mediaURLs.listening(port: channel.localAddress?.port ?? 0)
                onListening(channel.localAddress?.port ?? 0)
            },
            logger: logger
        )
    }

    /// Accepts a WebSocket upgrade of `/ws` in the negotiated wire format (on the connection's event loop):
    /// the response's headers, and what installs the session's handlers (`WebSocketSession`).
    private func accept(_ head: HTTPRequestHead, channel: any Channel) -> (
        headers: HTTPHeaders, install: @Sendable (any Channel) throws -> Void
    )? {
        guard head.uri.split(separator: "?").first == "/ws" else { return nil }
        // Subprotocol negotiation (see Codec/WireFormat.swift): JSON or LeanCloud protobuf.
        let (format, subprotocol) = WireFormat.negotiate(offered: head.headers["Sec-WebSocket-Protocol"])
        var headers = HTTPHeaders()
        if let subprotocol { headers.add(name: "Sec-WebSocket-Protocol", value: subprotocol) }
        return (
            headers,
            { [self] channel in
                try serve(channel, format: format, notifiesUnreadOnly: subprotocol?.hasSuffix(".3") == true)
            }
        )
    }

    /// Adds a session to an upgraded WebSocket (on its event loop). It holds no task while idle: received
    /// messages are handled by a task that lives while there are some (`WebSocketSession`).
    private func serve(_ channel: any Channel, format: WireFormat, notifiesUnreadOnly: Bool) throws {
        let remote = channel.remoteAddress?.description ?? "unknown"
        let codec = FrameCodec(format)
        let abort: @Sendable () -> Void = { channel.close(promise: nil) }
        let settings = WebSocketSessionSettings(
            pingInterval: configuration.pingInterval, loginTimeout: configuration.loginTimeout,
            pauseReadingAboveQueuedBytes: configuration.pauseReadingAboveQueuedBytes, maxFrameSize: configuration.maxFrameBytes)
        let transport = try WebSocketSession.install(
            on: channel, service: service, connectionGuard: connectionGuard, settings: settings, format: format, logger: logger,
            makeTransport: { writer in
                Transport(
                    remoteAddress: remote, format: format, encoder: { codec.encode($0) }, emit: { writer.write($0) }, finish: {},
                    notifiesUnreadOnly: notifiesUnreadOnly, overflowBytes: configuration.closeAboveQueuedBytes,
                    overflow: { [logger] in
                        // A client that does not read what it is sent would hold the server's memory: drop it.
                        logger.warning("closing a connection that does not read", metadata: ["remote": "\(remote)"])
                        abort()
                    },
                    writer: writer, allocateID: { [self] in allocateConnectionID() })
            },
            onEnd: { [self] transport in
                let id = transport.firstConnectionID
                for waiter in sockets.withLock({ $0.remove(id) }) { waiter.resume() }
                service.metrics.connectionClosed(format)
                logger.info("connection closed", metadata: ["conn": "\(id)"])
            })
        let connection = transport.openFirst()
        service.metrics.connectionOpened(format)
        sockets.withLock { $0.open[connection.id] = abort }
        logger.info("connection accepted", metadata: ["conn": "\(connection.id)", "remote": "\(remote)", "format": "\(format)"])
    }
}

extension IMServer {
    /// Waits up to `shutdownGrace` for the WebSocket connections to close after `goaway`, then drops the rest.
    /// The last connection to close wakes it (`OpenSockets.remove`); a timer ends the wait at the deadline.
    /// (`stop()` and the shutdown service may both wait.)
    fileprivate func closeStragglers() async {
        let grace = configuration.shutdownGrace
        let id = sockets.withLock { $0.newWaiterID() }
        let timer = Task { [self] in
            try? await Task.sleep(for: grace)
            sockets.withLock { $0.stopWaiting(id) }?.resume()
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                if !sockets.withLock({ $0.wait(id, continuation) }) { continuation.resume() }
            }
        } onCancel: {
            timer.cancel()
        }
        timer.cancel()
        if Task.isCancelled { return }
        let left = sockets.withLock { Array($0.open.values) }
        guard !left.isEmpty else { return }
        logger.notice("closing connections that did not close after goaway", metadata: ["count": "\(left.count)"])
        for abort in left { abort() }
    }

    fileprivate func goAway() { service.goAway() }
}

/// The open WebSocket connections (how to drop each), and the shutdowns waiting for them to close.
private struct OpenSockets: ~Copyable {
    var open: [UInt64: @Sendable () -> Void] = [:]
    private var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    private var stopped: Set<UInt64> = []
    private var nextWaiterID: UInt64 = 0

    mutating func newWaiterID() -> UInt64 {
        nextWaiterID += 1
        return nextWaiterID
    }

    /// Removes a closed connection; the waiters to resume when it was the last.
    mutating func remove(_ id: UInt64) -> [CheckedContinuation<Void, Never>] {
        open.removeValue(forKey: id)
        guard open.isEmpty else { return [] }
        defer { waiters = [:] }
        return Array(waiters.values)
    }

    /// Keeps `continuation` until the last connection closes or `stopWaiting(id)`; false (not kept) when
    /// there is nothing to wait for.
    mutating func wait(_ id: UInt64, _ continuation: CheckedContinuation<Void, Never>) -> Bool {
        guard !open.isEmpty, !stopped.contains(id) else { return false }
        waiters[id] = continuation
        return true
    }

    /// Waiter `id`'s grace period is over (or its wait was cancelled): its continuation, if it waits.
    mutating func stopWaiting(_ id: UInt64) -> CheckedContinuation<Void, Never>? {
        stopped.insert(id)
        return waiters.removeValue(forKey: id)
    }
}

/// Tells every client `goaway` when the server starts shutting down, so SDKs reconnect (elsewhere or later)
/// instead of waiting for the socket to drop; connections still open after the grace period are dropped.
private struct GoAwayOnShutdown: Service {
    let server: IMServer

    func run() async throws {
        try? await gracefulShutdown()
        server.goAway()
        await server.closeStragglers()
    }
}

extension IMServer {
    /// Transactions this node has run on PostgreSQL (the message pipeline's, presence, announcements,
    /// logins…), or nil on SQLite; benchmarks report them per 1,000 messages.
    public var databaseTransactionCount: Int? { (service.store as? PostgresStore)?.transactionsRun }
}
