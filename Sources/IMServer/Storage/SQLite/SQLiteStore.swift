import Foundation
import GRDB
import IMCore
import Logging

/// The embedded store: one SQLite file in WAL mode (GRDB), written by one node.
final class SQLiteStore: ServerStore {
    let db: DatabasePool
    /// The conversations message batches store into, kept between batches.
    let batchTargets = BatchTargets()
    /// The messages the last batches stored, for the delivery cursors that their acks move.
    let recentMessages = RecentMessages()
    /// Runs the WAL's checkpoints off the committing threads.
    let checkpointer: WALCheckpointer

    /// Opens (and migrates) the file, after checking its integrity for at most `integrityCheckSeconds` (0
    /// skips the check); a damaged file throws `DamagedDatabase`.
    init(path: String, synchronousFull: Bool, integrityCheckSeconds: Int = 0, logger: Logger? = nil) throws {
        db = try SQLiteSchema.open(
            path: path, synchronousFull: synchronousFull, integrityCheckSeconds: integrityCheckSeconds, logger: logger)
        try db.writeWithoutTransaction { [batchTargets] db in try batchTargets.install(on: db) }
        checkpointer = try WALCheckpointer(pool: db)
    }

    func ping() async throws {
        _ = try await db.read { db in try Int.fetchOne(db, sql: "SELECT 1") }
    }

    func shutdown() async {}

    /// `PRAGMA synchronous` of the connection that commits (1: NORMAL, 2: FULL).
    func synchronousLevel() async throws -> Int {
        try await db.write { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1 }
    }

    var queryDialect: ConversationQuery.Dialect { .sqlite }

    // MARK: Sessions

    func claimTag(clientID: String, tag: String, deviceID: String, forced: Bool) async throws -> Int64? {
        try await db.write { db -> Int64? in
            let holder = try String.fetchOne(
                db, sql: "SELECT device_id FROM device_tags WHERE client_id = ? AND tag = ?", arguments: [clientID, tag])
            if !forced, let holder, holder != deviceID { return nil }
            try db.execute(
                sql: """
                    INSERT INTO device_tags (client_id, tag, device_id) VALUES (?, ?, ?)
                    ON CONFLICT DO UPDATE SET device_id = excluded.device_id
                    """,
                arguments: [clientID, tag, deviceID])
            // One node: the session registry orders logins of a tag by itself.
            return 0
        }
    }

    func issueToken(_ token: String, clientID: String, expiresAt: Int64, now: Int64) async throws {
        try await db.write { db in
            try db.execute(sql: "DELETE FROM session_tokens WHERE expires_at <= ?", arguments: [now])
            try db.execute(
                sql: "INSERT INTO session_tokens (token, client_id, expires_at) VALUES (?, ?, ?)", arguments: [token, clientID, expiresAt])
        }
    }

    func revokeToken(_ token: String) async throws {
        try await db.write { db in
            try db.cachedStatement(sql: "DELETE FROM session_tokens WHERE token = ?").execute(arguments: [token])
        }
    }

    func clientID(forToken token: String, now: Int64) async throws -> String? {
        try await db.read { db in
            try String.fetchOne(
                db, sql: "SELECT client_id FROM session_tokens WHERE token = ? AND expires_at > ?", arguments: [token, now])
        }
    }

    func useNonce(scope: String, nonce: String, now: Int64, window: Int64, purge: Bool) async throws -> Bool {
        try await db.write { db -> Bool in
            if purge { try db.execute(sql: "DELETE FROM signature_nonces WHERE seen_at < ?", arguments: [now - window]) }
            if let seenAt = try Int64.fetchOne(
                db, sql: "SELECT seen_at FROM signature_nonces WHERE scope = ? AND nonce = ?", arguments: [scope, nonce]),
                seenAt >= now - window
            {
                return true
            }
            try db.execute(
                sql: "INSERT OR REPLACE INTO signature_nonces (scope, nonce, seen_at) VALUES (?, ?, ?)", arguments: [scope, nonce, now])
            return false
        }
    }

    // MARK: Conversations

    func createConversation(_ new: NewConversation) async throws -> (record: ConversationRecord, created: Bool) {
        try await db.write { db in
            if new.temporaryTTL != nil { try ConversationTable.purgeExpired(db, now: new.now) }
            let result = try ConversationTable.create(db, new)
            if result.created { try MediaReferences.replace(db, cid: result.record.id, name: result.record.name, attr: result.record.attr) }
            return result
        }
    }

