import Foundation
import IMCore
import Synchronization

/// What LeanCloud's SDKs ask for besides the core commands: closed and typed history ranges, every
/// member's receipt marks, recalls by the owner and managers, the patches a reconnecting client missed,
/// and will messages.
extension IMService {
    // MARK: History ranges and types

    /// `limit` messages in `range` visible to `viewer`, ascending; with `type`, only those whose `_lctype`
    /// is `type` (read in pages from the range until the page is full or the range is exhausted, so its
    /// cost is the number of messages read, not returned).
    func history(cid: String, limit: Int, range: HistoryRange, type: Int?, viewer: String, forwards: Bool) async throws
        -> [MessageRecord]
    {
        guard let type else {
            return try await store.history(
                cid: cid, limit: limit, beforeT: range.before, afterT: range.after, viewer: viewer, oldestFirst: forwards)
        }
        let chunk = max(limit, 200)
        var before = range.before
        var after = range.after
        var found: [MessageRecord] = []
        while found.count < limit {
            let page = try await store.history(
                cid: cid, limit: chunk, beforeT: before, afterT: after, viewer: viewer, oldestFirst: forwards)
            let matching = page.filter { Self.lctype(of: $0) == type }
            if forwards {
                found += matching
                after = page.last?.t
            } else {
                found = matching + found
                before = page.first?.t
            }
            if page.count < chunk { break }
        }
        return forwards ? Array(found.prefix(limit)) : Array(found.suffix(limit))
    }

    /// A stored message's `_lctype`; nil for binary and untyped messages.
    static func lctype(of record: MessageRecord) -> Int? {
        record.binary ? nil : TypedMessage.decode(record.data)?.type
    }

    // MARK: Receipts of every member

    /// `conv max-read` with `queryAllMembers`: each other member's delivery cursor and read mark, as the
    /// JS SDK's group receipts (`_fetchAllReceiptTimestamps`) read them from `maxReadTuples`.
    func memberReceiptTimestamps(_ command: Command, for clientID: String, on connection: Connection) async throws {
        let cid = try requiredCID(command)
        var reply = Command(cmd: .conv, op: .maxRead, i: command.i)
        reply.cid = cid
        reply.maxReadTuples = try await store.memberReceiptTimestamps(cid: cid, clientID: clientID)
        connection.send(reply)
    }

    // MARK: Recall by the owner and managers

    /// Whose recall `clientID`'s `patch modify` is: its own, or, for another member's message, the sender's
    /// when `clientID` is the conversation's owner or a manager above the sender (the role table). Anything
    /// else is left to the store's checks (4404, 4403).
    func recallingAs(_ patch: PatchItem, by clientID: String) async throws -> String {
        guard let message = try await store.message(patch.mid), message.cid == patch.cid, message.from != clientID else {
            return clientID
        }
        let record = try StoreRules.existing(await store.conversation(patch.cid), patch.cid)
        let controls = try await memberControls(patch.cid)
        let role = actingRole(clientID, in: record, controls)
        guard role >= .manager else {
            throw IMError(.messageOwnershipRequired, "only the sender, the owner or a manager of \(patch.cid) may recall a message")
        }
        if !interceptors.isInterceptor(clientID), try await !store.isMember(clientID, of: patch.cid) {
            throw IMError(.messageOwnershipRequired, "\(clientID) is not a member of \(patch.cid)")
        }
        try StoreRules.authorizeModeration(
            "recall the messages of", cid: patch.cid, actor: clientID, actorRole: role,
            targets: [(message.from, controls.role(of: message.from, in: record))])
        return message.from
    }

    // MARK: Patches missed while offline

    /// At most this many missed recalls and edits are pushed at login; older ones show in history.
    static let missedPatchLimit = 200

    /// After `session opened` with `lastPatchTime`: the recalls and edits made since then in the client's
    /// conversations, as `patch modify` pushes (LeanCloud's SDKs raise MESSAGE_RECALL / MESSAGE_UPDATE only
    /// from these), oldest first, in frames of at most `maxLogsReplyBytes` of content.
    func pushMissedPatches(to connection: Connection, clientID: String, after lastPatchTime: Int64) async {
        let records: [MessageRecord]
        do {
            records = try await store.patchedMessages(clientID: clientID, after: lastPatchTime, limit: Self.missedPatchLimit)
        } catch {
            logger.error("missed patches failed", metadata: ["client": "\(clientID)", "error": "\(error)"])
            return
        }
        var items: [PatchItem] = []
        var bytes = 0
        func flush() {
            guard !items.isEmpty else { return }
            var push = Command(cmd: .patch, op: .modify)
            push.patches = items
            connection.send(push)
            items = []
            bytes = 0
        }
        for record in records {
            var item = Self.patchItem(record)
            if record.recalled { item.recall = true }
            if bytes + record.data.utf8.count > Self.maxLogsReplyBytes { flush() }
            items.append(item)
            bytes += record.data.utf8.count + 64
        }
        flush()
    }

