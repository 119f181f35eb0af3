import Foundation
import IMCore
import Logging
import PostgresNIO

/// Stored messages: history, offline backlog, unread counts, recall, read marks and receipts (also every
/// member's).
extension PostgresStore {
    func message(_ id: String) async throws -> MessageRecord? {
        try await logged { try await fetch("SELECT * FROM messages WHERE id = \(id)").first.map(MessageRecord.init(postgres:)) }
    }

    func history(cid: String, limit: Int, beforeT: Int64?, afterT: Int64?, viewer: String, oldestFirst: Bool) async throws
        -> [MessageRecord]
    {
        try await logged {
            try await Self.history(
                fetch, cid: cid, limit: limit, beforeT: beforeT, afterT: afterT, viewer: viewer, oldestFirst: oldestFirst)
        }
    }

    /// `limit` messages strictly between `afterT` and `beforeT` visible to `viewer` (everyone when empty),
    /// in ascending order: the newest ones, or with `oldestFirst` the oldest ones.
    private static func history(
        _ run: Runner, cid: String, limit: Int, beforeT: Int64?, afterT: Int64?, viewer: String, oldestFirst: Bool
    ) async throws -> [MessageRecord] {
        let rows = try await run(
            """
            SELECT * FROM messages
            WHERE cid = \(cid) AND t < \(beforeT ?? Int64.max) AND t > \(afterT ?? Int64.min)
              AND (\(viewer) = '' OR recipients IS NULL OR from_id = \(viewer) OR \(viewer) = ANY(recipients))
            ORDER BY t \(unescaped: oldestFirst ? "ASC" : "DESC") LIMIT \(limit)
            """)
        let records = try rows.map(MessageRecord.init(postgres:))
        return oldestFirst ? records : records.reversed()
    }

    func backlog(clientID: String, limit: Int) async throws -> [(records: [MessageRecord], hasMore: Bool)] {
        try await logged {
            // Per membership, the messages after its cursor (one more than asked: whether there are more).
            let rows = try await fetch(
                """
                SELECT m.cid AS member_cid, x.* FROM members m JOIN conversations c ON c.id = m.cid
                LEFT JOIN LATERAL (
                    SELECT * FROM messages
                    WHERE cid = m.cid AND t > m.delivered_t AND from_id <> \(clientID)
                      AND (recipients IS NULL OR from_id = \(clientID) OR \(clientID) = ANY(recipients))
                    ORDER BY t LIMIT \(limit + 1)
                ) x ON TRUE
                WHERE m.client_id = \(clientID) AND (c.expires_at IS NULL OR c.expires_at > \(Self.now))
                ORDER BY m.cid, x.t
                """)
            var result: [(records: [MessageRecord], hasMore: Bool)] = []
            var current: String?
            var records: [MessageRecord] = []
            func finish() {
                if current != nil { result.append((Array(records.prefix(limit)), records.count > limit)) }
            }
            for row in rows {
                let cid = try row.decode(String.self)
                if cid != current {
                    finish()
                    current = cid
                    records = []
                }
                if try row.makeRandomAccess()["id"].decode(String?.self) != nil { records.append(try MessageRecord(postgres: row)) }
            }
            finish()
            return result
        }
    }

    func unreadCounts(clientID: String) async throws -> [UnreadInfo] {
        try await logged {
            let rows = try await fetch(
                """
                SELECT m.cid AS member_cid, u.unread, u.mentioned, l.* FROM members m JOIN conversations c ON c.id = m.cid
                CROSS JOIN LATERAL (
                    SELECT COUNT(*) AS unread,
                           COALESCE(BOOL_OR(mention_all OR \(clientID) = ANY(mention_pids)), FALSE) AS mentioned
                    FROM messages
                    WHERE cid = m.cid AND t > m.read_t AND from_id <> \(clientID)
                      AND (recipients IS NULL OR from_id = \(clientID) OR \(clientID) = ANY(recipients))
                ) u
                CROSS JOIN LATERAL (
                    SELECT * FROM messages
                    WHERE cid = m.cid AND (recipients IS NULL OR from_id = \(clientID) OR \(clientID) = ANY(recipients))
                    ORDER BY t DESC LIMIT 1
                ) l
                WHERE m.client_id = \(clientID) AND (c.expires_at IS NULL OR c.expires_at > \(Self.now)) AND u.unread > 0
                ORDER BY m.cid
                """)
            return try rows.map { row in
                let (cid, unread, mentioned) = try row.decode((String, Int64, Bool).self)
                return UnreadInfo(cid: cid, unread: Int(unread), last: try MessageRecord(postgres: row), mentioned: mentioned)
            }
        }
    }

