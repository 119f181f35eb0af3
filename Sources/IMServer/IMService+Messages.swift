import Foundation
import IMCore
import NIOWebSocket

/// Sending messages and acknowledging deliveries.
extension IMService {

    func sendMessage(_ command: Command, from clientID: String, on connection: Connection) async throws {
        if command.will == true { return try await holdWill(command, from: clientID, on: connection) }
        let cid = try requiredCID(command)
        try await refuseIfMuted(cid: cid, sender: clientID)
        if command.action != nil {
            return try await sendCmdMessage(command, cid: cid, from: clientID, on: connection)
        }
        var (body, binary) = try MessageContent.read(text: command.msg, binary: command.binaryMsg, limit: configuration.maxMessageBytes)
        // A file message's url and metaData are the server's (docs/MEDIA.md), before review and storage.
        if !binary, let filled = try await filledFileMessage(body, from: clientID) { body = filled }
        if let priority = command.priority, !["high", "normal", "low"].contains(priority) {
            throw IMError(.invalidField, "priority must be high, normal or low")
        }
        if let mentions = command.mentionPids, !mentions.isEmpty { _ = try validatedMembers(mentions, field: "mentionPids") }
        if command.transient == true {
            var direct = Command(cmd: .direct)
            if binary { direct.binaryMsg = body } else { direct.msg = body }
            direct.transient = true
            return try await broadcastOnline(direct, cid: cid, from: clientID, on: connection, serial: command.i)
        }
        var message = OutgoingMessage(
            cid: cid, from: clientID, data: body, receipt: command.r == true, priority: command.priority,
            dedupeToken: command.dt, mentionPids: command.mentionPids, mentionAll: command.mentionAll,
            sender: connection, serial: command.i)
        message.binary = binary
        if let pushData = command.pushData {
            guard pushData.utf8.count <= 4096 else { throw IMError(.invalidField, "pushData is over 4096 bytes") }
            message.pushData = pushData
        }
        if interceptors.isActive, interceptors.inScope(cid), !interceptors.isInterceptor(clientID) {
            // Backpressure: a sender with too many messages under review waits here, unread further.
            await interception.admission.enter(connection.id)
            interception.submit(message)
        } else {
            pipeline.enqueue(message)
        }
    }

    /// Cmd messages (action + ext) go to online members only and are never stored.
    private func sendCmdMessage(_ command: Command, cid: String, from clientID: String, on connection: Connection) async throws {
        guard let action = command.action, !action.isEmpty, action.count <= 128 else {
            throw IMError(.invalidField, "action must be 1–128 characters")
        }
        if action.hasPrefix("_") || action.hasPrefix("hookbot.") {
            throw IMError(.invalidField, "actions starting with '_' or 'hookbot.' are reserved")
        }
        let ext = command.ext ?? [:]
        if ext.count > 64 { throw IMError(.invalidField, "ext has more than 64 keys") }
        for (key, value) in ext {
            switch value {
            case .string, .int, .double, .bool: continue
            default: throw IMError(.invalidField, "ext.\(key) must be a string, number or bool")
            }
        }
        if JSONValue.object(ext).jsonString().utf8.count > configuration.maxMessageBytes {
            throw IMError(.frameTooLong, "ext is larger than \(configuration.maxMessageBytes) bytes")
        }
        var direct = Command(cmd: .direct)
        direct.action = action
        direct.ext = ext
        try await broadcastOnline(direct, cid: cid, from: clientID, on: connection, serial: command.i)
    }

    /// Delivers an unstored message (transient or cmd) to the online members of a conversation, or to the
    /// clients in a chat room, and acks it.
    private func broadcastOnline(
        _ template: Command, cid: String, from clientID: String, on connection: Connection,
        serial: Int?
    ) async throws {
        guard let conversation = try await store.conversation(cid) else {
            throw IMError(.invalidMessagingTarget, "conversation \(cid) does not exist")
        }
        let members = conversation.transient ? nil : try await store.members(of: cid)
        let recipients: [Connection]
        if let members {
            guard members.contains(clientID) else {
                throw IMError(.invalidMessagingTarget, "\(clientID) is not a member of \(cid)")
            }
            recipients = members.flatMap { registry.connections(of: $0) }
        } else {
            guard rooms.room(of: connection) == cid else {
                throw IMError(.invalidMessagingTarget, "join the chat room \(cid) first")
            }
            recipients = rooms.connections(in: cid)
        }
        var direct = template
        direct.cid = cid
        direct.id = Identifiers.messageID()
        direct.fromPeerId = clientID
        direct.timestamp = Identifiers.nowMillis()
        deliverLocally(direct, to: recipients)
        if let cluster {
            await cluster.announce(members.map { .clients($0, direct, origin: cluster.id) } ?? .room(cid, direct, origin: cluster.id))
        }
        var ack = Command(cmd: .ack, i: serial)
        ack.uid = direct.id
        ack.t = direct.timestamp
        connection.send(ack)
    }

    /// A client acknowledges delivered messages (by id, or as a timestamp range `tt`…`t`): the delivery
    /// cursor moves, and senders who asked for a receipt get an `rcp`.
    func acknowledge(_ command: Command, by clientID: String, on connection: Connection) async {
        let ids = (command.ids ?? []) + [command.mid].compactMap { $0 }
        if let cid = command.cid {
            let through = command.tt.flatMap { from in command.t.flatMap { $0 >= from ? $0 : nil } }
            pipeline.advance(CursorKey(cid: cid, clientID: clientID), acknowledging: ids, through: through)
        }
        let now = Identifiers.nowMillis()
        let tracked = ids.compactMap { id in receipts.entry(for: id).map { (id: id, entry: $0) } }
            .filter { $0.entry.sender != clientID }
        // Only a member of a message's conversation can have received it: nobody else produces its receipt.
        let conversations = Set(tracked.map(\.entry.cid))
        let memberOf =
            conversations.isEmpty
            ? []
            : await conversations.asyncFilter { (try? await store.isMember(clientID, of: $0)) == true }
        for (id, entry) in tracked where memberOf.contains(entry.cid) {
            var rcp = Command(cmd: .rcp)
            rcp.id = id
            rcp.cid = entry.cid
            rcp.t = now
            rcp.from = clientID
            await notify([entry.sender], rcp)
        }
        if let serial = command.i { connection.send(Command(cmd: .ack, i: serial)) }
    }
}
