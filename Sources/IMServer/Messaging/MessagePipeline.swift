import Foundation
import IMCore
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// A message a client asked to send to a stored conversation.
struct OutgoingMessage: Sendable {
    var cid: String
    var from: String
    var data: String
    var receipt: Bool
    var priority: String?
    var dedupeToken: String?
    var mentionPids: [String]?
    var mentionAll: Bool?
    var sender: Connection
    var serial: Int?
    /// A binary message: `data` is its bytes as base64.
    var binary = false
    /// When an interceptor restricted the recipients: only these members receive it.
    var recipients: [String]? = nil
    /// When the server received it (`ServerMetrics.now()`), for the delivery latency.
    var received = ServerMetrics.now()
    /// LeanCloud's `pushData`: what offline receivers' notification says (docs/PUSH.md).
    var pushData: String? = nil
}

/// Stores messages with group commit and fans them out in commit order.
///
/// Every message enqueued while a transaction is being written waits for the next one, so many senders
/// share a single commit. Only after the transaction is durable does the pipeline deliver each message
/// to the online members and acknowledge it to its sender, in the order the messages were enqueued;
/// timestamps are strictly increasing within a conversation.
///
/// Delivery-cursor moves (from client acks) ride in the same transactions: they are coalesced per
/// member and written with the next batch, so acknowledging costs no commit of its own under load. A
/// cursor moves to the timestamp of the newest acknowledged *stored* message, read from the database, so
/// acks of transient or cmd messages (or forged timestamps) never skip stored messages.
///
/// With SQLite the pipeline writes on a thread of its own (a single-thread event loop): `enqueue` only
/// appends and wakes it, and it commits synchronously there, so a batch costs one thread wake-up instead
/// of hops between the cooperative pool and GRDB's queue. A message that finds the pipeline idle is committed
/// instead on the event loop that enqueued it, in a job queued behind that loop's current work, when the batch
/// it starts is still small by then (`commitInline`): a quiet server's message costs no thread wake-up to commit.
/// With PostgreSQL (an asynchronous driver) the same loop runs as a task that suspends on each commit.
///
/// Without `fansOutLocally` (a cluster), stored messages are not fanned out here: every node, this one
/// included, delivers them when the database announces their commit, so all nodes deliver in commit order.
final class MessagePipeline: Sendable {
    private struct State {
        var queue: [OutgoingMessage] = []
        var cursorMoves: [CursorKey: CursorMove] = [:]
        /// A drain is queued on (or running on) the writer thread.
        var drainQueued = false
        /// A delayed drain for cursor moves alone is scheduled.
        var drainDelayed = false
        /// When the oldest of `cursorMoves` was recorded (nil when none is pending).
        var movesSince: NIODeadline?

        /// When the pending cursor moves may have a transaction of their own, if they are all there is to write and
        /// that is still to come (the oldest has not waited `delay`); nil when they can be written now.
        func movesWaiting(_ delay: TimeAmount) -> NIODeadline? {
            guard queue.isEmpty, let since = movesSince, since + delay > .now() else { return nil }
            return since + delay
        }
        var batchesStarted = 0
        var batchesFinished = 0
        var flushWaiters: [(batch: Int, continuation: CheckedContinuation<Void, Never>)] = []
        /// The newest timestamp of recently active conversations (at most `timestampCacheLimit`).
        var lastTimestamps: [String: Int64] = [:]
    }

    private let writeBatch: BatchWriter
    /// The client ids in a chat room here (a batch's membership check for chat rooms).
    private let roomMembers: @Sendable (String) -> [String]
    /// Set in a cluster: stored messages reach connections through the cluster's announcements.
    private let fansOutLocally: Bool
    private let registry: SessionRegistry
    private let receipts: ReceiptTracker
    private let rooms: ChatRooms
    private let logger: Logger
    private let counters: StorageCounters
    private let metrics: ServerMetrics
    private let state = Mutex(State())
    private let thread = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    private let writer: any EventLoop
    private let timestampCacheLimit = 10_000
    /// Offline push: told of every stored message.
    private let pushes: PushDispatcher?

