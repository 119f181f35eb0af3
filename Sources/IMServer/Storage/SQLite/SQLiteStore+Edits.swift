import Foundation
import GRDB
import IMCore

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
}
