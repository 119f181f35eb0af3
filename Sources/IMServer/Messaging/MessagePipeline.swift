import Foundation
import GRDB
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
    /// When an interceptor restricted the recipients: only these members receive it.
    var recipients: [String]? = nil
    /// When the server received it (`ServerMetrics.now()`), for the delivery latency.
    var received = ServerMetrics.now()
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
/// The pipeline writes on a thread of its own (a single-thread event loop): `enqueue` only appends and
/// wakes it, and it commits synchronously there, so a batch costs one thread wake-up instead of hops
/// between the cooperative pool and GRDB's queue, and no shared thread ever blocks on a commit.
final class MessagePipeline: Sendable {
    private enum Outcome: Sendable {
        /// Stored; `members` receive it, or, for a chat room (`room`), the connections in the room.
        case stored(MessageRecord, members: [String], room: Bool)
        case duplicate(MessageRecord)
        case failed(IMError)
    }

    private struct State {
        var queue: [OutgoingMessage] = []
        var cursorMoves: [CursorKey: CursorMove] = [:]
        /// A drain is queued on (or running on) the writer thread.
        var drainQueued = false
        /// A delayed drain for cursor moves alone is scheduled.
        var drainDelayed = false
        var batchesStarted = 0
        var batchesFinished = 0
        var flushWaiters: [(batch: Int, continuation: CheckedContinuation<Void, Never>)] = []
        /// The newest timestamp of recently active conversations (at most `timestampCacheLimit`).
        var lastTimestamps: [String: Int64] = [:]
    }

    private let db: DatabasePool
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

    init(
        db: DatabasePool, registry: SessionRegistry, receipts: ReceiptTracker, rooms: ChatRooms,
        counters: StorageCounters, metrics: ServerMetrics, logger: Logger
    ) {
        self.db = db
        self.counters = counters
        self.metrics = metrics
        self.registry = registry
        self.receipts = receipts
        self.rooms = rooms
        self.logger = logger
        writer = thread.next()
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
        if wake { writer.execute { self.drain() } }
    }

    /// How long cursor moves alone wait for a message batch to ride along with, before they get a
    /// transaction of their own.
    static let cursorDelay: TimeAmount = .milliseconds(5)

