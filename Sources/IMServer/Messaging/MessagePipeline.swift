import Foundation
import GRDB
import IMCore
import Logging
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
actor MessagePipeline {
    private enum Outcome: Sendable {
        /// Stored; `members` receive it, or, for a chat room (`room`), the connections in the room.
        case stored(MessageRecord, members: [String], room: Bool)
        case duplicate(MessageRecord)
        case failed(IMError)
    }

    private let db: DatabasePool
    private let registry: SessionRegistry
    private let receipts: ReceiptTracker
    private let rooms: ChatRooms
    private let logger: Logger
    private var queue: [OutgoingMessage] = []
    private var cursorMoves: [CursorKey: Set<String>] = [:]
    private var draining: Task<Void, Never>?
    private var batchesStarted = 0
    private var batchesFinished = 0
    private var flushWaiters: [(batch: Int, continuation: CheckedContinuation<Void, Never>)] = []
    /// The newest timestamp of recently active conversations (at most `timestampCacheLimit` of them).
    private var lastTimestamps: [String: Int64] = [:]
    private let timestampCacheLimit = 10_000
    private let counters: StorageCounters

    init(db: DatabasePool, registry: SessionRegistry, receipts: ReceiptTracker, rooms: ChatRooms,
         counters: StorageCounters, logger: Logger) {
        self.db = db
        self.counters = counters
        self.registry = registry
        self.receipts = receipts
        self.rooms = rooms
        self.logger = logger
    }

    func enqueue(_ message: OutgoingMessage) {
        queue.append(message)
        startDraining()
    }

    /// Records that `key`'s member acknowledged these messages; written with the next transaction.
    func advance(_ key: CursorKey, acknowledging messageIDs: [String]) {
        guard !messageIDs.isEmpty else { return }
        cursorMoves[key, default: []].formUnion(messageIDs)
        startDraining()
    }

    /// Returns once everything enqueued so far is written (later work does not hold it up).
    func flush() async {
        guard draining != nil else { return }
        let target = batchesStarted + (queue.isEmpty && cursorMoves.isEmpty ? 0 : 1)
        guard batchesFinished < target else { return }
        await withCheckedContinuation { flushWaiters.append((target, $0)) }
    }

    private func startDraining() {
        if draining == nil { draining = Task { await self.drain() } }
    }

    private func drain() async {
        while !queue.isEmpty || !cursorMoves.isEmpty {
            let batch = queue
            let moves = cursorMoves
            queue.removeAll(keepingCapacity: true)
            cursorMoves.removeAll()
            batchesStarted += 1
            let known = lastTimestamps
            let rooms = rooms
            do {
                let (outcomes, timestamps) = try await db.write { db in
                    let result = try Self.commit(db, batch, knownTimestamps: known, rooms: rooms, now: Identifiers.nowMillis())
                    try MessageStore.advanceCursors(db, moves)
                    return result
                }
                counters.committed(messages: batch.count)
                if lastTimestamps.count + timestamps.count > timestampCacheLimit { lastTimestamps.removeAll() }
                lastTimestamps.merge(timestamps) { _, new in new }
                for (message, outcome) in zip(batch, outcomes) { publish(message, outcome) }
            } catch {
                logger.error("message batch failed", metadata: [
                    "error": "\(error)", "count": "\(batch.count)", "cursor_moves": "\(moves.count)",
                ])
                for message in batch { publish(message, .failed(IMError(.internalError, "storage failure"))) }
            }
            batchesFinished += 1
            let finished = batchesFinished
            let ready = flushWaiters.filter { $0.batch <= finished }
            flushWaiters.removeAll { $0.batch <= finished }
            for waiter in ready { waiter.continuation.resume() }
        }
        draining = nil
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
            if let cached = conversations[message.cid] { conversation = cached }
            else {
                conversation = try ConversationStore.find(db, id: message.cid)
                conversations[message.cid] = conversation
            }
            guard let conversation else {
                outcomes.append(.failed(IMError(.invalidMessagingTarget, "conversation \(message.cid) does not exist")))
                continue
            }
            let members: [String]
            if let cached = memberLists[message.cid] { members = cached }
            else {
                members = conversation.transient
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
            if let t = timestamps[message.cid] ?? knownTimestamps[message.cid] { last = t }
            else { last = try MessageStore.lastTimestamp(db, cid: message.cid) }
            let t = max(now, last + 1)
            timestamps[message.cid] = t
            let record = MessageRecord(
                id: Identifiers.messageID(), cid: message.cid, from: message.from, data: message.data, t: t,
                receipt: message.receipt && !conversation.transient, priority: message.priority)
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
            let frame = SharedFrame(Self.directCommand(record, mentionPids: message.mentionPids, mentionAll: message.mentionAll))
            let recipients = room
                ? rooms.connections(in: record.cid)
                : members.flatMap { registry.connections(of: $0) }
            for connection in recipients where connection.clientID != record.from {
                connection.deliver(messageID: record.id, frame)
            }
            ack.uid = record.id
            ack.t = record.t
        case .duplicate(let record):
            ack.uid = record.id
            ack.t = record.t
        case .failed(let error):
            ack = IMService.errorReply(error, to: Command(cmd: .direct, i: message.serial))
        }
        message.sender.send(ack)
    }

    /// The `direct` command that delivers a stored message.
    static func directCommand(_ record: MessageRecord, offline: Bool = false, mentionPids: [String]? = nil,
                              mentionAll: Bool? = nil) -> Command {
        var command = Command(cmd: .direct)
        command.cid = record.cid
        command.id = record.id
        command.msg = record.data
        command.fromPeerId = record.from
        command.timestamp = record.t
        command.r = record.receipt ? true : nil
        command.priority = record.priority
        command.offline = offline ? true : nil
        command.mentionPids = mentionPids
        command.mentionAll = mentionAll
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
