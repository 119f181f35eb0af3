import Foundation
import IMCore
import NIOCore
import Synchronization
import NIOWebSocket

/// One client connection: a WebSocket, or an in-process attachment (`LocalEndpoint`) whose commands
/// cross as values. Everything sent to a connection leaves in the order it was queued (WebSocket frames
/// go to a single writer task). Messages fanned out before the connection's backlog
/// has been delivered are held back, then sent after it (skipping any already in the backlog).
final class Connection: Sendable {
    /// What the writer task does next.
    enum Outbound: Sendable {
        case text(String)
        case binary(ByteBuffer)
        /// A command handed as a value to an in-process client.
        case command(Command)
        case close(WebSocketErrorCode, String?)
    }

    /// The logged-in identity of a connection.
    struct Identity: Sendable {
        var clientID: String
        var tag: String?
        var deviceID: String?
        /// The session token issued at this login (revoked when the session closes itself).
        var sessionToken: String?
    }

    private struct State {
        var identity: Identity?
        var ready = false
        var held: [(id: String, frame: Outbound)] = []
        var closed = false
    }

    let id: UInt64
    let remoteAddress: String
    /// The wire format frames are encoded in; fan-out encodes each message once per format.
    let format: WireFormat
    /// Answers interception requests with a direct call instead of a `hook request` frame (in-process only).
    let review: (@Sendable (Command) async -> Command)?
    private let emit: @Sendable (Outbound) -> Void
    private let finish: @Sendable () -> Void
    private let encoder: @Sendable (Command) -> Outbound
    private let state = Mutex(State())

    /// A connection whose frames go to a writer task through `outbound`.
    convenience init(id: UInt64, remoteAddress: String, outbound: AsyncStream<Outbound>.Continuation, format: WireFormat,
                     encoder: @escaping @Sendable (Command) -> Outbound) {
        self.init(id: id, remoteAddress: remoteAddress, format: format, encoder: encoder,
                  emit: { outbound.yield($0) }, finish: { outbound.finish() })
    }

    /// A connection that hands what it sends to `emit`; `finish` runs once when it closes. `review`
    /// answers interception requests directly (in-process interceptors).
    init(id: UInt64, remoteAddress: String, format: WireFormat, encoder: @escaping @Sendable (Command) -> Outbound,
         emit: @escaping @Sendable (Outbound) -> Void, finish: @escaping @Sendable () -> Void,
         review: (@Sendable (Command) async -> Command)? = nil) {
        self.review = review
        self.id = id
        self.remoteAddress = remoteAddress
        self.format = format
        self.encoder = encoder
        self.emit = emit
        self.finish = finish
    }

    var identity: Identity? { state.withLock { $0.identity } }
    /// Whether `close` has been called.
    var isClosed: Bool { state.withLock { $0.closed } }
    var clientID: String? { identity?.clientID }

    func setIdentity(_ identity: Identity?) {
        state.withLock { $0.identity = identity }
    }

    /// Queues a command for sending.
    func send(_ command: Command) {
        let closed = state.withLock { $0.closed }
        if !closed { emit(encoder(command)) }
    }

    /// Sends a conversation message, or holds it until the backlog has gone out.
    func deliver(messageID: String, _ command: Command) {
        deliver(messageID: messageID, SharedFrame(command))
    }

    /// Sends a message that goes to many connections, encoded once per wire format.
    func deliver(messageID: String, _ shared: SharedFrame) {
        let frame = shared.encoded(for: format, using: encoder)
        let sendNow = state.withLock { state -> Bool in
            if state.ready { return !state.closed }
            state.held.append((messageID, frame))
            return false
        }
        if sendNow { emit(frame) }
    }

    /// Releases held messages, skipping those already sent as backlog.
    func markReady(alreadySent: Set<String>) {
        let held = state.withLock { state -> [(id: String, frame: Outbound)] in
            state.ready = true
            defer { state.held.removeAll() }
            return state.closed ? [] : state.held
        }
        for item in held where !alreadySent.contains(item.id) { emit(item.frame) }
    }

    /// Sends a close frame and ends the writer.
    func close(code: WebSocketErrorCode = .normalClosure, reason: String? = nil) {
        let wasClosed = state.withLock { state -> Bool in
            defer { state.closed = true }
            return state.closed
        }
        guard !wasClosed else { return }
        emit(.close(code, reason))
        finish()
    }
}

/// A command fanned out to many connections; each wire format encodes it at most once.
final class SharedFrame: Sendable {
    let command: Command
    private let encoded = Mutex<[WireFormat: Connection.Outbound]>([:])

    init(_ command: Command) { self.command = command }

    func encoded(for format: WireFormat, using encode: (Command) -> Connection.Outbound) -> Connection.Outbound {
        if let frame = encoded.withLock({ $0[format] }) { return frame }
        let frame = encode(command)
        encoded.withLock { $0[format] = frame }
        return frame
    }
}
