import Foundation
import IMCore
import NIOCore
import NIOWebSocket
import Synchronization

/// One session of a client transport (`Transport`: a WebSocket, or an in-process attachment whose
/// commands cross as values). Everything sent to a connection leaves in the order it was queued (WebSocket
/// frames go to a single writer task). Messages fanned out before the connection's backlog has been
/// delivered are held back, then sent after it (skipping any already in the backlog).
final class Connection: Sendable {
    /// What the writer task does next.
    enum Outbound: Sendable {
        case text(String)
        case binary(ByteBuffer)
        /// A whole WebSocket frame, header included (`ServerFrame`): a fan-out shares one among the receivers
        /// of a wire format, and each socket writes it as it is.
        case framed(ByteBuffer)
        /// A command handed as a value to an in-process client. Boxed (`indirect`): a `Command` is 1.2 KB,
        /// and every frame of a fan-out, queued in an `Outbox`, is an `Outbound`.
        indirect case command(Command)
        case close(WebSocketErrorCode, String?)
    }

    /// The logged-in identity of a connection.
    struct Identity: Sendable {
        var clientID: String
        var tag: String?
        var deviceID: String?
        /// The session token issued at this login (revoked when the session closes itself).
        var sessionToken: String?
        /// How many times the tag had been taken when this login took it: in a cluster, a login of the same
        /// tag with a higher number on another node closes this one.
        var tagGeneration: Int64 = 0
        /// The push token this login registered (`deviceToken`), removed again when the session closes itself.
        var deviceToken: String? = nil
    }

    private struct State {
        var identity: Identity?
        var ready = false
        var held: [(id: String, frame: Outbound)] = []
        var closed = false
    }

    let id: UInt64
    /// The transport carrying this session (and possibly others).
    let transport: Transport
    private let state = Mutex(State())

    /// A session of `transport`; use `Transport.openFirst` or `Transport.connection(for:)` to make one.
    init(id: UInt64, transport: Transport) {
        self.id = id
        self.transport = transport
    }

    var remoteAddress: String { transport.remoteAddress }
    /// The wire format frames are encoded in; fan-out encodes each message once per format.
    var format: WireFormat { transport.format }
    /// Answers interception requests directly (in-process interceptors).
    var review: HookAnswerer? { transport.review }

    var identity: Identity? { state.withLock { $0.identity } }
    /// Whether `close` has been called.
    var isClosed: Bool { state.withLock { $0.closed } }
    var clientID: String? { state.withLock { $0.identity?.clientID } }

    func setIdentity(_ identity: Identity?) {
        state.withLock { $0.identity = identity }
    }

    /// Queues a command for sending (through `outbox`, when given, until it is sent).
    func send(_ command: Command, via outbox: Outbox? = nil) {
        let (closed, clientID) = state.withLock { ($0.closed, $0.identity?.clientID) }
        if !closed { transport.write(transport.encoder(named(command, clientID)), via: outbox) }
    }

    /// The command with this session's client id in `peerId`, when the transport names sessions.
    private func named(_ command: Command, _ clientID: String?) -> Command {
        guard let clientID, command.peerId == nil, transport.namesSessions else { return command }
        var named = command
        named.peerId = clientID
        return named
    }

    /// Sends a message that goes to many connections, encoded once per wire format (where the transport
    /// names sessions, the protobuf encoding gets `peerId` appended; JSON is encoded again), or holds it until
    /// the backlog has gone out. Not to a connection of `sender` (nor to one without a login when `sender` is
    /// nil): returns whether it was delivered. `encoded` is the caller's memo of the last format's encoding.
    fileprivate func deliver(
        messageID: String, _ shared: SharedFrame, sender: String?, via outbox: Outbox, encoded memo: inout SharedFrame.Memo?
    ) -> Bool {
        let transport = transport
        let names = transport.namesSessions
        // One lock on the fast path (a logged-in, ready session): whether it is the sender's, and its state.
        let (isSender, clientID, ready, closed) = state.withLock { state in
            (state.identity?.clientID == sender, names ? state.identity?.clientID : nil, state.ready, state.closed)
        }
        if isSender { return false }
        let format = transport.format
        let encoded: SharedFrame.Encoded
        if let memo, memo.format == format {
            encoded = memo.encoded
        } else {
            encoded = shared.encoded(for: format, using: transport.encoder)
            memo = (format, encoded)
        }
        var frame = encoded.framed
        if names, shared.command.peerId == nil, let clientID {
            frame =
                FrameCodec.naming(encoded.payload, format: format, peerID: clientID)
                ?? transport.encoder(named(shared.command, clientID))
        }
        if ready {
            if !closed { transport.write(frame, via: outbox) }
            return true
        }
        let sendNow = state.withLock { state -> Bool in
            if state.ready { return !state.closed }
            state.held.append((messageID, frame))
            return false
        }
        if sendNow { transport.write(frame, via: outbox) }
        return true
    }

