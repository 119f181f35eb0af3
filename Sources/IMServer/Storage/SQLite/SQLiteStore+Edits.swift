import Foundation
import GRDB
import IMCore

/// Message edits, and the recalls and edits a reconnecting client missed.
extension SQLiteStore {
    func edit(_ edit: MessageEdit) async throws -> (record: MessageRecord, conversation: ConversationRecord, members: [String]) {
        try await db.write { db in
            let conversation = try ConversationTable.existing(db, id: edit.cid)
            let members = conversation.transient ? [] : try ConversationTable.members(db, cid: edit.cid)
            if !conversation.transient, !members.contains(edit.editor) {
                throw IMError(.invalidMessagingTarget, "\(edit.editor) is not a member of \(edit.cid)")
            }
            let record = try StoreRules.checkEdit(MessageTable.find(db, id: edit.messageID), edit)
            try db.execute(
                sql: "UPDATE messages SET data = ?, bin = ?, mention_pids = ?, mention_all = ?, patch_t = ? WHERE id = ?",
                arguments: [
                    record.data, record.binary, record.mentionPids.map(ClientIDList.text), record.mentionAll, record.patchT, record.id,
                ])
            try MediaReferences.replace(db, record)
            return (record, conversation, members)
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