    init(
        store: any ServerStore, registry: SessionRegistry, receipts: ReceiptTracker, rooms: ChatRooms,
        counters: StorageCounters, metrics: ServerMetrics, logger: Logger, fansOutLocally: Bool = true,
        pushes: PushDispatcher? = nil, inlineLimit: Int = 1, inlineBudget: Duration = .microseconds(500)
    ) {
        self.pushes = pushes
        self.inlineLimit = inlineLimit
        inlineBudgetNanos = UInt64(max(0, min(inlineBudget / .nanoseconds(1), 1e18)))
        writeBatch = store.batchWriter
        roomMembers = { [rooms] cid in Array(rooms.clientIDs(in: cid)) }
        self.fansOutLocally = fansOutLocally
        cursorDelay = fansOutLocally ? .milliseconds(5) : .milliseconds(25)
        self.counters = counters
        self.metrics = metrics
        self.registry = registry
        self.receipts = receipts
        self.rooms = rooms
        self.logger = logger
        writer = thread.next()
        // SQLite commits on this thread: its CPU clock is the pipeline's cost (`StorageCounters.writerCPUSeconds`).
        if case .blocking = writeBatch { writer.execute { [counters] in counters.noteWriterThread() } }
    }

    deinit {
        thread.shutdownGracefully { _ in }
    }

    func enqueue(_ message: OutgoingMessage) {
        let wake = state.withLock { state in
            state.queue.append(message)
            defer { state.drainQueued = true }
            return !state.drainQueued
        }
        guard wake else { return }
        if case .blocking(let store) = writeBatch, inlineLimit > 0, commitNanos.load(ordering: .relaxed) <= inlineBudgetNanos,
            let loop = MultiThreadedEventLoopGroup.currentEventLoop
        {
            loop.execute { self.commitInline(store) }
        } else {
            startDrain()
        }
    }

    /// The most messages an idle pipeline commits on the event loop that enqueued the first (`commitInline`); 0: none.
    private let inlineLimit: Int
    /// How long a one-message commit may take, on average, for commits to be made inline: an event loop does nothing
    /// else meanwhile, and on a slow disk (an `fsync` of milliseconds at `synchronous = FULL`) the writer thread is
    /// better at waiting.
    private let inlineBudgetNanos: UInt64
    /// The recent one-message commits' duration (a moving average, a new one weighing an eighth), inline or not.
    private let commitNanos = Atomic<UInt64>(0)

    /// Commits `batch` (`inline`: on an event loop) and finishes it; a one-message commit's time goes into `commitNanos`.
    private func commit(_ batch: MessageBatch, to store: BlockingBatchWriter, inline: Bool) {
        let started = ServerMetrics.now()
        let result = Result { try store.write(batch, inline) }
        if batch.messages.count == 1 {
            let took = ServerMetrics.now() &- started
            let average = commitNanos.load(ordering: .relaxed)
            commitNanos.store(average - average / 8 + took / 8, ordering: .relaxed)
        }
        finish(batch, result, started: started)
    }