    // MARK: Will messages

    /// `direct` with `will: true`: held for the session, not delivered now. The server sends it as the
    /// client's message when the client's connection drops without `session close`; a clean close (or a
    /// kick by another login with the same tag) discards it. One per session: a later will replaces it.
    func holdWill(_ command: Command, from clientID: String, on connection: Connection) async throws {
        let cid = try requiredCID(command)
        if command.transient == true || command.action != nil {
            throw IMError(.invalidField, "a will message cannot be transient nor a cmd message")
        }
        let (body, binary) = try MessageContent.read(text: command.msg, binary: command.binaryMsg, limit: configuration.maxMessageBytes)
        if let priority = command.priority, !["high", "normal", "low"].contains(priority) {
            throw IMError(.invalidField, "priority must be high, normal or low")
        }
        let conversation = try StoreRules.existing(await store.conversation(cid), cid)
        if conversation.transient {
            throw IMError(.invalidField, "a will message needs a conversation with members, not a chat room")
        }
        guard try await store.isMember(clientID, of: cid) else {
            throw IMError(.invalidMessagingTarget, "\(clientID) is not a member of \(cid)")
        }
        var message = OutgoingMessage(
            cid: cid, from: clientID, data: body, receipt: command.r == true, priority: command.priority, dedupeToken: nil,
            mentionPids: command.mentionPids, mentionAll: command.mentionAll, sender: connection, serial: nil)
        message.binary = binary
        wills.hold(message, for: connection.id)
        var ack = Command(cmd: .ack, i: command.i)
        ack.t = Identifiers.nowMillis()
        connection.send(ack)
    }

    /// Sends the will message of a connection that dropped, as if its client sent it then (muted clients'
    /// wills are dropped; interceptors review it like any message).
    func sendWill(_ message: OutgoingMessage, of connection: Connection) async {
        do {
            try await refuseIfMuted(cid: message.cid, sender: message.from)
        } catch {
            logger.info("will message dropped", metadata: ["client": "\(message.from)", "error": "\(error)"])
            return
        }
        logger.info("will message sent", metadata: ["client": "\(message.from)", "cid": "\(message.cid)"])
        if interceptors.isActive, interceptors.inScope(message.cid), !interceptors.isInterceptor(message.from) {
            await interception.admission.enter(connection.id)
            await interception.submit(message)
        } else {
            pipeline.enqueue(message)
        }
    }
}

/// The bounds of a `logs` request as exclusive bounds. `t` is where the page starts (the newer bound
/// paging back, the older one with `reversed`) and `tt` where it stops; `tIncluded` / `ttIncluded` close
/// that end of the interval (timestamps are integers: `t ≤ x` is `t < x + 1`).
struct HistoryRange: Sendable, Equatable {
    var before: Int64?
    var after: Int64?

    init(before: Int64?, after: Int64?) {
        self.before = before
        self.after = after
    }

    init(_ command: Command) {
        let forwards = command.reversed == true
        let (start, startClosed) = (command.t, command.tIncluded == true)
        let (stop, stopClosed) = (command.tt, command.ttIncluded == true)
        let (upper, upperClosed) = forwards ? (stop, stopClosed) : (start, startClosed)
        let (lower, lowerClosed) = forwards ? (start, startClosed) : (stop, stopClosed)
        before = upper.flatMap { upperClosed ? ($0 == .max ? nil : $0 + 1) : $0 }
        after = lower.flatMap { lowerClosed ? ($0 == .min ? nil : $0 - 1) : $0 }
    }
}

/// The will messages held per connection (this node's memory: a node that stops loses them).
final class WillMessages: Sendable {
    private let held = Mutex<[UInt64: OutgoingMessage]>([:])

    func hold(_ message: OutgoingMessage, for connection: UInt64) { held.withLock { $0[connection] = message } }
    func take(_ connection: UInt64) -> OutgoingMessage? { held.withLock { $0.removeValue(forKey: connection) } }
    func discard(_ connection: UInt64) { held.withLock { $0[connection] = nil } }
    func discardAll() { held.withLock { $0.removeAll() } }
}
