import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket
import Synchronization

/// The client end of a WebSocket as channel handlers on one of NIO's event loops, on NIO's own WebSocket codec
/// (`NIOWebSocketClientUpgrader`, `WebSocketFrameDecoder`/`Encoder`, `NIOWebSocketFrameAggregator`).
///
/// Written on NIO directly rather than through HummingbirdWSClient because of what every received message
/// cost there (measured with `perf record` on `hookbot bench --only w3`): frames crossed an `NIOAsyncChannel`
/// and an async iterator before the SDK's own stream, and each frame sent was a `writeAndFlush` of its own (a
/// `writev` per ack) with a `getrandom` system call for its masking key. Here the text messages of one socket
/// read reach `receive` together, on the event loop, and the frames queued with `send` between two runs of the
/// event loop leave in one flush.
final class WebSocketChannel: Sendable {
    private let channel: any Channel
    private let handler: NIOLoopBound<ClientHandler>
    private let outbound: Mutex<Outbound>

    /// Frames waiting for the event loop, in the order `send` queued them.
    private struct Outbound {
        var texts: [String] = []
        var scheduled = false
        var closing = false
    }

    private init(channel: any Channel, handler: ClientHandler) {
        self.channel = channel
        self.handler = NIOLoopBound(handler, eventLoop: channel.eventLoop)
        outbound = Mutex(Outbound())
    }