    func conversation(_ cid: String) async throws -> ConversationRecord? {
        try await db.read { db in try ConversationTable.find(db, id: cid) }
    }

    func members(of cid: String) async throws -> [String] {
        try await db.read { db in try ConversationTable.members(db, cid: cid) }
    }

    func isMember(_ clientID: String, of cid: String) async throws -> Bool {
        try await db.read { db in try ConversationTable.isMember(db, cid: cid, clientID: clientID) }
    }

    func memberCount(of cid: String) async throws -> Int {
        try await db.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM members WHERE cid = ?", arguments: [cid]) ?? 0 }
    }

    func memberships(of clientID: String) async throws -> [Membership] {
        try await db.read { db in try ConversationTable.memberships(db, clientID: clientID) }
    }

    func changeMembers(_ request: MembershipRequest) async throws -> MembershipChange {
        try await db.write { db in
            let record = try ConversationTable.existing(db, id: request.cid)
            let actorIsMember = try ConversationTable.isMember(db, cid: request.cid, clientID: request.actor)
            let controls = MemberControls(controls: try MemberControlTable.all(db, cid: request.cid, now: request.now), now: request.now)
            try StoreRules.authorize(request, record: record, actorIsMember: actorIsMember, controls: controls)
            if record.transient { return MembershipChange(record: record, changed: [request.actor], members: []) }
            let changed =
                switch request.kind {
                case .add: try ConversationTable.addMembers(db, cid: request.cid, clientIDs: request.clientIDs, now: request.now)
                case .remove: try ConversationTable.removeMembers(db, cid: request.cid, clientIDs: request.clientIDs)
                }
            return MembershipChange(record: record, changed: changed, members: try ConversationTable.members(db, cid: request.cid))
        }
    }

    func updateConversation(
        cid: String, by clientID: String, inRoom: Bool, patch: [String: JSONValue], now: Int64, trusted: Bool, reason: String?
    ) async throws -> [String] {
        try await db.write { db -> [String] in
            let record = try ConversationTable.existing(db, id: cid)
            let members = try ConversationTable.members(db, cid: cid)
            try StoreRules.authorizeUpdate(record: record, members: members, clientID: clientID, inRoom: inRoom, trusted: trusted)
            let (name, attr) = try AttributePatch.apply(patch, name: record.name, attr: record.attr)
            let controls = MemberControls(controls: try MemberControlTable.all(db, cid: cid, now: now), now: now)
            let actor = trusted ? .manager : controls.role(of: clientID, in: record)
            if let change = try JoinPolicy.change(of: record, to: attr, by: actor, reason: reason) {
                try db.execute(
                    sql: "UPDATE conversations SET join_policy = ?, lock_reason = ? WHERE id = ?",
                    arguments: [change.policy.rawValue, change.lockReason, cid])
            }
            try db.execute(
                sql: "UPDATE conversations SET name = ?, attr = ?, updated_at = ? WHERE id = ?",
                arguments: [name, attr.jsonString(), now, cid])
            try MediaReferences.replace(db, cid: cid, name: name, attr: attr)
            return members
        }
    }

    func memberActivity(of cid: String, window: Int) async throws -> [(clientID: String, joinedAt: Int64, sent: Int)] {
        try await db.read { db in
            let sent = Dictionary(
                try Row.fetchAll(
                    db,
                    sql: """
                        SELECT from_id, COUNT(*) AS n FROM (SELECT from_id FROM messages WHERE cid = ? ORDER BY t DESC LIMIT ?)
                        GROUP BY from_id
                        """, arguments: [cid, window]
                ).map { (row: Row) -> (String, Int) in (row["from_id"], row["n"]) }, uniquingKeysWith: { a, _ in a })
            return try Row.fetchAll(
                db, sql: "SELECT client_id, joined_at FROM members WHERE cid = ? ORDER BY joined_at, client_id", arguments: [cid]
            )
            .map { row in
                let clientID: String = row["client_id"]
                return (clientID, row["joined_at"], sent[clientID] ?? 0)
            }
        }
    }

    func setMuted(cid: String, clientID: String, muted mute: Bool) async throws {
        try await db.write { db in
            let record = try ConversationTable.existing(db, id: cid)
            if try !ConversationTable.isMember(db, cid: cid, clientID: clientID) {
                throw IMError(.conversationMembershipRequired, "only members may mute \(cid)")
            }
            var muted = record.muted.filter { $0 != clientID }
            if mute { muted.append(clientID) }
            try db.execute(sql: "UPDATE conversations SET muted = ? WHERE id = ?", arguments: [ClientIDList.text(muted), cid])
        }
    }