    func recall(cid: String, messageID: String, by clientID: String, now: Int64, window: Int64) async throws
        -> (record: MessageRecord, conversation: ConversationRecord, members: [String])
    {
        try await logged {
            try await transaction { connection -> (record: MessageRecord, conversation: ConversationRecord, members: [String]) in
                let run = Self.runner(connection, logger)
                let conversation = try StoreRules.existing(try await Self.conversation(run, id: cid), cid)
                let found = try await run("SELECT * FROM messages WHERE id = \(messageID) FOR UPDATE").first.map(
                    MessageRecord.init(postgres:))
                var record = try StoreRules.checkRecall(found, cid: cid, messageID: messageID, by: clientID, now: now, window: window)
                if !record.recalled {
                    record.recalled = true
                    record.data = MessageRecord.recalledPlaceholder
                    record.patchT = now
                    _ = try await run(
                        "UPDATE messages SET recalled = TRUE, data = \(record.data), patch_t = \(now) WHERE id = \(record.id)")
                    try await MediaReferences.replace(run, record)
                }
                let members = conversation.transient ? [] : try await Self.members(run, cid: cid)
                return (record, conversation, members)
            }
        }
    }

    func markRead(cid: String, clientID: String, messageID: String?, t: Int64?) async throws -> (readT: Int64, receipts: [ReadReceipt]) {
        try await logged {
            try await transaction { connection -> (readT: Int64, receipts: [ReadReceipt]) in
                let run = Self.runner(connection, logger)
                guard
                    let previous = try await run(
                        "SELECT read_t FROM members WHERE cid = \(cid) AND client_id = \(clientID) FOR UPDATE"
                    ).first?.decode(Int64.self)
                else { throw IMError(.invalidMessagingTarget, "\(clientID) is not a member of \(cid)") }
                var target: Int64
                if let messageID {
                    guard
                        let message = try await run("SELECT * FROM messages WHERE id = \(messageID)").first.map(
                            MessageRecord.init(postgres:)),
                        message.cid == cid
                    else { throw IMError(.messageNotFound, "message \(messageID) is not in \(cid)") }
                    target = message.t
                } else if let t {
                    // A mark is a stored message's timestamp: a future `t` would claim messages not sent yet.
                    target =
                        try await run("SELECT COALESCE(MAX(t), 0) FROM messages WHERE cid = \(cid) AND t <= \(t)").first?.decode(
                            Int64.self) ?? 0
                } else {
                    target = try await Self.lastTimestamp(run, cid: cid)
                }
                target = max(target, previous)
                let receipts = try await run(
                    """
                    SELECT DISTINCT ON (from_id) from_id, id FROM messages
                    WHERE cid = \(cid) AND t > \(previous) AND t <= \(target) AND receipt AND from_id <> \(clientID)
                    ORDER BY from_id, t DESC
                    """
                ).map { row in
                    let (sender, id) = try row.decode((String, String).self)
                    return ReadReceipt(sender: sender, id: id)
                }
                _ = try await run(
                    """
                    UPDATE members SET read_t = \(target), delivered_t = GREATEST(delivered_t, \(target))
                    WHERE cid = \(cid) AND client_id = \(clientID)
                    """)
                return (target, receipts)
            }
        }
    }

    func receiptTimestamps(cid: String, clientID: String) async throws -> (readT: Int64, deliveredT: Int64) {
        try await logged {
            try await client.withConnection { connection -> (readT: Int64, deliveredT: Int64) in
                let run = Self.runner(connection, logger)
                _ = try StoreRules.existing(try await Self.conversation(run, id: cid), cid)
                guard try await Self.isMember(run, cid: cid, clientID: clientID) else {
                    throw IMError(.conversationMembershipRequired, "\(clientID) is not a member of \(cid)")
                }
                let row = try await run(
                    """
                    SELECT COALESCE(MAX(read_t), 0), COALESCE(MAX(delivered_t), 0) FROM members
                    WHERE cid = \(cid) AND client_id <> \(clientID)
                    """
                ).first
                guard let row else { return (0, 0) }
                let (readT, deliveredT) = try row.decode((Int64, Int64).self)
                return (readT, deliveredT)
            }
        }
    }

    func receiptMessageIDs(cid: String, from: Int64, to: Int64, excluding clientID: String) async throws -> [String] {
        try await logged {
            try await fetch(
                """
                SELECT id FROM messages
                WHERE cid = \(cid) AND t >= \(from) AND t <= \(to) AND receipt AND from_id <> \(clientID)
                ORDER BY t LIMIT 1000
                """
            ).map { try $0.decode(String.self) }
        }
    }

    func memberReceiptTimestamps(cid: String, clientID: String) async throws -> [MaxReadTuple] {
        try await logged {
            try await client.withConnection { connection -> [MaxReadTuple] in
                let run = Self.runner(connection, logger)
                _ = try StoreRules.existing(try await Self.conversation(run, id: cid), cid)
                guard try await Self.isMember(run, cid: cid, clientID: clientID) else {
                    throw IMError(.conversationMembershipRequired, "\(clientID) is not a member of \(cid)")
                }
                let rows = try await run(
                    "SELECT client_id, delivered_t, read_t FROM members WHERE cid = \(cid) AND client_id <> \(clientID) ORDER BY client_id")
                return try rows.map { row in
                    let (pid, delivered, read) = try row.decode((String, Int64, Int64).self)
                    return MaxReadTuple(pid: pid, maxAckTimestamp: delivered, maxReadTimestamp: read)
                }
            }
        }
    }
}
