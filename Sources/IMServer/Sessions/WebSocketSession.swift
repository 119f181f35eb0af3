import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import IMCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOWebSocket
import Synchronization

/// What a WebSocket session needs from its server.
struct WebSocketSessionSettings: Sendable {
    var pingInterval: Duration
    var loginTimeout: Duration
    /// How long a close frame we sent may wait for the peer's before the connection is dropped.
    var closeTimeout: Duration = .seconds(10)
    var pauseReadingAboveQueuedBytes: Int
    /// The largest message a client may send (the frames of one message together).
    var maxFrameSize: Int
    /// Received messages waiting to be handled before the socket is read no further.
    var maxQueuedMessages = 4
}

/// What a session's drain task reads: received messages in order, then the end of the connection.
private enum Received: Sendable {
    case message(WebSocketMessage)
    /// The peer's close frame (its status code).
    case closeFrame(ByteBuffer)
    case closed
}

/// The received messages of one WebSocket, handled in order by a task that exists only while there are
/// some: an idle session holds no task.
private final class Inbox: Sendable {
    private struct State {
        var queue: [Received] = []
        var draining = false
        var readsWithheld = false
    }

    private let state = Mutex(State())

    /// Queues `item`; true when no task is draining the inbox (the caller starts one).
    func push(_ item: Received) -> Bool {
        state.withLock { state in
            state.queue.append(item)
            defer { state.draining = true }
            return !state.draining
        }
    }

    /// The next item, or nil (and the drain task ends) when there is none.
    func next() -> Received? {
        state.withLock { state in
            guard !state.queue.isEmpty else {
                state.draining = false
                // Shrink what a burst grew: an idle session keeps no buffer.
                state.queue = []
                return nil
            }
            return state.queue.removeFirst()
        }
    }

    /// Whether the socket may be read now; when not, remembers that a read is owed.
    func mayRead(below limit: Int) -> Bool {
        state.withLock { state in
            state.readsWithheld = state.queue.count >= limit
            return !state.readsWithheld
        }
    }

    /// True once, when a read was withheld and the queue has room again.
    func owesRead(below limit: Int) -> Bool {
        state.withLock { state in
            guard state.readsWithheld, state.queue.count < limit else { return false }
            state.readsWithheld = false
            return true
        }
    }
}