    func queryConversations(_ query: ConversationQuery, sort: String?, viewer: String, limit: Int, skip: Int, scanLimit: Int)
        async throws -> [ConversationInfo]
    {
        let order = try ConversationQuery.orderBy(sort, dialect: .sqlite)
        return try await db.read { db -> [ConversationInfo] in
            if !query.indexed {
                let total = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM conversations") ?? 0
                if total > scanLimit {
                    throw IMError(.conversationQueryFailed, "query would scan \(total) conversations; add a condition on objectId, m or lm")
                }
            }
            let arguments = Self.arguments(query.values) + [viewer, limit, skip]
            let rows = try Row.fetchAll(db, sql: query.select(orderBy: order), arguments: arguments)
            return try rows.map(ConversationRecord.init).map { record in
                record.info(members: record.transient ? [] : try ConversationTable.members(db, cid: record.id), viewer: viewer)
            }
        }
    }

    /// A compiled query's values as GRDB arguments.
    static func arguments(_ values: [QueryValue]) -> StatementArguments {
        StatementArguments(
            values.map { value -> (any DatabaseValueConvertible)? in
                switch value {
                case .null: nil
                case .int(let i): i
                case .double(let d): d
                case .text(let s), .json(let s): s
                case .bool(let b): b ? 1 : 0
                }
            })
    }

    func temporaryConversations(_ ids: [String], viewer: String) async throws -> [ConversationInfo] {
        try await db.read { db -> [ConversationInfo] in
            try ids.compactMap { id -> ConversationInfo? in
                guard id.hasPrefix("_tmp:"), let record = try ConversationTable.find(db, id: id) else { return nil }
                let members = try ConversationTable.members(db, cid: id)
                return members.contains(viewer) ? record.info(members: members) : nil
            }
        }
    }

    // MARK: Messages

    var batchWriter: BatchWriter {
        .blocking(
            BlockingBatchWriter(
                write: { [db, batchTargets, recentMessages, checkpointer] batch, inline in
                    let write = { try Self.write(batch, to: db, targets: batchTargets, recent: recentMessages) }
                    return inline ? try checkpointer.deferring(write) : try write()
                },
                upkeepDue: { [checkpointer] in checkpointer.isDue },
                upkeep: { [db, checkpointer] in checkpointer.runDue(db) }))
    }

    /// One batch's transaction on the writer connection.
    private static func write(
        _ batch: MessageBatch, to db: DatabasePool, targets batchTargets: BatchTargets, recent recentMessages: RecentMessages
    ) throws -> BatchResult {
        // The transaction without GRDB's `write`: it runs `BEGIN IMMEDIATE` and `COMMIT` through `execute(sql:)`,
        // which parses both again on every call (a tenth of the writer thread's time for a one-message batch,
        // perf, issue 30 round 6). The same statements, cached; GRDB still runs them (transaction observers,
        // its bookkeeping), and `writeWithoutTransaction` checks that none is left open.
        try db.writeWithoutTransaction { db in
            try db.cachedStatement(sql: "BEGIN IMMEDIATE TRANSACTION").execute()
            do {
                try batchTargets.validate(db)
                let result = try Self.commit(db, batch, targets: batchTargets)
                try MessageTable.advanceCursors(db, batch.moves, recent: recentMessages)
                try db.cachedStatement(sql: "COMMIT TRANSACTION").execute()
                recentMessages.remember(result.outcomes)
                return result
            } catch {
                // A failed statement or commit may leave the transaction open (or SQLite may have ended it).
                if db.isInsideTransaction { try? db.rollback() }
                throw error
            }
        }
    }