    /// Commits the batch the caller started, on the caller's thread (an event loop: the WebSocket's that read the
    /// message, or the in-process bot's Lua thread that applied its verdict or sent its reply), then hands whatever was
    /// queued meanwhile to the writer thread. It runs as a job behind the loop's current work, so messages that work
    /// enqueues join the batch; a batch grown past `inlineLimit` by then goes to the writer thread instead (without
    /// that, the bot's thread, which applies every verdict, committed each message alone under load: group commit lost,
    /// `hookbot bench` w1b fell from about 11,000 to 3,000 replies/s). With the writer idle, a message's way to its ack and
    /// deliveries costs no thread wake-up (on this machine a sleeping thread takes 30–50 µs to wake, and a bot's
    /// round trip had seven of them: issue 30, round 10); under load the writer is busy, messages queue behind its
    /// transaction and commit in its groups as before. Only one drain runs at a time (`drainQueued`), so commits stay
    /// in order and the database has one writer. Slow upkeep the commit would do (SQLite's WAL checkpoint, with its
    /// `fsync`s) is left to the writer thread, which runs it before anything else is committed (`WALCheckpointer`).
    private func commitInline(_ store: BlockingBatchWriter) {
        guard state.withLock({ $0.queue.count <= inlineLimit }) else { return writer.execute { self.drain(store) } }
        let cpu = ThreadCPUClock.now()
        if let batch = nextBatch() { commit(batch, to: store, inline: true) }
        counters.committedInline(cpuSince: cpu)
        // With upkeep due, the drain stays queued: messages arriving meanwhile wait for the writer thread.
        if store.upkeepDue() || drainGoesOn() { writer.execute { self.drain(store) } }
    }

    /// Runs `drain` where the store commits: on the writer thread, or as a task.
    private func startDrain() {
        switch writeBatch {
        case .blocking(let store): writer.execute { self.drain(store) }
        case .suspending(let write): Task { await self.drain(write) }
        }
    }

    /// How long cursor moves alone wait for a message batch to ride along with, before they get a
    /// transaction of their own: 5 ms on SQLite; 25 ms on a shared database, where a transaction costs
    /// round trips and the nodes that only deliver (their clients' acks) would otherwise commit 200 times a
    /// second under load. A cursor moved late only means a message may be redelivered after a crash.
    let cursorDelay: TimeAmount

    /// Records that `key`'s member acknowledged these messages, or every stored message up to the
    /// timestamp `through` (a range ack); written with the next transaction.
    func advance(_ key: CursorKey, acknowledging messageIDs: [String], through: Int64? = nil) {
        guard !messageIDs.isEmpty || through != nil else { return }
        let schedule = state.withLock { state -> NIODeadline? in
            if state.cursorMoves.isEmpty { state.movesSince = .now() }
            state.cursorMoves[key, default: CursorMove()].add(messageIDs, through: through)
            guard !state.drainQueued, !state.drainDelayed else { return nil }
            state.drainDelayed = true
            return .now() + cursorDelay
        }
        if let schedule { scheduleDelayedDrain(at: schedule) }
    }

    /// The drain for cursor moves alone, once the oldest pending move has waited `cursorDelay`. A message batch
    /// that came first took the moves along; moves recorded after it get their own full wait (the timer is set
    /// again for them) instead of a transaction of their own as soon as the timer set for earlier ones fires.
    private func scheduleDelayedDrain(at deadline: NIODeadline) {
        writer.scheduleTask(deadline: deadline) {
            // One step from "delayed" to "queued" (or "delayed" again), so `flush` never sees moves pending and
            // no drain.
            enum Next {
                case drain
                case wait(NIODeadline)
                case nothing
            }
            let next = self.state.withLock { state -> Next in
                state.drainDelayed = false
                if state.drainQueued { return .nothing }
                if let later = state.movesWaiting(self.cursorDelay) {
                    state.drainDelayed = true
                    return .wait(later)
                }
                state.drainQueued = true
                return .drain
            }
            switch next {
            case .drain: self.startDrain()
            case .wait(let later): self.scheduleDelayedDrain(at: later)
            case .nothing: break
            }
        }
    }

