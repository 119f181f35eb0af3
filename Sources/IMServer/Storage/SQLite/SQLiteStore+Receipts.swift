import Foundation
import GRDB
import IMCore

/// Every other member's receipt marks (`conv max-read` with `queryAllMembers`).
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
}