    /// Stores a batch's messages: each must go to a conversation that exists, from a member, once per
    /// dedupe token, with a timestamp above the conversation's newest.
    private static func commit(_ db: Database, _ batch: MessageBatch, targets: BatchTargets) throws -> BatchResult {
        var timestamps: [String: Int64] = [:]
        /// Per conversation of the batch, nil when it does not exist; a chat room's members are its connections.
        var seen: [String: BatchTargets.Target?] = [:]
        var outcomes: [BatchOutcome] = []
        outcomes.reserveCapacity(batch.messages.count)
        for message in batch.messages {
            let target: BatchTargets.Target?
            if let known = seen[message.cid] {
                target = known
            } else {
                target = try targets.target(db, cid: message.cid, now: batch.now).map { found in
                    var target = found
                    if found.transient { target.members = batch.roomMembers(message.cid) }
                    return target
                }
                seen[message.cid] = target
            }
            guard let target else {
                outcomes.append(.failed(IMError(.invalidMessagingTarget, "conversation \(message.cid) does not exist")))
                continue
            }
            let (transient, members) = (target.transient, target.members)
            guard members.contains(message.from) else {
                outcomes.append(.failed(IMError(.invalidMessagingTarget, "\(message.from) is not a member of \(message.cid)")))
                continue
            }
            let last = try timestamps[message.cid] ?? batch.knownTimestamps[message.cid] ?? MessageTable.lastTimestamp(db, cid: message.cid)
            let t = max(batch.now, last + 1)
            let record = message.record(id: Identifiers.messageID(), t: t, transient: transient)
            // A resend (same sender and dedupe token) is found by the insert itself, which then stores nothing: one
            // statement per message instead of a SELECT before every insert (issue 30). Nothing else of the batch moves.
            let inserted = try MessageTable.insert(
                db, record, dedupeToken: message.dedupeToken, recipients: message.recipients, unlessDuplicate: message.dedupeToken != nil)
            if !inserted {
                let existing = try message.dedupeToken.flatMap { try MessageTable.find(db, from: message.from, dedupeToken: $0) }
                outcomes.append(existing.map { .duplicate($0) } ?? .failed(IMError(.internalError, "storage failure")))
                continue
            }
            timestamps[message.cid] = t
            try MediaReferences.insert(db, record)
            outcomes.append(
                .stored(record, members: message.audience(of: members), room: transient && message.recipients == nil))
        }
        let touch = try db.cachedStatement(sql: "UPDATE conversations SET lm = ? WHERE id = ?")
        for (cid, t) in timestamps { try touch.execute(arguments: [t, cid]) }
        return BatchResult(outcomes: outcomes, timestamps: timestamps)
    }

    func message(_ id: String) async throws -> MessageRecord? {
        try await db.read { db in try MessageTable.find(db, id: id) }
    }

    func history(cid: String, limit: Int, beforeT: Int64?, afterT: Int64?, viewer: String, oldestFirst: Bool) async throws
        -> [MessageRecord]
    {
        try await db.read { db in
            try MessageTable.history(db, cid: cid, limit: limit, beforeT: beforeT, afterT: afterT, viewer: viewer, oldestFirst: oldestFirst)
        }
    }

    func backlog(clientID: String, limit: Int) async throws -> [(records: [MessageRecord], hasMore: Bool)] {
        try await db.read { db in
            try ConversationTable.memberships(db, clientID: clientID).map { membership in
                let records = try MessageTable.backlog(
                    db, cid: membership.cid, clientID: clientID, after: membership.deliveredT, limit: limit + 1)
                return (Array(records.prefix(limit)), records.count > limit)
            }
        }
    }

    func unreadCounts(clientID: String) async throws -> [UnreadInfo] {
        try await db.read { db in
            let counting = try db.cachedStatement(
                sql: """
                    SELECT COUNT(*) AS unread,
                           MAX(mention_all = 1 OR EXISTS (SELECT 1 FROM json_each(messages.mention_pids) WHERE value = ?)) AS mentioned
                    FROM messages WHERE cid = ? AND t > ? AND from_id <> ? AND \(MessageTable.visibleTo)
                    """)
            return try ConversationTable.memberships(db, clientID: clientID).compactMap { membership -> UnreadInfo? in
                let (cid, readT) = (membership.cid, membership.readT)
                guard let counts = try Row.fetchOne(counting, arguments: [clientID, cid, readT, clientID, clientID, clientID]),
                    let count = counts["unread"] as Int?, count > 0,
                    let last = try MessageTable.history(db, cid: cid, limit: 1, beforeT: nil, afterT: nil, viewer: clientID).first
                else { return nil }
                return UnreadInfo(cid: cid, unread: count, last: last, mentioned: (counts["mentioned"] as Bool?) == true)
            }
        }
    }

