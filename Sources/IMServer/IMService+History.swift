import Foundation
import IMCore

/// History: `logs` (closed and typed ranges, as LeanCloud's SDKs ask for them) and the size of a reply.
extension IMService {
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
