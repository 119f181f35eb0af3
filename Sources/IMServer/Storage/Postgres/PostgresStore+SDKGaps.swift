import Foundation
import IMCore
import PostgresNIO

/// Per-member receipt marks and missed patches (what LeanCloud's SDKs ask for besides).
extension PostgresStore {
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

    /// Per membership, a range of the `(cid, patch_t)` index: O(conversations + patches returned).
    func patchedMessages(clientID: String, after: Int64, limit: Int) async throws -> [MessageRecord] {
        try await logged {
            try await fetch(
                """
                SELECT x.* FROM members mb JOIN messages x ON x.cid = mb.cid
                WHERE mb.client_id = \(clientID) AND x.patch_t > \(after)
                  AND (x.recipients IS NULL OR x.from_id = \(clientID) OR \(clientID) = ANY(x.recipients))
                ORDER BY x.patch_t LIMIT \(limit)
                """
            ).map(MessageRecord.init(postgres:))
        }
    }
}
