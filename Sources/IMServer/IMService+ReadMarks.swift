import Foundation
import IMCore

/// Read marks, receipts (`conv max-read`, also for every member) and unread counts.
extension IMService {
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

    /// `conv max-read` with `queryAllMembers`: each other member's delivery cursor and read mark, as the
    /// JS SDK's group receipts (`_fetchAllReceiptTimestamps`) read them from `maxReadTuples`.
    func memberReceiptTimestamps(_ command: Command, for clientID: String, on connection: Connection) async throws {
        let cid = try requiredCID(command)
        var reply = Command(cmd: .conv, op: .maxRead, i: command.i)
        reply.cid = cid
        reply.maxReadTuples = try await store.memberReceiptTimestamps(cid: cid, clientID: clientID)
        connection.send(reply)
    }
}
