import Foundation
import IMCore
import IMSignatures
import NIOWebSocket

/// Conversation creation and history.
extension IMService {

    func startConversation(_ command: Command, by clientID: String, on connection: Connection) async throws {
        let members = command.m ?? []
        if members.count > 1000 { throw IMError(.invalidField, "at most 1000 members at creation") }
        for member in members {
            if let error = ClientID.validate(member) { throw IMError(.invalidField, "member '\(member)': \(error.detail ?? error.reason)") }
        }
        if let attr = command.attr, attr.objectValue == nil { throw IMError(.invalidField, "attr must be a JSON object") }
        try ConversationRecord.checkLimits(name: command.name, attr: command.attr)
        let temporaryTTL = try temporaryLifetime(command)
        let joinPolicy = try JoinPolicy.requested(in: command.attr, transient: command.transient == true)
        try await signatures?.verify(
            .startConversation(members: members), by: clientID, command: command, failure: .conversationSignatureFailed)
        let now = Identifiers.nowMillis()
        let (record, created) = try await store.createConversation(
            NewConversation(
                creator: clientID, members: members, name: command.name, attr: command.attr,
                unique: command.unique == true, transient: command.transient == true, temporaryTTL: temporaryTTL, now: now,
                requestedJoinPolicy: joinPolicy))
        var reply = Command(cmd: .conv, op: .started, i: command.i)
        reply.cid = record.id
        reply.cdate = record.createdAt
        reply.unique = record.uniqueKey != nil ? true : nil
        reply.tempConvTTL = temporaryTTL
        connection.send(reply)
        if record.transient {
            await setRoom(connection, record.id)
            return
        }
        guard created else { return }
        let all = try await store.members(of: record.id)
        // `cdate` marks the events of a creation: these members founded the conversation, they did not join it.
        var invited = Command(cmd: .conv, op: .invited)
        invited.cid = record.id
        invited.initBy = clientID
        invited.cdate = record.createdAt
        await notify(all.filter { $0 != clientID }, invited)
        var joined = Command(cmd: .conv, op: .membersJoined)
        joined.cid = record.id
        joined.m = all
        joined.initBy = clientID
        joined.cdate = record.createdAt
        await notify(all, joined, except: connection)
    }

    /// Default and largest lifetime of a temporary conversation, in seconds (one day, thirty days).
    static let temporaryTTL = (default: 86_400, max: 30 * 86_400)

    /// The lifetime a `conv start` asks for with `tempConv`, nil for other conversations.
    private func temporaryLifetime(_ command: Command) throws -> Int? {
        guard command.tempConv == true else {
            if command.tempConvTTL != nil { throw IMError(.invalidField, "tempConvTTL needs tempConv: true") }
            return nil
        }
        if command.transient == true { throw IMError(.invalidField, "a chat room cannot be temporary") }
        let ttl = command.tempConvTTL ?? Self.temporaryTTL.default
        guard ttl >= 1, ttl <= Self.temporaryTTL.max else {
            throw IMError(.invalidField, "tempConvTTL must be 1–\(Self.temporaryTTL.max) seconds")
        }
        return ttl
    }

    // MARK: History

    func history(_ command: Command, for clientID: String, on connection: Connection) async throws {
        guard let cid = command.cid else { throw IMError(.invalidField, "missing field 'cid'") }
        let limit = command.limit ?? configuration.historyDefaultLimit
        guard limit >= 1 else { throw IMError(.invalidField, "limit must be at least 1") }
        let conversation = try StoreRules.existing(await store.conversation(cid), cid)
        if !conversation.transient, try await !store.isMember(clientID, of: cid) {
            throw IMError(.conversationLogRejected, "\(clientID) is not a member of \(cid)")
        }
        // With `reversed`, paging runs forwards: `t` is where to start and `tt` where to stop.
        let forwards = command.reversed == true
        let range = HistoryRange(command)
        let records = try await history(
            cid: cid, limit: min(limit, configuration.historyMaxLimit), range: range, type: command.lctype, viewer: clientID,
            forwards: forwards)
        var reply = Command(cmd: .logs, i: command.i)
        reply.cid = cid
        reply.logs = Self.withinReplySize(records, keepingNewest: command.reversed != true).map(\.logItem)
        connection.send(reply)
    }

    /// The most message content one `logs` reply carries; a page stops early rather than make a frame
    /// that clients (1 MiB frames by default) cannot take. Clients page on from the last item as usual.
    static let maxLogsReplyBytes = 512 * 1024

    /// The records that fit in one reply: at least one, and those nearest the page's anchor (the newest
    /// for backward paging, the oldest for forward paging).
    static func withinReplySize(_ records: [MessageRecord], keepingNewest: Bool) -> [MessageRecord] {
        var total = 0
        var kept = 0
        for record in keepingNewest ? records.reversed() : records {
            total += record.data.utf8.count + 64
            if kept > 0, total > maxLogsReplyBytes { break }
            kept += 1
        }
        return keepingNewest ? Array(records.suffix(kept)) : Array(records.prefix(kept))
    }
}