    /// Returns once everything enqueued so far is written (later work does not hold it up).
    func flush() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                guard state.drainQueued || state.drainDelayed else { return true }
                let target = state.batchesStarted + (state.queue.isEmpty && state.cursorMoves.isEmpty ? 0 : 1)
                guard state.batchesFinished < target else { return true }
                state.flushWaiters.append((target, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// Runs on the writer thread: the upkeep an inline commit left, then batches until nothing is queued.
    private func drain(_ store: BlockingBatchWriter) {
        store.upkeep()
        while let batch = nextBatch() { commit(batch, to: store, inline: false) }
    }

    /// The same loop, suspending on each commit.
    private func drain(_ write: @Sendable (MessageBatch) async throws -> BatchResult) async {
        while let batch = nextBatch() {
            let started = ServerMetrics.now()
            let result: Result<BatchResult, any Error>
            do { result = .success(try await write(batch)) } catch { result = .failure(error) }
            finish(batch, result, started: started)
        }
    }

    /// Takes everything queued as the next batch, or ends the drain when nothing is. Cursor moves alone that have
    /// not waited `cursorDelay` end it too, with the delayed drain set for them: acks recorded while a batch
    /// committed (a receiver's ack of the message just delivered) wait for the next message to ride along with,
    /// as acks recorded while the writer idles do, instead of a transaction of their own right after the batch.
    private func nextBatch() -> MessageBatch? {
        var delayUntil: NIODeadline?
        defer { if let delayUntil { scheduleDelayedDrain(at: delayUntil) } }
        return state.withLock { state -> MessageBatch? in
            guard goesOn(&state, delayUntil: &delayUntil) else { return nil }
            defer {
                state.queue.removeAll(keepingCapacity: true)
                state.cursorMoves.removeAll()
                state.movesSince = nil
                state.batchesStarted += 1
            }
            // Only the batch's conversations' timestamps: handing over the whole cache (up to 10,000 entries) made
            // `finish`'s merge copy it while the batch still held it, once per batch.
            var known: [String: Int64] = [:]
            for message in state.queue where known[message.cid] == nil {
                if let t = state.lastTimestamps[message.cid] { known[message.cid] = t }
            }
            return MessageBatch(
                messages: state.queue, moves: state.cursorMoves, knownTimestamps: known, now: Identifiers.nowMillis(),
                roomMembers: roomMembers)
        }
    }

    /// Whether the drain has more to write now (it stays queued) or ends (`nextBatch` without taking a batch).
    private func drainGoesOn() -> Bool {
        var delayUntil: NIODeadline?
        defer { if let delayUntil { scheduleDelayedDrain(at: delayUntil) } }
        return state.withLock { goesOn(&$0, delayUntil: &delayUntil) }
    }

    /// Under the lock: whether there is something to write now. If not, the drain ends, and cursor moves that still
    /// wait for a message batch get the delayed drain (`delayUntil`, set by the caller once the lock is released).
    private func goesOn(_ state: inout State, delayUntil: inout NIODeadline?) -> Bool {
        if state.queue.isEmpty && state.cursorMoves.isEmpty {
            state.drainQueued = false
            return false
        }
        if let later = state.movesWaiting(cursorDelay) {
            state.drainQueued = false
            if !state.drainDelayed {
                state.drainDelayed = true
                delayUntil = later
            }
            return false
        }
        return true
    }

    /// Acknowledges (and, on one node, delivers) a committed batch, or fails its messages; wakes flushes.
    private func finish(_ batch: MessageBatch, _ result: Result<BatchResult, any Error>, started: UInt64) {
        switch result {
        case .success(let result):
            counters.committed(messages: batch.messages.count)
            ServerMetrics.record(metrics.commitLatency, since: started)
            metrics.commitBatchSize.record(batch.messages.count)
            state.withLock { state in
                if state.lastTimestamps.count + result.timestamps.count > timestampCacheLimit { state.lastTimestamps.removeAll() }
                state.lastTimestamps.merge(result.timestamps) { _, new in new }
            }
            // The batch's deliveries and acks leave together: one event-loop task per loop, one flush per socket.
            let outbox = Outbox()
            publish(batch.messages, result.outcomes, via: outbox)
            outbox.send()
        case .failure(let error):
            logger.error(
                "message batch failed",
                metadata: ["error": "\(error)", "count": "\(batch.messages.count)", "cursor_moves": "\(batch.moves.count)"])
            // Through an outbox, as a committed batch's acks: on an event loop (a batch committed inline) a frame written
            // directly could overtake the writer thread's frames that the loop has not written yet.
            let outbox = Outbox()
            for message in batch.messages { publish(message, .failed(IMError(.internalError, "storage failure")), via: outbox) }
            outbox.send()
        }
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.batchesFinished += 1
            let finished = state.batchesFinished
            let ready = state.flushWaiters.filter { $0.batch <= finished }.map(\.continuation)
            state.flushWaiters.removeAll { $0.batch <= finished }
            return ready
        }
        for waiter in ready { waiter.resume() }
    }

    /// Publishes a committed batch's messages in order; consecutive messages stored to one chat room as a run
    /// (`publishRoomRun`).
    private func publish(_ messages: [OutgoingMessage], _ outcomes: [BatchOutcome], via outbox: Outbox) {
        var start = 0
        while start < messages.count {
            var end = start + 1
            if fansOutLocally, case .stored(let first, _, true) = outcomes[start] {
                while end < messages.count, case .stored(let next, _, true) = outcomes[end], next.cid == first.cid { end += 1 }
            }
            if end - start > 1 {
                publishRoomRun(messages[start..<end], outcomes[start..<end], via: outbox)
            } else {
                publish(messages[start], outcomes[start], via: outbox)
            }
            start = end
        }
    }

    /// Publishes consecutive messages stored to one chat room (`publish` for each, in effect): each occupant
    /// gets the run's messages one after the other, and a sender's connection its ack right after its message's
    /// turn, the order `publish` one message at a time gives each connection. A big room's connections,
    /// transports and writers are touched once per run instead of once per message (with thousands of members
    /// they do not stay in the caches from one message to the next).
    private func publishRoomRun(_ messages: ArraySlice<OutgoingMessage>, _ outcomes: ArraySlice<BatchOutcome>, via outbox: Outbox) {
        var run: [(id: String, frame: SharedFrame, sender: String?)] = []
        var acks: [(to: Connection, ack: Command)] = []
        var cid = ""
        for (message, outcome) in zip(messages, outcomes) {
            guard case .stored(let record, _, _) = outcome else { continue }
            metrics.messagesStored.increment()
            if record.receipt { receipts.track(messageID: record.id, sender: record.from, cid: record.cid) }
            run.append((record.id, SharedFrame(Self.directCommand(record)), record.from))
            var ack = Command(cmd: .ack, i: message.serial)
            ack.uid = record.id
            ack.t = record.t
            acks.append((message.sender, ack))
            cid = record.cid
        }
        var acked = [Bool](repeating: false, count: acks.count)
        let delivered = SharedFrame.deliver(run, to: rooms.connections(in: cid), via: outbox) { connection, k in
            guard connection === acks[k].to else { return }
            connection.send(acks[k].ack, via: outbox)
            acked[k] = true
        }
        metrics.messagesDelivered.increment(by: delivered)
        for (message, outcome) in zip(messages, outcomes) {
            guard case .stored(let record, let members, let room) = outcome else { continue }
            ServerMetrics.record(metrics.deliveryLatency, since: message.received)
            pushes?.messageStored(record, members: members, room: room, pushData: message.pushData)
        }
        for (k, ack) in acks.enumerated() where !acked[k] { ack.to.send(ack.ack, via: outbox) }
    }

    private func publish(_ message: OutgoingMessage, _ outcome: BatchOutcome, via outbox: Outbox? = nil) {
        var ack = Command(cmd: .ack, i: message.serial)
        switch outcome {
        case .stored(let record, let members, let room):
            metrics.messagesStored.increment()
            if fansOutLocally {
                deliver(record, members: members, room: room, via: outbox)
                ServerMetrics.record(metrics.deliveryLatency, since: message.received)
            }
            pushes?.messageStored(record, members: members, room: room, pushData: message.pushData)
            ack.uid = record.id
            ack.t = record.t
        case .duplicate(let record):
            ack.uid = record.id
            ack.t = record.t
        case .failed(let error):
            metrics.command(.direct, nil, code: error.code)
            ack = IMService.errorReply(error, to: Command(cmd: .direct, i: message.serial))
        }
        message.sender.send(ack, via: outbox)
    }

    /// Delivers a stored message to this node's connections of its members (or, for a chat room, of the
    /// room), the sender's own excepted.
    func deliver(_ record: MessageRecord, members: [String], room: Bool, via outbox: Outbox? = nil) {
        if record.receipt { receipts.track(messageID: record.id, sender: record.from, cid: record.cid) }
        let recipients = room ? rooms.connections(in: record.cid) : members.flatMap { registry.connections(of: $0) }
        let delivered = SharedFrame(Self.directCommand(record)).deliver(
            messageID: record.id, to: recipients, sender: record.from, via: outbox)
        metrics.messagesDelivered.increment(by: delivered)
    }

    /// The `direct` command that delivers a stored message.
    static func directCommand(_ record: MessageRecord, offline: Bool = false) -> Command {
        var command = Command(cmd: .direct)
        command.cid = record.cid
        command.id = record.id
        if record.binary { command.binaryMsg = record.data } else { command.msg = record.data }
        command.patchTimestamp = record.patchT
        command.fromPeerId = record.from
        command.timestamp = record.t
        command.r = record.receipt ? true : nil
        command.priority = record.priority
        command.offline = offline ? true : nil
        command.mentionPids = record.mentionPids
        command.mentionAll = record.mentionAll ? true : nil
        return command
    }
}

/// Counts the server's storage transactions, so benchmarks can show how well group commit batches.
public final class StorageCounters: Sendable {
    private let state = Mutex((transactions: 0, messages: 0))