    /// Records that `key`'s member acknowledged these messages, or every stored message up to the
    /// timestamp `through` (a range ack); written with the next transaction.
    func advance(_ key: CursorKey, acknowledging messageIDs: [String], through: Int64? = nil) {
        guard !messageIDs.isEmpty || through != nil else { return }
        let schedule = state.withLock { state in
            state.cursorMoves[key, default: CursorMove()].add(messageIDs, through: through)
            guard !state.drainQueued, !state.drainDelayed else { return false }
            state.drainDelayed = true
            return true
        }
        if schedule {
            writer.scheduleTask(in: Self.cursorDelay) {
                // One step from "delayed" to "queued", so `flush` never sees moves pending and no drain.
                let run = self.state.withLock { state -> Bool in
                    state.drainDelayed = false
                    defer { state.drainQueued = true }
                    return !state.drainQueued
                }
                if run { self.drain() }
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

    /// Runs on the writer thread: commits batches until nothing is queued.
    private func drain() {
        while true {
            let next = state.withLock { state -> (batch: [OutgoingMessage], moves: [CursorKey: CursorMove], known: [String: Int64])? in
                if state.queue.isEmpty && state.cursorMoves.isEmpty {
                    state.drainQueued = false
                    return nil
                }
                defer {
                    state.queue.removeAll(keepingCapacity: true)
                    state.cursorMoves.removeAll()
                    state.batchesStarted += 1
                }
                return (state.queue, state.cursorMoves, state.lastTimestamps)
            }
            guard let (batch, moves, known) = next else { return }
            do {
                let started = ServerMetrics.now()
                let (outcomes, timestamps) = try db.write { db in
                    let result = try Self.commit(db, batch, knownTimestamps: known, rooms: rooms, now: Identifiers.nowMillis())
                    try MessageStore.advanceCursors(db, moves)
                    return result
                }
                counters.committed(messages: batch.count)
                ServerMetrics.record(metrics.commitLatency, since: started)
                metrics.commitBatchSize.record(batch.count)
                state.withLock { state in
                    if state.lastTimestamps.count + timestamps.count > timestampCacheLimit { state.lastTimestamps.removeAll() }
                    state.lastTimestamps.merge(timestamps) { _, new in new }
                }
                for (message, outcome) in zip(batch, outcomes) { publish(message, outcome) }
            } catch {
                logger.error(
                    "message batch failed",
                    metadata: [
                        "error": "\(error)", "count": "\(batch.count)", "cursor_moves": "\(moves.count)",
                    ])
                for message in batch { publish(message, .failed(IMError(.internalError, "storage failure"))) }
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
    }

    private static func commit(
        _ db: Database, _ batch: [OutgoingMessage], knownTimestamps: [String: Int64], rooms: ChatRooms, now: Int64
    ) throws -> ([Outcome], [String: Int64]) {
        var timestamps: [String: Int64] = [:]
        var conversations: [String: ConversationRecord?] = [:]
        var memberLists: [String: [String]] = [:]
        var outcomes: [Outcome] = []
        outcomes.reserveCapacity(batch.count)
        for message in batch {
            let conversation: ConversationRecord?
            if let cached = conversations[message.cid] {
                conversation = cached
            } else {
                conversation = try ConversationStore.find(db, id: message.cid)
                conversations[message.cid] = conversation
            }
            guard let conversation else {
                outcomes.append(.failed(IMError(.invalidMessagingTarget, "conversation \(message.cid) does not exist")))
                continue
            }
            let members: [String]
            if let cached = memberLists[message.cid] {
                members = cached
            } else {
                members =
                    conversation.transient
                    ? Array(rooms.clientIDs(in: message.cid))
                    : try ConversationStore.members(db, cid: message.cid)
                memberLists[message.cid] = members
            }
            guard members.contains(message.from) else {
                outcomes.append(.failed(IMError(.invalidMessagingTarget, "\(message.from) is not a member of \(message.cid)")))
                continue
            }
            if let token = message.dedupeToken, let existing = try MessageStore.find(db, from: message.from, dedupeToken: token) {
                outcomes.append(.duplicate(existing))
                continue
            }
            let last: Int64
            if let t = timestamps[message.cid] ?? knownTimestamps[message.cid] {
                last = t
            } else {
                last = try MessageStore.lastTimestamp(db, cid: message.cid)
            }
            let t = max(now, last + 1)
            timestamps[message.cid] = t
            let record = MessageRecord(
                id: Identifiers.messageID(), cid: message.cid, from: message.from, data: message.data, t: t,
                receipt: message.receipt && !conversation.transient, priority: message.priority,
                mentionPids: message.mentionPids, mentionAll: message.mentionAll == true)
            try MessageStore.insert(db, record, dedupeToken: message.dedupeToken, recipients: message.recipients)
            let audience = message.recipients.map { allowed in members.filter(allowed.contains) } ?? members
            outcomes.append(.stored(record, members: audience, room: conversation.transient && message.recipients == nil))
        }
        let touch = try db.cachedStatement(sql: "UPDATE conversations SET lm = ? WHERE id = ?")
        for (cid, t) in timestamps { try touch.execute(arguments: [t, cid]) }
        return (outcomes, timestamps)
    }

    private func publish(_ message: OutgoingMessage, _ outcome: Outcome) {
        var ack = Command(cmd: .ack, i: message.serial)
        switch outcome {
        case .stored(let record, let members, let room):
            if record.receipt { receipts.track(messageID: record.id, sender: record.from, cid: record.cid) }
            let frame = SharedFrame(Self.directCommand(record))
            let recipients =
                room
                ? rooms.connections(in: record.cid)
                : members.flatMap { registry.connections(of: $0) }
            var delivered = 0
            for connection in recipients where connection.clientID != record.from {
                connection.deliver(messageID: record.id, frame)
                delivered += 1
            }
            metrics.messagesStored.increment()
            metrics.messagesDelivered.increment(by: delivered)
            ServerMetrics.record(metrics.deliveryLatency, since: message.received)
            ack.uid = record.id
            ack.t = record.t
        case .duplicate(let record):
            ack.uid = record.id
            ack.t = record.t
        case .failed(let error):
            metrics.command(.direct, nil, code: error.code)
            ack = IMService.errorReply(error, to: Command(cmd: .direct, i: message.serial))
        }
        message.sender.send(ack)
    }

    /// The `direct` command that delivers a stored message.
    static func directCommand(_ record: MessageRecord, offline: Bool = false) -> Command {
        var command = Command(cmd: .direct)
        command.cid = record.cid
        command.id = record.id
        command.msg = record.data
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
}