/// Serves one WebSocket on its event loop: answers pings and sends its own (closing a peer that stops
/// answering), closes a session that does not log in in time, queues received messages for the session's
/// drain task, writes what the transport sends in order (counting the bytes until they are written), and
/// stops reading while the drain task is behind.
final class WebSocketSession: ChannelDuplexHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    /// Writes frames from any thread, in the order they are handed over.
    final class Writer: Sendable {
        let channel: any Channel
        /// The channel's event loop (read once per frame by `Outbox`: a stored reference, not a call).
        let eventLoop: any EventLoop
        /// Weak: the session holds its transport, which holds this writer; a strong reference here made a cycle
        /// that kept every WebSocket's session, transport and, through the transport, its server alive after the
        /// connection closed. The channel's pipeline and the session's drain task keep the session; once both are
        /// done with it (the session has ended), nothing more is written to it.
        let session: NIOLoopBound<Weak<WebSocketSession>>
        /// Where frames from other threads wait for the event loop (with the other sessions' of the loop).
        let writes: LoopWrites

        init(channel: any Channel, session: WebSocketSession) {
            self.channel = channel
            self.eventLoop = channel.eventLoop
            self.session = NIOLoopBound(Weak(session), eventLoop: channel.eventLoop)
            self.writes = LoopWrites.of(channel.eventLoop)
        }

        func write(_ frame: Connection.Outbound) {
            if eventLoop.inEventLoop {
                session.value.value?.write(frame, flush: true)
            } else {
                writes.submit([(self, frame)])
            }
        }

        /// Writes frames of sessions of the current event loop (an `Outbox`'s), then flushes each session once.
        static func write(_ items: [(Writer, Connection.Outbound)]) {
            var written: [WebSocketSession] = []
            for (writer, frame) in items {
                guard let session = writer.session.value.value else { continue }
                session.write(frame, flush: false)
                if !session.inBatch {
                    session.inBatch = true
                    written.append(session)
                }
            }
            for session in written {
                session.inBatch = false
                session.flush()
            }
        }
    }

    private let settings: WebSocketSessionSettings
    private let service: IMService
    private let logger: Logger
    private let codec: FrameCodec
    private let inbox = Inbox()
    /// Set in `start`, before the first frame is read.
    private var transport: Transport!
    private var context: ChannelHandlerContext?
    /// Where the frames the transport sends are written, whole (`ServerFrame`): the context of a handler
    /// just under NIO's frame encoder, so they pass it by. Set in `install`.
    private var frames: ChannelHandlerContext?
    /// The last frame written since the last flush, held back so that it carries the one promise that counts
    /// every frame written since the previous one as written (not a promise per frame). Frames written after it
    /// before the flush are copied into it (`coalescing`), up to `coalescedBytes`.
    private var lastFrame: ByteBuffer?
    /// Whether `lastFrame` is a buffer of this session's own that later frames are appended to (a fan-out's
    /// frame is shared by every receiver and is never written into).
    private var coalescing = false
    /// Bytes (`Transport.size(of:)`) of the frames written since the last promise, `lastFrame`'s included.
    private var unsettled = 0
    /// Whether `Writer.write(_:)` has this session in the batch it is writing.
    private var inBatch = false
    private var pinger: RepeatedTask?
    private var loginDeadline: Scheduled<Void>?
    private var closeDeadline: Scheduled<Void>?
    private var awaitingPong = false
    private var closeSent = false
    private var ended = false
    private let onEnd: @Sendable (Transport) -> Void
    private let connectionGuard: ConnectionGuard

    init(
        service: IMService, connectionGuard: ConnectionGuard, settings: WebSocketSessionSettings, format: WireFormat, logger: Logger,
        onEnd: @escaping @Sendable (Transport) -> Void
    ) {
        self.service = service
        self.connectionGuard = connectionGuard
        self.settings = settings
        self.logger = logger
        self.codec = FrameCodec(format)
        self.onEnd = onEnd
    }

    /// Adds a session to `channel` (on its event loop) carrying `transport`, made by `makeTransport` with the
    /// session's writer.
    static func install(
        on channel: any Channel, service: IMService, connectionGuard: ConnectionGuard, settings: WebSocketSessionSettings,
        format: WireFormat, logger: Logger, makeTransport: (Writer) -> Transport, onEnd: @escaping @Sendable (Transport) -> Void
    ) throws -> Transport {
        let session = WebSocketSession(
            service: service, connectionGuard: connectionGuard, settings: settings, format: format, logger: logger, onEnd: onEnd)
        let transport = makeTransport(Writer(channel: channel, session: session))
        session.transport = transport
        let bypass = FrameBypass()
        try channel.pipeline.syncOperations.addHandler(
            bypass, position: .before(try channel.pipeline.syncOperations.handler(type: WebSocketFrameEncoder.self)))
        session.frames = try channel.pipeline.syncOperations.context(handler: bypass)
        try channel.pipeline.syncOperations.addHandler(
            NIOWebSocketFrameAggregator(
                minNonFinalFragmentSize: 0, maxAccumulatedFrameCount: Int.max, maxAccumulatedFrameSize: settings.maxFrameSize))
        try channel.pipeline.syncOperations.addHandler(session)
        return transport
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let loop = context.eventLoop
        let bound = NIOLoopBound(self, eventLoop: loop)
        let interval = TimeAmount(settings.pingInterval)
        pinger = loop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in bound.value.ping() }
        loginDeadline = loop.scheduleTask(in: TimeAmount(settings.loginTimeout)) { bound.value.loginDeadlinePassed() }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    // MARK: Reading

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text, .binary:
            guard frame.reservedBits.isEmpty else { return close(code: .protocolError, reason: nil) }
            let data = frame.unmaskedData
            // A message for review: the in-process interceptor gets ready while this thread decodes it (issue 30).
            if service.interceptors.isActive, codec.format.probablySendsMessage(data) { service.interceptors.expectReview() }
            receive(.message(frame.opcode == .text ? .text(String(buffer: data)) : .binary(data)))
        case .ping:
            guard frame.fin else { return close(code: .protocolError, reason: nil) }
            if !closeSent {
                context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)), promise: nil)
            }
        case .pong:
            awaitingPong = false
        case .connectionClose:
            if closeSent {
                context.close(promise: nil)
            } else {
                // Answered after the messages received before it have been handled (a logout, then the close).
                var data = frame.unmaskedData
                receive(.closeFrame(data.readSlice(length: min(2, data.readableBytes)) ?? ByteBuffer()))
            }
        default:
            break
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        switch error {
        case NIOWebSocketFrameAggregator.Error.accumulatedFrameSizeIsTooLarge, NIOWebSocketError.invalidFrameLength:
            close(code: .messageTooLarge, reason: nil)
        default:
            logger.debug("websocket error", metadata: ["error": "\(error)"])
            close(code: .protocolError, reason: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        end()
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // The server is shutting down: close, as Hummingbird's WebSocket handler did (the server sent `goaway`
        // first, and drops connections still open after its grace period).
        if event is ChannelShouldQuiesceEvent {
            close(code: .normalClosure, reason: nil)
        } else if let event = event as? ChannelEvent, event == .inputClosed {
            // The peer closed its side without a close frame (a dropped client: Hummingbird's server allows
            // half-closure, so this is an event, not the end of the channel). Nothing more can arrive: end the
            // session now, as a drop (its will message goes out), instead of at the next ping timeout.
            context.close(promise: nil)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    /// Withholds reads while the drain task is behind.
    func read(context: ChannelHandlerContext) {
        if inbox.mayRead(below: settings.maxQueuedMessages) { context.read() }
    }

    private func receive(_ item: Received) {
        guard inbox.push(item) else { return }
        let inbox = inbox
        let transport = transport!
        let service = service
        let codec = codec
        let settings = settings
        let onEnd = onEnd
        let resume: @Sendable () -> Void
        let answerClose: @Sendable (ByteBuffer) -> Void
        if let context {
            let channel = context.channel
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            resume = {
                if inbox.owesRead(below: settings.maxQueuedMessages) { channel.eventLoop.execute { bound.value.context?.read() } }
            }
            answerClose = { code in channel.eventLoop.execute { bound.value.answerClose(code) } }
        } else {
            resume = {}
            answerClose = { _ in }
        }
        // On the event loop that read the messages: its replies are written without a hop (`Writer.write`).
        Task(executorPreference: context.map { EventLoopTaskExecutor($0.eventLoop) }) {
            while let item = inbox.next() {
                resume()
                switch item {
                case .message(let message):
                    // Backpressure: while this client's replies are not written, handle nothing more from it.
                    // (A closed channel fails its pending writes, which counts them as written.)
                    await transport.drained(below: settings.pauseReadingAboveQueuedBytes)
                    switch codec.decode(message) {
                    case .success(let commands):
                        for command in commands { await service.handle(command, arrivingOn: transport) }
                    case .failure(let failure):
                        transport.write(
                            codec.encode(IMService.errorReply(failure.error, to: Command(cmd: .error, i: failure.requestSerial))))
                    }
                case .closeFrame(let code):
                    answerClose(code)
                case .closed:
                    service.transportClosed(transport)
                    onEnd(transport)
                }
            }
        }
    }

    private func end() {
        guard !ended else { return }
        ended = true
        pinger?.cancel()
        loginDeadline?.cancel()
        closeDeadline?.cancel()
        pinger = nil
        loginDeadline = nil
        closeDeadline = nil
        receive(.closed)
    }

    // MARK: Timers

    private func ping() {
        guard let context, !closeSent else { return }
        if awaitingPong {
            // No answer to the last ping within an interval.
            close(code: .goingAway, reason: "Ping timeout")
            context.close(promise: nil)
            return
        }
        awaitingPong = true
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .ping, data: ByteBuffer())), promise: nil)
    }

    private func loginDeadlinePassed() {
        loginDeadline = nil
        guard let context, !transport.hasLoggedIn else { return }
        connectionGuard.refused(.loginTimeout, address: transport.remoteAddress)
        context.close(promise: nil)
    }

    // MARK: Writing

    /// Writes a frame the transport sends (on the event loop); without `flush`, `flush()` sends it later.
    fileprivate func write(_ frame: Connection.Outbound, flush: Bool) {
        let size = Transport.size(of: frame)
        guard let context, !closeSent, !FrameCodec.isEmpty(frame) else { return transport.written(bytes: size) }
        let bytes: ByteBuffer
        switch frame {
        case .framed(let buffer): bytes = buffer
        case .text(let text): bytes = ServerFrame.frame(text: text, allocator: context.channel.allocator)
        case .binary(let buffer): bytes = ServerFrame.frame(.binary, payload: buffer, allocator: context.channel.allocator)
        case .command: return transport.written(bytes: size)
        case .close(let code, let reason):
            transport.written(bytes: size)
            return close(code: code, reason: reason)
        }
        unsettled += size
        coalesce(bytes)
        if flush { self.flush() }
    }

    /// At most this many bytes of frames are copied into one buffer before it is handed to NIO.
    static let coalescedBytes = 16_384

    /// Makes `bytes` the end of what `flush()` sends: a session's frames of one batch (a committed batch of a
    /// big room's messages: several frames per socket) go to NIO as one buffer, so the channel pipeline, its
    /// pending-writes queue and the socket's objects are walked once per socket and batch, not once per frame.
    /// Small frames are copied (cheaper than a pipeline write each); one that would pass `coalescedBytes` is
    /// written separately.
    private func coalesce(_ bytes: ByteBuffer) {
        guard var buffer = lastFrame else {
            lastFrame = bytes
            return
        }
        guard buffer.readableBytes + bytes.readableBytes <= Self.coalescedBytes, let frames else {
            frames?.write(NIOAny(buffer), promise: nil)
            (lastFrame, coalescing) = (bytes, false)
            return
        }
        lastFrame = nil // `buffer` is the only reference now: appending to it does not copy it
        if !coalescing {
            var own = frames.channel.allocator.buffer(capacity: 2 * (buffer.readableBytes + bytes.readableBytes))
            own.writeImmutableBuffer(buffer)
            (buffer, coalescing) = (own, true)
        }
        buffer.writeImmutableBuffer(bytes)
        lastFrame = buffer
    }

    /// Sends what `write(_:flush: false)` queued; its last frame carries the promise that counts them all as
    /// written (NIO completes a channel's writes in order, and a closed channel fails those still pending).
    fileprivate func flush() {
        guard let last = lastFrame else { return }
        let bytes = unsettled
        lastFrame = nil
        coalescing = false
        unsettled = 0
        let transport = transport!
        guard let frames else { return transport.written(bytes: bytes) }
        let promise = frames.eventLoop.makePromise(of: Void.self)
        promise.futureResult.whenComplete { _ in transport.written(bytes: bytes) }
        frames.writeAndFlush(NIOAny(last), promise: promise)
    }

    /// Echoes the peer's close (RFC 6455 5.5.1), then ends the connection once it is written.
    private func answerClose(_ code: ByteBuffer) {
        guard let context else { return }
        let channel = context.channel
        guard !closeSent else { return channel.close(promise: nil) }
        closeSent = true
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: code))).whenComplete { _ in
            channel.close(promise: nil)
        }
    }

    /// Sends a close frame, then drops the connection when the peer answers it or after `closeTimeout`.
    private func close(code: WebSocketErrorCode, reason: String?) {
        guard let context, !closeSent else { return }
        flush()
        closeSent = true
        var data = context.channel.allocator.buffer(capacity: 2 + (reason?.utf8.count ?? 0))
        data.write(webSocketErrorCode: code)
        if let reason { data.writeString(reason) }
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: data)), promise: nil)
        let channel = context.channel
        closeDeadline = context.eventLoop.scheduleTask(in: TimeAmount(settings.closeTimeout)) { channel.close(promise: nil) }
    }
}

/// Passes the session's whole frames (`ServerFrame`) on to the socket: placed just under NIO's
/// `WebSocketFrameEncoder`, so what the session writes on this handler's context skips the encoder, while
/// control frames (pings, pongs, close) still go through it.
private final class FrameBypass: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
}
