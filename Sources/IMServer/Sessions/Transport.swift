import IMCore
import NIOWebSocket
import Synchronization

/// One client transport — a WebSocket or an in-process attachment — and the sessions it carries.
///
/// A transport starts with one `Connection` that serves the first login. LeanCloud SDKs carry every
/// client of an app over one WebSocket: a `session open` for another client id opens a further session
/// (a `Connection` of its own, so tags, kicks, chat-room presence, interception and cursors stay per
/// session). Commands are routed by `peerId`; without one they go to the oldest open session.
///
/// Once a transport has carried two sessions, everything sent on it names its session in `peerId`. On the
/// LeanCloud subprotocols it always does: the SDKs route pushes by `peerId` and hand pushes without it to
/// the client they created first, which after a reconnect need not be the first to log in again.
final class Transport: Sendable {
    private struct State {
        var sessions: [Connection] = []
    }

    let remoteAddress: String
    /// The wire format frames are encoded in.
    let format: WireFormat
    /// Answers interception requests with a direct call instead of a `hook request` frame (in-process only).
    let review: HookAnswerer?
    /// Told when a message for this interceptor's review is probably on its way (in-process only; `InterceptorHub`).
    let headsUp: ReviewHeadsUp?
    /// LeanCloud protocol version 3 (`lc.*.3`): logins get unread notices instead of pushed offline
    /// messages; clients pull what they missed with `logs`.
    let notifiesUnreadOnly: Bool
    let encoder: @Sendable (Command) -> Connection.Outbound
    /// The WebSocket session's writer, for fan-out through an `Outbox` (nil in process).
    let writer: WebSocketSession.Writer?
    private let emit: @Sendable (Connection.Outbound) -> Void
    private let finish: @Sendable () -> Void
    /// Called once when more than `overflowBytes` are queued and not written.
    private let overflow: @Sendable () -> Void
    private let overflowBytes: Int
    private let queuedBytes = Atomic<Int>(0)
    private let overflowed = Atomic<Bool>(false)
    /// A task waiting in `drained(below:)` for the client to read, and the level it waits for.
    private let drainWaiter = Mutex<(limit: Int, continuation: CheckedContinuation<Void, Never>)?>(nil)
    /// Whether `drainWaiter` is set: `written` takes the lock only then.
    private let draining = Atomic<Bool>(false)
    private let allocateID: @Sendable () -> UInt64
    /// The id of the connection `openFirst` opens.
    let firstConnectionID: UInt64
    private let state = Mutex(State())
    /// Whether the transport has carried two sessions (read once per delivery: not under `state`'s lock).
    private let multiplexed = Atomic<Bool>(false)

    /// A transport that hands what it sends to `emit`; `finish` runs once, when its last session closes.
    init(
        remoteAddress: String, format: WireFormat, encoder: @escaping @Sendable (Command) -> Connection.Outbound,
        emit: @escaping @Sendable (Connection.Outbound) -> Void, finish: @escaping @Sendable () -> Void,
        review: HookAnswerer? = nil, headsUp: ReviewHeadsUp? = nil, notifiesUnreadOnly: Bool = false,
        overflowBytes: Int = .max, overflow: @escaping @Sendable () -> Void = {},
        writer: WebSocketSession.Writer? = nil, allocateID: @escaping @Sendable () -> UInt64
    ) {
        self.writer = writer
        self.overflowBytes = overflowBytes
        self.overflow = overflow
        self.remoteAddress = remoteAddress
        self.notifiesUnreadOnly = notifiesUnreadOnly
        self.format = format
        self.encoder = encoder
        self.emit = emit
        self.finish = finish
        self.review = review
        self.headsUp = headsUp
        self.allocateID = allocateID
        firstConnectionID = allocateID()
    }

    /// Queues a frame for the writer; with an outbox, a WebSocket's frame waits in it until `Outbox.send`.
    func write(_ frame: Connection.Outbound, via outbox: Outbox? = nil) {
        let size = Self.size(of: frame)
        let queued = queuedBytes.wrappingAdd(size, ordering: .relaxed).newValue
        if queued > overflowBytes, !overflowed.exchange(true, ordering: .relaxed) { overflow() }
        if let outbox, let writer {
            outbox.add(frame, for: writer)
        } else {
            emit(frame)
        }
    }

