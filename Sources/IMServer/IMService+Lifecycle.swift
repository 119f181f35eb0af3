import Foundation
import GRDB
import IMCore

/// Recall, read state and unread counts.
extension IMService {
    func recall(_ command: Command, by clientID: String, on connection: Connection) async throws {
        guard let patches = command.patches, patches.count == 1, let patch = patches.first, patch.recall == true else {
            throw IMError(.invalidField, "patches must hold one item with recall: true")
        }
        let now = Identifiers.nowMillis()
        let window = Int64(configuration.recallWindow) * 1000
        let (record, members) = try await db.write { db -> (MessageRecord, [String]) in
            let conversation = try ConversationStore.existing(db, id: patch.cid)
            guard var record = try MessageStore.find(db, id: patch.mid), record.cid == patch.cid else {
                throw IMError(.messageNotFound, "message \(patch.mid) is not in \(patch.cid)")
            }
            guard record.from == clientID else {
                throw IMError(.messageOwnershipRequired, "only the sender may recall a message")
            }
            guard now - record.t <= window else {
                throw IMError(.messageRecallDisabled, "the recall window of \(window / 1000) s has passed")
            }
            if !record.recalled {
                record.recalled = true
                record.data = MessageStore.recalledPlaceholder
                record.patchT = now
                try db.execute(
                    sql: "UPDATE messages SET recalled = 1, data = ?, patch_t = ? WHERE id = ?",
                    arguments: [record.data, now, record.id])
            }
            let members = conversation.transient ? [] : try ConversationStore.members(db, cid: patch.cid)
            return (record, members)
        }
        var reply = Command(cmd: .patch, op: .modified, i: command.i)
        reply.t = now
        connection.send(reply)

        var item = PatchItem(cid: record.cid, mid: record.id, timestamp: record.t)
        item.recall = true
        item.data = record.data
        item.from = record.from
        item.patchTimestamp = record.patchT
        var event = Command(cmd: .patch, op: .modify)
        event.patches = [item]
        let recipients = members.isEmpty ? rooms.connections(in: record.cid) : members.flatMap { registry.connections(of: $0) }
        for recipient in recipients where recipient !== connection { recipient.send(event) }
    }

    func markRead(_ command: Command, by clientID: String, on connection: Connection) async throws {
        let cid = try requiredCID(command)
        let (readT, receipts) = try await db.write { db -> (Int64, [(sender: String, id: String)]) in
            guard
                let previous = try Int64.fetchOne(
                    db, sql: "SELECT read_t FROM members WHERE cid = ? AND client_id = ?", arguments: [cid, clientID])
            else { throw IMError(.invalidMessagingTarget, "\(clientID) is not a member of \(cid)") }
            var target: Int64
            if let mid = command.mid {
                guard let message = try MessageStore.find(db, id: mid), message.cid == cid else {
                    throw IMError(.messageNotFound, "message \(mid) is not in \(cid)")
                }
                target = message.t
            } else {
                target = try command.t ?? MessageStore.lastTimestamp(db, cid: cid)
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
            ).map { (sender: $0["from_id"] as String, id: $0["id"] as String) }
            try db.execute(
                sql: "UPDATE members SET read_t = ?, delivered_t = MAX(delivered_t, ?) WHERE cid = ? AND client_id = ?",
                arguments: [target, target, cid, clientID])
            return (target, receipts)
        }
        var reply = Command(cmd: .read, i: command.i)
        reply.cid = cid
        reply.t = readT
        connection.send(reply)
        for receipt in receipts {
            var rcp = Command(cmd: .rcp)
            rcp.cid = cid
            rcp.id = receipt.id
            rcp.t = readT
            rcp.read = true
            rcp.from = clientID
            notify([receipt.sender], rcp)
        }
    }

    /// `conv max-read`: how far the other members of a conversation have acknowledged (received) and read
    /// it, as the newest of their delivery cursors and read marks. Members only (4317).
    func receiptTimestamps(_ command: Command, for clientID: String, on connection: Connection) async throws {
        let cid = try requiredCID(command)
        let (readT, deliveredT) = try await db.read { db -> (Int64, Int64) in
            _ = try ConversationStore.existing(db, id: cid)
            guard try ConversationStore.isMember(db, cid: cid, clientID: clientID) else {
                throw IMError(.conversationMembershipRequired, "\(clientID) is not a member of \(cid)")
            }
            let row = try Row.fetchOne(
                db, sql: "SELECT MAX(read_t) AS read_t, MAX(delivered_t) AS delivered_t FROM members WHERE cid = ? AND client_id <> ?",
                arguments: [cid, clientID])
            return (row?["read_t"] ?? 0, row?["delivered_t"] ?? 0)
        }
        var reply = Command(cmd: .conv, op: .maxRead, i: command.i)
        reply.cid = cid
        reply.maxReadTimestamp = readT
        reply.maxAckTimestamp = deliveredT
        connection.send(reply)
    }

    /// Unread counts per conversation, sent right after login: messages after the member's read mark
    /// that others sent and the member may see, with the newest message and whether any mentions them.
    func unreadCounts(for clientID: String) async throws -> [UnreadInfo] {
        try await db.read { db in
            let counting = try db.cachedStatement(
                sql: """
                    SELECT COUNT(*) AS unread,
                           MAX(mention_all = 1 OR EXISTS (SELECT 1 FROM json_each(messages.mention_pids) WHERE value = ?)) AS mentioned
                    FROM messages WHERE cid = ? AND t > ? AND from_id <> ? AND \(MessageStore.visibleTo)
                    """)
            return try ConversationStore.memberships(db, clientID: clientID).compactMap { membership -> UnreadInfo? in
                let (cid, readT) = (membership.cid, membership.readT)
                guard let counts = try Row.fetchOne(counting, arguments: [clientID, cid, readT, clientID, clientID, clientID]),
                    let count = counts["unread"] as Int?, count > 0,
                    let last = try MessageStore.history(db, cid: cid, limit: 1, beforeT: nil, afterT: nil, viewer: clientID).first
                else { return nil }
                var info = UnreadInfo(cid: cid, unread: count)
                info.mid = last.id
                info.timestamp = last.t
                info.from = last.from
                info.data = last.data
                info.mentioned = (counts["mentioned"] as Bool?) == true ? true : nil
                return info
            }
        }
    }
}
