import Foundation
import IMCore

/// Message edits: `patch modify` whose item is not a recall (the SDKs' `conversation.update(old, new)`), and
/// the recalls and edits a reconnecting client missed.
extension IMService {
    /// `patch modify`: one item, a recall (`recall: true`) or an edit (new `data` or `binaryMsg`).
    func patchMessage(_ command: Command, by clientID: String, on connection: Connection) async throws {
        guard let patches = command.patches, patches.count == 1, let patch = patches.first else {
            throw IMError(.invalidField, "patches must hold one item")
        }
        if patch.recall == true { return try await recall(command, by: clientID, on: connection) }
        try await edit(patch, serial: command.i, by: clientID, on: connection)
    }

    /// Replaces the content of a message its sender sent within the edit window (the recall window). The
    /// interceptor reviews the new content as it reviews a send: a drop leaves the old content and fails
    /// the edit with 4405, a modify stores the content it gives. The other members get `patch modify`
    /// with the new content and `patchTimestamp`; history and offline delivery carry the latest version.
    private func edit(_ patch: PatchItem, serial: Int?, by clientID: String, on connection: Connection) async throws {
        // An edit is a new way to say something: a muted member cannot edit either (4905).
        try await refuseIfMuted(cid: patch.cid, sender: clientID)
        var (data, binary) = try MessageContent.read(text: patch.data, binary: patch.binaryMsg, limit: configuration.maxMessageBytes)
        // As for a send: a file message's url and metaData are the server's (docs/MEDIA.md).
        if !binary, let filled = try await filledFileMessage(data, from: clientID) { data = filled }
        if let mentions = patch.mentionPids, !mentions.isEmpty { _ = try validatedMembers(mentions, field: "mentionPids") }
        var edit = MessageEdit(
            cid: patch.cid, messageID: patch.mid, editor: clientID, data: data, binary: binary, mentionPids: patch.mentionPids,
            mentionAll: patch.mentionAll == true, now: Identifiers.nowMillis(), window: Int64(configuration.recallWindow) * 1000)
        // Refuse what the store would refuse before asking the interceptor about it.
        _ = try StoreRules.checkEdit(try await store.message(patch.mid), edit)
        if interceptors.isActive, interceptors.inScope(patch.cid), !interceptors.isInterceptor(clientID) {
            await interception.admission.enter(connection.id)
            let verdict = await interceptors.review(.edit(edit))
            interception.admission.leave(connection.id)
            switch verdict {
            case .allow:
                break
            case .modify(let body, _):
                if let body {
                    edit.data = body
                    edit.binary = false
                }
            case .drop(let error, let silent):
                metrics.command(.patch, .modify, code: IMErrorCode.messageUpdateRejectedByApp.rawValue)
                if silent {
                    // As for a silently dropped send: the editor sees success, nothing changes.
                    var reply = Command(cmd: .patch, op: .modified, i: serial)
                    reply.t = Identifiers.nowMillis()
                    return connection.send(reply)
                }
                throw IMError(.messageUpdateRejectedByApp, error.detail ?? error.reason, appCode: error.appCode)
            }
        }
        edit.now = Identifiers.nowMillis()
        let (record, conversation, members) = try await store.edit(edit)
        var reply = Command(cmd: .patch, op: .modified, i: serial)
        reply.t = record.patchT
        connection.send(reply)

        var event = Command(cmd: .patch, op: .modify)
        event.patches = [Self.patchItem(record)]
        if conversation.transient {
            await notifyRoom(record.cid, event, except: connection)
        } else {
            await notify(members, event, except: connection)
        }
    }

    /// The `patch modify` item that tells members about an edited message: its latest version.
    static func patchItem(_ record: MessageRecord) -> PatchItem {
        var item = PatchItem(cid: record.cid, mid: record.id, timestamp: record.t)
        if record.binary { item.binaryMsg = record.data } else { item.data = record.data }
        item.from = record.from
        item.patchTimestamp = record.patchT
        item.mentionPids = record.mentionPids
        item.mentionAll = record.mentionAll ? true : nil
        return item
    }

    // MARK: Patches missed while offline

    /// At most this many missed recalls and edits are pushed at login; older ones show in history.
    static let missedPatchLimit = 200

    /// After `session opened` with `lastPatchTime`: the recalls and edits made since then in the client's
    /// conversations, as `patch modify` pushes (LeanCloud's SDKs raise MESSAGE_RECALL / MESSAGE_UPDATE only
    /// from these), oldest first, in frames of at most `maxLogsReplyBytes` of content.
    func pushMissedPatches(to connection: Connection, clientID: String, after lastPatchTime: Int64) async {
        let records: [MessageRecord]
        do {
            records = try await store.patchedMessages(clientID: clientID, after: lastPatchTime, limit: Self.missedPatchLimit)
        } catch {
            logger.error("missed patches failed", metadata: ["client": "\(clientID)", "error": "\(error)"])
            return
        }
        var items: [PatchItem] = []
        var bytes = 0
        func flush() {
            guard !items.isEmpty else { return }
            var push = Command(cmd: .patch, op: .modify)
            push.patches = items
            connection.send(push)
            items = []
            bytes = 0
        }
        for record in records {
            var item = Self.patchItem(record)
            if record.recalled { item.recall = true }
            if bytes + record.data.utf8.count > Self.maxLogsReplyBytes { flush() }
            items.append(item)
            bytes += record.data.utf8.count + 64
        }
        flush()
    }
}
