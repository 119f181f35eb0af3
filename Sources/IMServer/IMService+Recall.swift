import Foundation
import IMCore

/// Recall: `patch modify` with `recall: true`, by the sender, or by the owner or a manager as the sender.
extension IMService {
    func recall(_ command: Command, by clientID: String, on connection: Connection) async throws {
        guard let patches = command.patches, patches.count == 1, let patch = patches.first, patch.recall == true else {
            throw IMError(.invalidField, "patches must hold one item with recall: true")
        }
        let now = Identifiers.nowMillis()
        let window = Int64(configuration.recallWindow) * 1000
        // The owner and managers recall others' messages as their sender would (see `recallingAs`).
        let recaller = try await recallingAs(patch, by: clientID)
        let (record, conversation, members) = try await store.recall(
            cid: patch.cid, messageID: patch.mid, by: recaller, now: now, window: window)
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
        if conversation.transient {
            await notifyRoom(record.cid, event, except: connection)
        } else {
            await notify(members, event, except: connection)
        }
    }

    /// Whose recall `clientID`'s `patch modify` is: its own, or, for another member's message, the sender's
    /// when `clientID` is the conversation's owner or a manager above the sender (the role table). Anything
    /// else is left to the store's checks (4404, 4403).
    func recallingAs(_ patch: PatchItem, by clientID: String) async throws -> String {
        guard let message = try await store.message(patch.mid), message.cid == patch.cid, message.from != clientID else {
            return clientID
        }
        let record = try StoreRules.existing(await store.conversation(patch.cid), patch.cid)
        let controls = try await memberControls(patch.cid)
        let role = actingRole(clientID, in: record, controls)
        guard role >= .manager else {
            throw IMError(.messageOwnershipRequired, "only the sender, the owner or a manager of \(patch.cid) may recall a message")
        }
        if !interceptors.isInterceptor(clientID), try await !store.isMember(clientID, of: patch.cid) {
            throw IMError(.messageOwnershipRequired, "\(clientID) is not a member of \(patch.cid)")
        }
        try StoreRules.authorizeModeration(
            "recall the messages of", cid: patch.cid, actor: clientID, actorRole: role,
            targets: [(message.from, controls.role(of: message.from, in: record))])
        return message.from
    }
}