    /// Connects to `url` (`ws://` or `wss://` with `tls`) and upgrades to a WebSocket. `receive` gets the text
    /// messages of each read, in order, on the event loop; `closed` is called once when the connection has ended.
    /// Throws when the connection or the upgrade fails, or when it takes longer than `timeout`.
    static func connect(
        url: String, tls: TLSConfiguration?, timeout: Duration, pingInterval: Duration?, maxFrameSize: Int,
        receive: @escaping @Sendable ([String]) -> Void, closed: @escaping @Sendable () -> Void
    ) async throws -> WebSocketChannel {
        guard let parsed = URL(string: url), let host = parsed.host, !host.isEmpty else {
            throw WebSocketChannelError("the URL \(url) has no host")
        }
        let port = parsed.port ?? (tls == nil ? 80 : 443)
        let path = parsed.path.isEmpty ? "/" : parsed.path
        let uri = path + (parsed.query.map { "?\($0)" } ?? "")
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: parsed.port.map { "\(host):\($0)" } ?? host)
        headers.add(name: "Origin", value: "\(parsed.scheme ?? "ws")://\(host)")
        let requestHead = HTTPRequestHead(version: .http1_1, method: .GET, uri: uri, headers: headers)
        let sslContext = try tls.map { try NIOSSLContext(configuration: $0) }
        let maxFrameSize = min(max(maxFrameSize, 1), Int(UInt32.max)) // NIO's codec requires 1...UInt32.max
        let bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connectTimeout(timeout.timeAmount)
        let upgraded = try await bootstrap.connect(host: host, port: port) { channel in
            channel.eventLoop.makeCompletedFuture {
                let deadline = channel.eventLoop.scheduleTask(in: timeout.timeAmount) {
                    channel.close(promise: nil)
                }
                if let sslContext {
                    // SNI names a host, never an address; NIOSSL then checks the certificate against the address.
                    let name = host.isIPAddress ? nil : host
                    try channel.pipeline.syncOperations.addHandler(
                        try NIOSSLClientHandler(context: sslContext, serverHostname: name), position: .first)
                }
                let upgrader = NIOTypedWebSocketClientUpgrader<WebSocketChannel?>(
                    maxFrameSize: maxFrameSize,
                    upgradePipelineHandler: { channel, _ in
                        deadline.cancel()
                        return channel.eventLoop.makeCompletedFuture {
                            let handler = ClientHandler(pingInterval: pingInterval, receive: receive, closed: closed)
                            let socket = WebSocketChannel(channel: channel, handler: handler)
                            try channel.pipeline.syncOperations.addHandlers([
                                NIOWebSocketFrameAggregator(
                                    minNonFinalFragmentSize: 0, maxAccumulatedFrameCount: 1 << 16,
                                    maxAccumulatedFrameSize: maxFrameSize),
                                handler,
                            ])
                            return socket
                        }
                    })
                let configuration = NIOTypedHTTPClientUpgradeConfiguration<WebSocketChannel?>(
                    upgradeRequestHead: requestHead, upgraders: [upgrader],
                    notUpgradingCompletionHandler: { channel in
                        deadline.cancel()
                        channel.close(promise: nil)
                        return channel.eventLoop.makeSucceededFuture(nil)
                    })
                var pipeline = NIOUpgradableHTTPClientPipelineConfiguration(upgradeConfiguration: configuration)
                pipeline.leftOverBytesStrategy = .forwardBytes
                let upgrade = try channel.pipeline.syncOperations.configureUpgradableHTTPClientPipeline(configuration: pipeline)
                upgrade.whenFailure { _ in deadline.cancel() }
                return upgrade
            }
        }
        guard let socket = try await upgraded.get() else {
            throw WebSocketChannelError("the server did not upgrade the connection to a WebSocket")
        }
        return socket
    }

    /// Queues a text frame. Frames queued before the event loop next runs are written together, in order, and
    /// flushed once.
    func send(_ text: String) {
        let schedule = outbound.withLock { outbound -> Bool in
            guard !outbound.closing else { return false }
            outbound.texts.append(text)
            defer { outbound.scheduled = true }
            return !outbound.scheduled
        }
        if schedule { channel.eventLoop.execute { self.writeQueued() } }
    }

    /// Sends a close frame after the frames already queued; the connection ends when the server answers it (or
    /// after `closeTimeout`).
    func close(closeTimeout: Duration = .seconds(5)) {
        let schedule = outbound.withLock { outbound -> Bool in
            guard !outbound.closing else { return false }
            outbound.closing = true
            defer { outbound.scheduled = true }
            return !outbound.scheduled
        }
        if schedule { channel.eventLoop.execute { self.writeQueued() } }
        channel.eventLoop.scheduleTask(in: closeTimeout.timeAmount) { [channel] in
            channel.close(promise: nil)
        }
    }

    /// Closes as `close` does and waits until the connection has ended, at most `timeout` (then drops it).
    func closeAndWait(timeout: Duration) async {
        close(closeTimeout: timeout)
        try? await channel.closeFuture.get()
    }

    /// Drops the connection at once.
    func abort() {
        outbound.withLock { $0.closing = true }
        channel.close(promise: nil)
    }

    /// On the event loop: writes what `send` and `close` queued, then flushes once.
    private func writeQueued() {
        let (texts, closing) = outbound.withLock { outbound in
            defer {
                outbound.texts.removeAll(keepingCapacity: true)
                outbound.scheduled = false
            }
            return (outbound.texts, outbound.closing)
        }
        guard channel.isActive else { return }
        let handler = handler.value
        for text in texts {
            var buffer = channel.allocator.buffer(capacity: text.utf8.count)
            buffer.writeString(text)
            handler.write(opcode: .text, buffer)
        }
        if closing { handler.sendClose(code: .normalClosure) }
        channel.flush()
    }
}

