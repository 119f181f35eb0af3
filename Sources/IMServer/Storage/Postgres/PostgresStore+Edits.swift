import Foundation
import IMCore
import PostgresNIO

/// Message edits, and the recalls and edits a reconnecting client missed.
extension PostgresStore {
    func edit(_ edit: MessageEdit) async throws -> (record: MessageRecord, conversation: ConversationRecord, members: [String]) {
        try await logged {
            try await transaction { connection -> (record: MessageRecord, conversation: ConversationRecord, members: [String]) in
                let run = Self.runner(connection, logger)
                let conversation = try StoreRules.existing(try await Self.conversation(run, id: edit.cid), edit.cid)
                let members = conversation.transient ? [] : try await Self.members(run, cid: edit.cid)
                if !conversation.transient, !members.contains(edit.editor) {
                    throw IMError(.invalidMessagingTarget, "\(edit.editor) is not a member of \(edit.cid)")
                }
                let found = try await run("SELECT * FROM messages WHERE id = \(edit.messageID) FOR UPDATE").first.map(
                    MessageRecord.init(postgres:))
                let record = try StoreRules.checkEdit(found, edit)
                _ = try await run(
                    """
                    UPDATE messages SET data = \(record.data), bin = \(record.binary), mention_pids = \(record.mentionPids),
                        mention_all = \(record.mentionAll), patch_t = \(record.patchT) WHERE id = \(record.id)
                    """)
                try await MediaReferences.replace(run, record)
                return (record, conversation, members)
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