    func recall(cid: String, messageID: String, by clientID: String, now: Int64, window: Int64) async throws
        -> (record: MessageRecord, conversation: ConversationRecord, members: [String])
    {
        try await db.write { db in
            let conversation = try ConversationTable.existing(db, id: cid)
            var record = try StoreRules.checkRecall(
                MessageTable.find(db, id: messageID), cid: cid, messageID: messageID, by: clientID, now: now, window: window)
            if !record.recalled {
                record.recalled = true
                record.data = MessageRecord.recalledPlaceholder
                record.patchT = now
                try db.execute(
                    sql: "UPDATE messages SET recalled = 1, data = ?, patch_t = ? WHERE id = ?", arguments: [record.data, now, record.id])
                try MediaReferences.replace(db, record)
            }
            let members = conversation.transient ? [] : try ConversationTable.members(db, cid: cid)
            return (record, conversation, members)
        }
    }

    func markRead(cid: String, clientID: String, messageID: String?, t: Int64?) async throws -> (readT: Int64, receipts: [ReadReceipt]) {
        try await db.write { db in
            guard
                let previous = try Int64.fetchOne(
                    db, sql: "SELECT read_t FROM members WHERE cid = ? AND client_id = ?", arguments: [cid, clientID])
            else { throw IMError(.invalidMessagingTarget, "\(clientID) is not a member of \(cid)") }
            var target: Int64
            if let messageID {
                guard let message = try MessageTable.find(db, id: messageID), message.cid == cid else {
                    throw IMError(.messageNotFound, "message \(messageID) is not in \(cid)")
                }
                target = message.t
            } else if let t {
                // A mark is a stored message's timestamp: a future `t` would claim messages not sent yet.
                target =
                    try Int64.fetchOne(
                        db.cachedStatement(sql: "SELECT MAX(t) FROM messages WHERE cid = ? AND t <= ?"), arguments: [cid, t]) ?? 0
            } else {
                target = try MessageTable.lastTimestamp(db, cid: cid)
            }
            target = max(target, previous)
            let receipts = try Row.fetchAll(
                db,
                sql: """
                    SELECT from_id, id, MAX(t) FROM messages
                    WHERE cid = ? AND t > ? AND t <= ? AND receipt = 1 AND from_id <> ?
                    GROUP BY from_id
                    """,
                arguments: [cid, previous, target, clientID]
            ).map { ReadReceipt(sender: $0["from_id"], id: $0["id"]) }
            try db.execute(
                sql: "UPDATE members SET read_t = ?, delivered_t = MAX(delivered_t, ?) WHERE cid = ? AND client_id = ?",
                arguments: [target, target, cid, clientID])
            return (target, receipts)
        }
    }

    func receiptTimestamps(cid: String, clientID: String) async throws -> (readT: Int64, deliveredT: Int64) {
        try await db.read { db in
            _ = try ConversationTable.existing(db, id: cid)
            guard try ConversationTable.isMember(db, cid: cid, clientID: clientID) else {
                throw IMError(.conversationMembershipRequired, "\(clientID) is not a member of \(cid)")
            }
            let row = try Row.fetchOne(
                db, sql: "SELECT MAX(read_t) AS read_t, MAX(delivered_t) AS delivered_t FROM members WHERE cid = ? AND client_id <> ?",
                arguments: [cid, clientID])
            return (row?["read_t"] ?? 0, row?["delivered_t"] ?? 0)
        }
    }

    func receiptMessageIDs(cid: String, from: Int64, to: Int64, excluding clientID: String) async throws -> [String] {
        try await db.read { db in
            try String.fetchAll(
                db,
                sql: """
                    SELECT id FROM messages
                    WHERE cid = ? AND t >= ? AND t <= ? AND receipt = 1 AND from_id <> ?
                    ORDER BY t LIMIT 1000
                    """,
                arguments: [cid, from, to, clientID])
        }
    }
}

extension OutgoingMessage {
    /// The stored form of this message, with the id and timestamp the store gave it.
    func record(id: String, t: Int64, transient: Bool) -> MessageRecord {
        MessageRecord(
            id: id, cid: cid, from: from, data: data, t: t, receipt: receipt && !transient, priority: priority,
            mentionPids: mentionPids, mentionAll: mentionAll == true, binary: binary)
    }

    /// Who receives it among `members`: all of them, or those an interceptor restricted it to.
    func audience(of members: [String]) -> [String] {
        recipients.map { allowed in members.filter(allowed.contains) } ?? members
    }
}

extension UnreadInfo {
    /// Unread count of a conversation with its newest message.
    init(cid: String, unread: Int, last: MessageRecord, mentioned: Bool) {
        self.init(cid: cid, unread: unread)
        mid = last.id
        timestamp = last.t
        from = last.from
        if last.binary { binaryMsg = last.data } else { data = last.data }
        patchTimestamp = last.patchT
        self.mentioned = mentioned ? true : nil
    }
}
