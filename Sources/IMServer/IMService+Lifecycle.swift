import Foundation
import IMCore

/// Recall, read state and unread counts.
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

    func markRead(_ command: Command, by clientID: String, on connection: Connection) async throws {
        let cid = try requiredCID(command)
        let (readT, receipts) = try await store.markRead(cid: cid, clientID: clientID, messageID: command.mid, t: command.t)
        // Only a request with `i` is answered: LeanCloud's SDKs send `read` without one and expect nothing
        // back (an unsolicited `read` reaches their apps as UNHANDLED_MESSAGE).
        if let serial = command.i {
            var reply = Command(cmd: .read, i: serial)
            reply.cid = cid
            reply.t = readT
            connection.send(reply)
        }
        for receipt in receipts {
            var rcp = Command(cmd: .rcp)
            rcp.cid = cid
            rcp.id = receipt.id
            rcp.t = readT
            rcp.read = true
            rcp.from = clientID
            await notify([receipt.sender], rcp)
        }
    }

    /// `conv max-read`: how far the other members of a conversation have acknowledged (received) and read
    /// it, as the newest of their delivery cursors and read marks. Members only (4317).
    func receiptTimestamps(_ command: Command, for clientID: String, on connection: Connection) async throws {
        if command.queryAllMembers == true { return try await memberReceiptTimestamps(command, for: clientID, on: connection) }
        let cid = try requiredCID(command)
        let (readT, deliveredT) = try await store.receiptTimestamps(cid: cid, clientID: clientID)
        var reply = Command(cmd: .conv, op: .maxRead, i: command.i)
        reply.cid = cid
        reply.maxReadTimestamp = readT
        reply.maxAckTimestamp = deliveredT
        connection.send(reply)
    }

    /// Unread counts per conversation, sent right after login: messages after the member's read mark
    /// that others sent and the member may see, with the newest message and whether any mentions them.
    func unreadCounts(for clientID: String) async throws -> [UnreadInfo] {
        try await store.unreadCounts(clientID: clientID)
    }
}