/// Why a WebSocket could not be opened.
struct WebSocketChannelError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The WebSocket's frames on the event loop: text messages gathered per read, pings answered, the ping timer,
/// the close handshake.
private final class ClientHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let pingInterval: Duration?
    private let receive: @Sendable ([String]) -> Void
    private let closed: @Sendable () -> Void
    private var context: ChannelHandlerContext?
    private var received: [String] = []
    private var masks = MaskingKeys()
    private var pingTimer: RepeatedTask?
    private var awaitingPong = false
    private var sentClose = false
    private var ended = false

    init(pingInterval: Duration?, receive: @escaping @Sendable ([String]) -> Void, closed: @escaping @Sendable () -> Void) {
        self.pingInterval = pingInterval
        self.receive = receive
        self.closed = closed
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        guard let pingInterval else { return }
        let loop = context.eventLoop
        pingTimer = loop.scheduleRepeatedTask(initialDelay: pingInterval.timeAmount, delay: pingInterval.timeAmount) {
            [self] _ in
            loop.assertInEventLoop()
            ping()
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        pingTimer?.cancel()
        self.context = nil
    }

    /// A ping per interval; a connection whose previous ping got no pong is closed.
    private func ping() {
        guard let context, !sentClose else { return }
        if awaitingPong {
            context.close(promise: nil)
            return
        }
        awaitingPong = true
        var payload = context.channel.allocator.buffer(capacity: 8)
        payload.writeInteger(UInt64.random(in: .min ... .max))
        write(opcode: .ping, payload)
        context.flush()
    }

    /// Writes a masked frame (not flushed).
    func write(opcode: WebSocketOpcode, _ data: ByteBuffer) {
        guard let context, !sentClose else { return }
        context.write(wrapOutboundOut(WebSocketFrame(fin: true, opcode: opcode, maskKey: masks.next(), data: data)), promise: nil)
    }

    /// Writes a close frame with `code` (not flushed); nothing is written after it.
    func sendClose(code: WebSocketErrorCode) {
        guard let context, !sentClose else { return }
        var data = context.channel.allocator.buffer(capacity: 2)
        data.write(webSocketErrorCode: code)
        write(opcode: .connectionClose, data)
        sentClose = true
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text:
            received.append(String(buffer: frame.unmaskedData))
        case .ping:
            write(opcode: .pong, frame.unmaskedData)
            context.flush()
        case .pong:
            awaitingPong = false
        case .connectionClose:
            // The server's close: answered with its code (when it gave one), then the connection ends.
            var data = frame.unmaskedData
            let code = data.readWebSocketErrorCode() ?? .normalClosure
            deliverReceived()
            sendClose(code: code)
            context.flush()
            context.close(promise: nil)
        default:
            break // binary frames: this SDK speaks JSON text
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        deliverReceived()
        context.fireChannelReadComplete()
    }

    private func deliverReceived() {
        guard !received.isEmpty else { return }
        let texts = received
        received.removeAll(keepingCapacity: true)
        receive(texts)
    }

    func channelInactive(context: ChannelHandlerContext) {
        deliverReceived()
        pingTimer?.cancel()
        if !ended {
            ended = true
            closed()
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

/// WebSocket masking keys from the system's random source (`arc4random_buf`, which reads `getrandom`), read
/// 4 KiB (1,024 keys) at a time instead of a system call per frame.
private struct MaskingKeys {
    private var bytes = [UInt8](repeating: 0, count: 4096)
    private var offset = 4096

    mutating func next() -> WebSocketMaskingKey {
        if offset == bytes.count {
            bytes.withUnsafeMutableBytes { arc4random_buf($0.baseAddress!, $0.count) }
            offset = 0
        }
        defer { offset += 4 }
        return WebSocketMaskingKey([bytes[offset], bytes[offset + 1], bytes[offset + 2], bytes[offset + 3]])!
    }
}

extension Duration {
    /// The duration as NIO's `TimeAmount` (nanoseconds; at least 1).
    fileprivate var timeAmount: TimeAmount {
        let (seconds, attoseconds) = components
        return .nanoseconds(max(1, seconds * 1_000_000_000 + attoseconds / 1_000_000_000))
    }
}

extension String {
    /// Whether this is an IPv4 or IPv6 address literal rather than a host name.
    fileprivate var isIPAddress: Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, self, &v4) == 1 || inet_pton(AF_INET6, self, &v6) == 1
    }
}
