import Foundation
import IMCore

/// An edit of a stored message (`patch modify` without `recall`): its new content and mentions.
struct MessageEdit: Sendable {
    var cid: String
    var messageID: String
    var editor: String
    /// The new content: text, or with `binary` a binary message's bytes as base64.
    var data: String
    var binary: Bool
    var mentionPids: [String]?
    var mentionAll: Bool
    var now: Int64
    /// How long after sending a message may be edited (ms).
    var window: Int64
}

extension StoreRules {
    /// The message as the edit leaves it, when `edit.editor` may edit it now: only its sender, within the
    /// window, and not once recalled. Both stores apply it inside their transactions.
    static func checkEdit(_ record: MessageRecord?, _ edit: MessageEdit) throws -> MessageRecord {
        guard var record, record.cid == edit.cid else {
            throw IMError(.messageNotFound, "message \(edit.messageID) is not in \(edit.cid)")
        }
        guard record.from == edit.editor else { throw IMError(.messageOwnershipRequired, "only the sender may edit a message") }
        guard !record.recalled else { throw IMError(.messageEditDisabled, "message \(edit.messageID) was recalled") }
        guard edit.now - record.t <= edit.window else {
            throw IMError(.messageEditDisabled, "the edit window of \(edit.window / 1000) s has passed")
        }
        record.data = edit.data
        record.binary = edit.binary
        record.mentionPids = edit.mentionPids?.isEmpty == false ? edit.mentionPids : nil
        record.mentionAll = edit.mentionAll
        // Each edit gets a newer patch time than the last, so clients keep the latest version.
        record.patchT = max(edit.now, (record.patchT ?? 0) + 1)
        return record
    }
}

/// A message's content as a client sent it: text (`msg`, or `data` in a patch) or bytes as base64
/// (`binaryMsg`), one of the two, within the size limit (4109).
enum MessageContent {
    static func read(text: String?, binary: String?, limit: Int) throws -> (data: String, binary: Bool) {
        switch (text, binary) {
        case (let text?, nil):
            guard text.utf8.count <= limit else {
                throw IMError(.frameTooLong, "message body is \(text.utf8.count) bytes; the limit is \(limit)")
            }
            return (text, false)
        case (nil, let base64?):
            guard let bytes = Data(base64Encoded: base64) else { throw IMError(.invalidField, "binaryMsg is not base64") }
            guard bytes.count <= limit else {
                throw IMError(.frameTooLong, "binary message is \(bytes.count) bytes; the limit is \(limit)")
            }
            return (bytes.base64EncodedString(), true)
        case (nil, nil):
            throw IMError(.invalidField, "missing field 'msg'")
        case (.some, .some):
            throw IMError(.invalidField, "a message has msg or binaryMsg, not both")
        }
    }
}