    /// Called by the writer once frames of `bytes` (by `size(of:)`) are written (or dropped); wakes a task
    /// waiting in `drained(below:)` once the queue is down to its level.
    func written(bytes: Int) {
        queuedBytes.wrappingSubtract(bytes, ordering: .sequentiallyConsistent)
        guard draining.load(ordering: .sequentiallyConsistent) else { return }
        let waiter = drainWaiter.withLock { waiter -> CheckedContinuation<Void, Never>? in
            guard let limit = waiter?.limit, queuedBytes.load(ordering: .sequentiallyConsistent) <= limit else { return nil }
            defer { waiter = nil }
            draining.store(false, ordering: .sequentiallyConsistent)
            return waiter?.continuation
        }
        waiter?.resume()
    }

    /// Returns once at most `limit` bytes are queued and not written (at once when that is so already):
    /// `written` resumes it, so a session waits for its client to read without polling. One waiter at a
    /// time (the session's drain task). A closed channel fails its pending writes, which counts them as
    /// written, so this returns for a client that went away too.
    func drained(below limit: Int) async {
        guard queuedBytes.load(ordering: .sequentiallyConsistent) > limit else { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = drainWaiter.withLock { waiter -> Bool in
                // The flag goes up before the count is read again, and `written` lowers the count before it
                // reads the flag: one of the two sees the other, so no wake-up is lost.
                draining.store(true, ordering: .sequentiallyConsistent)
                guard queuedBytes.load(ordering: .sequentiallyConsistent) > limit else {
                    draining.store(false, ordering: .sequentiallyConsistent)
                    return true
                }
                waiter = (limit, continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// Bytes queued and not yet written.
    var pendingBytes: Int { queuedBytes.load(ordering: .relaxed) }

    /// What a frame counts for in the queued bytes.
    static func size(of frame: Connection.Outbound) -> Int {
        switch frame {
        case .text(let text): text.utf8.count
        case .binary(let buffer), .framed(let buffer): buffer.readableBytes
        case .command, .close: 0
        }
    }

    /// Opens the transport's first connection (the one the first login uses).
    func openFirst() -> Connection {
        let connection = Connection(id: firstConnectionID, transport: self)
        state.withLock { $0.sessions = [connection] }
        return connection
    }

    /// Whether any session has logged in on this transport.
    var hasLoggedIn: Bool { state.withLock { $0.sessions.contains { $0.identity != nil } } }

    /// Every connection this transport carries that has not closed.
    var connections: [Connection] { state.withLock { $0.sessions } }

    /// Whether what is sent names its session in `peerId`.
    var namesSessions: Bool {
        format == .protobuf || format == .protobufBase64 || multiplexed.load(ordering: .acquiring)
    }

    /// The connection that handles `command`: for `session open`, the connection waiting for a login or a
    /// new one; otherwise the session named by `peerId`, or the oldest open one. Nil when `peerId` names a
    /// client id that has no session on this transport.
    func connection(for command: Command) -> Connection? {
        state.withLock { state in
            let waiting = state.sessions.first { $0.identity == nil && !$0.isClosed }
            if command.cmd == .session, command.op == .open {
                if let waiting { return waiting }
                if let peer = command.peerId, let open = state.sessions.first(where: { $0.clientID == peer }) {
                    return open
                }
                let connection = Connection(id: allocateID(), transport: self)
                state.sessions.append(connection)
                multiplexed.store(true, ordering: .releasing)
                return connection
            }
            let loggedIn = state.sessions.filter { $0.identity != nil }
            guard let peer = command.peerId, loggedIn.count > 0 else { return loggedIn.first ?? waiting }
            return loggedIn.first { $0.clientID == peer }
        }
    }

    /// Called by a closing connection; true when it was the last one, so the transport closes too.
    func release(_ connection: Connection) -> Bool {
        state.withLock { state in
            state.sessions.removeAll { $0 === connection }
            return state.sessions.isEmpty
        }
    }

    /// Ends the transport's writer (after its last session sent the close frame).
    func end() { finish() }

    /// Closes every session, and with the last one the transport.
    func close(code: WebSocketErrorCode) {
        for connection in connections { connection.close(code: code) }
    }
}
