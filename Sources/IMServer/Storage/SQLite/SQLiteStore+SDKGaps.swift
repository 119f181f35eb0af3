import Foundation
import GRDB
import IMCore

/// Per-member receipt marks and missed patches (what LeanCloud's SDKs ask for besides).
extension SQLiteStore {
    func memberReceiptTimestamps(cid: String, clientID: String) async throws -> [MaxReadTuple] {
        try await db.read { db in
            _ = try ConversationTable.existing(db, id: cid)
            guard try ConversationTable.isMember(db, cid: cid, clientID: clientID) else {
                throw IMError(.conversationMembershipRequired, "\(clientID) is not a member of \(cid)")
            }
            return try Row.fetchAll(
                db, sql: "SELECT client_id, delivered_t, read_t FROM members WHERE cid = ? AND client_id <> ? ORDER BY client_id",
                arguments: [cid, clientID]
            ).map { row in
                MaxReadTuple(pid: row["client_id"], maxAckTimestamp: row["delivered_t"], maxReadTimestamp: row["read_t"])
            }
        }
    }

    /// Per membership, a range of the `(cid, patch_t)` index: O(conversations + patches returned).
    func patchedMessages(clientID: String, after: Int64, limit: Int) async throws -> [MessageRecord] {
        try await db.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT messages.* FROM members JOIN messages ON messages.cid = members.cid
                    WHERE members.client_id = ? AND messages.patch_t > ? AND \(MessageTable.visibleTo)
                    ORDER BY messages.patch_t LIMIT ?
                    """,
                arguments: [clientID, after, clientID, clientID, limit]
            ).map(MessageRecord.init)
        }
    }
}
