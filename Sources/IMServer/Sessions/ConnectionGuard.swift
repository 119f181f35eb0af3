import HummingbirdCore
import Logging
import NIOCore
import Synchronization

/// Protects the server from connections that would hold its sockets and memory: at most
/// `maxConnectionsPerAddress` open connections per IP address, and a deadline (`handshakeTimeout`) for a new
/// TCP connection to complete its first HTTP request. The WebSocket layer adds the rest: a login deadline
/// (`loginTimeout`, in `IMServer.serve`) and pings that close peers that stop answering (`pingInterval`).
///
/// Written here because Hummingbird has no per-address limit and its idle timeout starts only after the
/// first request; the deadline is an event-loop timer per connection, cancelled once a request arrives.
final class ConnectionGuard: Sendable {
    /// Why the server closed a connection to protect itself (the `reason` label of
    /// `hookbot_connections_refused_total`).
    enum Reason: String, CaseIterable, Sendable {
        case addressLimit = "address_limit"
        case handshakeTimeout = "handshake_timeout"
        case loginTimeout = "login_timeout"
    }

    private let maxPerAddress: Int
    private let handshakeTimeout: TimeAmount
    private let metrics: ServerMetrics
    private let logger: Logger
    private let openByAddress = Mutex<[String: Int]>([:])
    private let deadlines = Mutex<[ObjectIdentifier: Scheduled<Void>]>([:])

    init(configuration: ServerConfiguration, metrics: ServerMetrics, logger: Logger) {
        maxPerAddress = configuration.maxConnectionsPerAddress
        handshakeTimeout = TimeAmount(configuration.handshakeTimeout)
        self.metrics = metrics
        self.logger = logger
    }

    /// Called as a connection is accepted, on its event loop: counts it against its address (closing it
    /// on the next tick when the address is over its limit) and starts its handshake deadline.
    func accepted(_ channel: any Channel) {
        let address = Self.address(of: channel)
        let admitted = openByAddress.withLock { open in
            guard open[address, default: 0] < maxPerAddress else { return false }
            open[address, default: 0] += 1
            return true
        }
        guard admitted else {
            refused(.addressLimit, address: address)
            // Closed after setup completes: failing the setup itself would surface on the listening socket.
            channel.eventLoop.execute { channel.close(promise: nil) }
            return
        }
        let id = ObjectIdentifier(channel)
        let deadline = channel.eventLoop.scheduleTask(in: handshakeTimeout) { [self] in
            guard deadlines.withLock({ $0.removeValue(forKey: id) }) != nil else { return }
            refused(.handshakeTimeout, address: address)
            channel.close(promise: nil)
        }
        deadlines.withLock { $0[id] = deadline }
        channel.closeFuture.whenComplete { [self] _ in
            deadlines.withLock { $0.removeValue(forKey: id) }?.cancel()
            openByAddress.withLock { open in
                open[address, default: 1] -= 1
                if open[address] == 0 { open[address] = nil }
            }
        }
    }

    /// The connection's first request has arrived (a WebSocket upgrade or a plain HTTP request).
    func requestArrived(on channel: any Channel) {
        deadlines.withLock { $0.removeValue(forKey: ObjectIdentifier(channel)) }?.cancel()
    }

    /// Records and logs a connection closed for `reason`.
    func refused(_ reason: Reason, address: String) {
        metrics.connectionRefused(reason)
        logger.warning("closing a connection", metadata: ["reason": "\(reason.rawValue)", "remote": "\(address)"])
    }

    private static func address(of channel: any Channel) -> String {
        channel.remoteAddress?.ipAddress ?? "unknown"
    }
}

/// A child channel whose connections pass the `ConnectionGuard` first.
struct GuardedChildChannel<Inner: ServerChildChannel>: ServerChildChannel {
    typealias Value = Inner.Value
    let inner: Inner
    let connectionGuard: ConnectionGuard

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        connectionGuard.accepted(channel)
        return inner.setup(channel: channel, logger: logger)
    }

    func handle(value: Value, logger: Logger) async {
        await inner.handle(value: value, logger: logger)
    }
}

/// Added to a connection's pipeline once its first plain HTTP request has arrived: ends the handshake
/// deadline (HTTP's own idle timeout takes over).
final class FirstRequestArrived: ChannelInboundHandler, RemovableChannelHandler, Sendable {
    typealias InboundIn = NIOAny
    private let connectionGuard: ConnectionGuard

    init(_ connectionGuard: ConnectionGuard) { self.connectionGuard = connectionGuard }

    func handlerAdded(context: ChannelHandlerContext) {
        connectionGuard.requestArrived(on: context.channel)
    }
}
