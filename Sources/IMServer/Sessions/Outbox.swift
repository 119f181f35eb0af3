import NIOCore
import Synchronization

/// Frames for many WebSocket sessions, collected while a fan-out (or a committed batch) is sent, then
/// written with one event-loop task per event loop and one flush per session, instead of a task and a
/// flush (a `writev`) per frame. Frames keep their order per session. Not `Sendable`: one thread fills it
/// and calls `send`.
///
/// Written here because NIO batches writes only within a channel; across channels of a loop the caller
/// has to group them.
final class Outbox {
    /// One event loop's frames.
    private struct Loop {
        let loop: any EventLoop
        /// Whether `send` runs off this loop (then the loop writes copies of shared frames: see `add`).
        let remote: Bool
        var items: [(WebSocketSession.Writer, Connection.Outbound)] = []
        /// The shared frames queued for this loop and the loop's copy of each. The originals are kept (not only
        /// their addresses): freed, their memory could hold a later message's frame at the same address.
        var shared: [(original: ByteBuffer, copy: ByteBuffer)] = []
        /// The index in `shared` of the last frame queued: a fan-out queues one message's frame for many
        /// receivers (the same entry again), a chat room's run a receiver's messages one after the other (the next).
        var lastShared = 0
    }

    private var loops: [Loop] = []
    /// The index in `loops` of the last frame's loop: a fan-out's receivers come in runs of a loop or two.
    private var last = 0

    /// Queues `frame` for `writer`'s session (the transport counted it already).
    func add(_ frame: Connection.Outbound, for writer: WebSocketSession.Writer) {
        let loop = writer.eventLoop
        let index: Int
        if last < loops.count, loops[last].loop === loop {
            index = last
        } else if let found = loops.firstIndex(where: { $0.loop === loop }) {
            index = found
        } else {
            index = loops.count
            loops.append(Loop(loop: loop, remote: !loop.inEventLoop))
        }
        last = index
        guard loops[index].remote, case .framed(let buffer) = frame else {
            return loops[index].items.append((writer, frame))
        }
        // Each event loop writes a copy of its own of a shared frame buffer (one per run of items that share it:
        // a message's frame for its receivers). Every socket write retains and releases its buffer; with one
        // buffer for all receivers, the event loops and the thread that queued the frames take turns at its
        // reference count's cache line.
        if let k = Self.index(of: buffer, in: loops[index].shared, near: loops[index].lastShared) {
            loops[index].lastShared = k
            return loops[index].items.append((writer, .framed(loops[index].shared[k].copy)))
        }
        var copy = writer.channel.allocator.buffer(capacity: buffer.readableBytes)
        copy.writeImmutableBuffer(buffer)
        loops[index].lastShared = loops[index].shared.count
        loops[index].shared.append((buffer, copy))
        loops[index].items.append((writer, .framed(copy)))
    }

    /// Where `buffer` is among `shared`'s originals: looked for at `last`, then after it, then everywhere.
    private static func index(of buffer: ByteBuffer, in shared: [(original: ByteBuffer, copy: ByteBuffer)], near last: Int) -> Int? {
        let address = address(of: buffer)
        if last < shared.count, Self.address(of: shared[last].original) == address { return last }
        if last + 1 < shared.count, Self.address(of: shared[last + 1].original) == address { return last + 1 }
        return shared.firstIndex { Self.address(of: $0.original) == address }
    }

    private static func address(of buffer: ByteBuffer) -> UnsafeRawPointer? {
        buffer.withUnsafeReadableBytes { UnsafeRawPointer($0.baseAddress) }
    }

    /// Hands every queued frame to its event loop; the outbox is empty again.
    func send() {
        let loops = loops
        self.loops = []
        last = 0
        for entry in loops {
            let items = entry.items
            if entry.loop.inEventLoop, let first = items.first {
                first.0.writes.writeInLoop(items)
            } else if let first = items.first {
                first.0.writes.submit(items)
            }
        }
    }
}

/// The frames other threads hand to one event loop, written by one task of that loop: frames handed over while
/// the task waits to run join it. When the loop is behind (a big room's committed batches come faster than its
/// sockets take them), the next batches' frames go out with the waiting ones, several messages per socket write,
/// instead of a task, a pass over the sockets and a system call per socket for each batch. Every frame sent to
/// a WebSocket from another thread goes through here, so a session's frames keep the order they were handed over in.
final class LoopWrites: Sendable {
    private typealias Items = [(WebSocketSession.Writer, Connection.Outbound)]

    let loop: any EventLoop
    private let pending = Mutex<(items: Items, scheduled: Bool)>(([], false))
    /// One per event loop, kept for the process's life (a server has a few loops; each entry holds its loop, so
    /// no other loop can take its identifier).
    private static let all = Mutex<[ObjectIdentifier: LoopWrites]>([:])

    private init(_ loop: any EventLoop) { self.loop = loop }

    /// The queue of `loop`.
    static func of(_ loop: any EventLoop) -> LoopWrites {
        all.withLock { all in
            if let writes = all[ObjectIdentifier(loop)] { return writes }
            let writes = LoopWrites(loop)
            all[ObjectIdentifier(loop)] = writes
            return writes
        }
    }

    /// Queues frames of this loop's sessions (from another thread); a task of the loop writes them.
    func submit(_ items: [(WebSocketSession.Writer, Connection.Outbound)]) {
        let schedule = pending.withLock { pending in
            if pending.items.isEmpty { pending.items = items } else { pending.items.append(contentsOf: items) }
            defer { pending.scheduled = true }
            return !pending.scheduled
        }
        if schedule { loop.execute { self.run() } }
    }

    /// Writes frames of this loop's sessions, on the loop: now, unless frames handed over from other threads wait for
    /// the loop's task, which then writes these after them (a batch committed inline on this loop must not overtake the
    /// writer thread's batch before it).
    func writeInLoop(_ items: [(WebSocketSession.Writer, Connection.Outbound)]) {
        let queued = pending.withLock { pending in
            guard pending.scheduled else { return false }
            pending.items.append(contentsOf: items)
            return true
        }
        if !queued { WebSocketSession.Writer.write(items) }
    }

    private func run() {
        let items = pending.withLock { pending in
            pending.scheduled = false
            defer { pending.items = [] }
            return pending.items
        }
        WebSocketSession.Writer.write(items)
    }
}