    init() {}

    func committed(messages: Int) {
        state.withLock { state in
            state.transactions += 1
            state.messages += messages
        }
    }

    /// Transactions the message pipeline committed, and the messages they stored.
    public var snapshot: (transactions: Int, messages: Int) { state.withLock { $0 } }

    /// The CPU clock of the pipeline's writer thread (SQLite), read from any thread.
    private let writerClock = Mutex<clockid_t?>(nil)

    /// Called on the writer thread once.
    func noteWriterThread() {
        var clock = clockid_t()
        if pthread_getcpuclockid(pthread_self(), &clock) == 0 { writerClock.withLock { $0 = clock } }
    }

    /// CPU nanoseconds of batches committed inline, on the event loop that enqueued them.
    private let inlineNanos = Atomic<UInt64>(0)

    private let inlineCount = Atomic<Int>(0)

    /// Counts a batch committed inline and adds the calling thread's CPU time since `start` (`ThreadCPUClock.now()`) to
    /// the pipeline's.
    func committedInline(cpuSince start: UInt64) {
        inlineNanos.add(ThreadCPUClock.now() &- start, ordering: .relaxed)
        inlineCount.add(1, ordering: .relaxed)
    }

    /// Of `snapshot`'s transactions, those committed on an event loop instead of the writer thread.
    public var inlineTransactions: Int { inlineCount.load(ordering: .relaxed) }

    /// CPU seconds used so far by the pipeline's commits: with SQLite, the writer thread's (it takes each batch, commits
    /// it and hands its deliveries and acks to the event loops) and that of the batches committed inline on an event loop.
    /// Nil with PostgreSQL (batches commit on Swift's pool).
    public var writerCPUSeconds: Double? {
        guard let clock = writerClock.withLock({ $0 }) else { return nil }
        var time = timespec()
        guard clock_gettime(clock, &time) == 0 else { return nil }
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9 + Double(inlineNanos.load(ordering: .relaxed)) / 1e9
    }
}