    /// The ids of the messages held so far: those that reached this session live, after it was registered.
    func heldMessageIDs() -> Set<String> {
        state.withLock { Set($0.held.map(\.id)) }
    }

    /// Releases held messages, skipping those already sent as backlog.
    func markReady(alreadySent: Set<String>) {
        let held = state.withLock { state -> [(id: String, frame: Outbound)] in
            state.ready = true
            defer { state.held.removeAll() }
            return state.closed ? [] : state.held
        }
        for item in held where !alreadySent.contains(item.id) { transport.write(item.frame) }
    }

    /// Ends the session. When it was the transport's last one, sends a close frame and ends the writer;
    /// the transport's other sessions are not affected.
    func close(code: WebSocketErrorCode = .normalClosure, reason: String? = nil) {
        let wasClosed = state.withLock { state -> Bool in
            defer { state.closed = true }
            return state.closed
        }
        guard !wasClosed, transport.release(self) else { return }
        transport.write(.close(code, reason))
        transport.end()
    }
}

/// A command fanned out to many connections; each wire format encodes and frames it at most once.
final class SharedFrame: Sendable {
    /// A wire format's encoding of the command: `payload` as `FrameCodec.encode` gives it, `framed` the whole
    /// WebSocket frame of it that every receiver's socket writes (the payload again where there is no frame:
    /// in process, or nothing to send).
    typealias Encoded = (payload: Connection.Outbound, framed: Connection.Outbound)

    let command: Command
    private let encoded = Mutex<[WireFormat: Encoded]>([:])

    init(_ command: Command) { self.command = command }

    /// A wire format and its `Encoded`, remembered across the receivers of a fan-out (most share one format).
    typealias Memo = (format: WireFormat, encoded: Encoded)

    /// Delivers a message (`Connection.deliver`) to `connections`, except `skipped` and the sender's own
    /// connections; returns to how many. The frames go through `outbox` (the caller sends it), or through
    /// one of their own sent before this returns.
    func deliver(
        messageID: String, to connections: [Connection], sender: String?, except skipped: Connection? = nil, via outbox: Outbox? = nil
    ) -> Int {
        let out = outbox ?? Outbox()
        var delivered = 0
        var memo: Memo?
        for connection in connections where connection !== skipped {
            if connection.deliver(messageID: messageID, self, sender: sender, via: out, encoded: &memo) { delivered += 1 }
        }
        if outbox == nil { out.send() }
        return delivered
    }

    /// Delivers consecutive messages to the same connections connection by connection, each message as `deliver`
    /// does (not to its sender's connections): each connection gets them in order, and `after(connection, k)` runs
    /// right after message `k`'s turn on it. Returns the number of deliveries.
    static func deliver(
        _ messages: [(id: String, frame: SharedFrame, sender: String?)], to connections: [Connection], via outbox: Outbox,
        after: (Connection, Int) -> Void
    ) -> Int {
        var delivered = 0
        var memos = [Memo?](repeating: nil, count: messages.count)
        for connection in connections {
            for k in messages.indices {
                let (id, frame, sender) = messages[k]
                if connection.deliver(messageID: id, frame, sender: sender, via: outbox, encoded: &memos[k]) { delivered += 1 }
                after(connection, k)
            }
        }
        return delivered
    }

    func encoded(for format: WireFormat, using encode: (Command) -> Connection.Outbound) -> Encoded {
        if let frame = encoded.withLock({ $0[format] }) { return frame }
        let payload = encode(command)
        var framed = payload
        switch payload {
        case .text(let text) where !text.isEmpty: framed = .framed(ServerFrame.frame(text: text))
        case .binary(let buffer) where buffer.readableBytes > 0: framed = .framed(ServerFrame.frame(.binary, payload: buffer))
        default: break
        }
        encoded.withLock { $0[format] = (payload, framed) }
        return (payload, framed)
    }
}
