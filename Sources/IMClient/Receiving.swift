import Foundation
import IMCore

/// What arrives on the link: replies to requests and the login, and commands the server sends on its own
/// (no `i`) turned into events.
extension IMClient {
    func receive(_ command: Command, on link: Link) {
        // The login is read in place: binding it copies the whole value (a `Command` among its fields) for every
        // command received (issue 30).
        if let serial = command.i, serial == login?.serial, login?.link.id == link.id, let login {
            return completeLogin(login, reply: command)
        }
        guard self.link?.id == link.id else { return }
        if let serial = command.i {
            if serial == rejoinSerial { return completeRejoin(command) }
            if pending[serial]?.written == true { resolve(serial, .success(command)) }
            return
        }
        if command.cmd == .session, command.op == .closed {
            if command.code != nil, let error = IMError(reply: command) { kicked(error) }
            return
        }
        dispatchEvent(command, on: link)
    }

    /// The commands of one read from the socket, in order; the acks they call for leave together after the
    /// last one (one `ack` per conversation), without a task of their own.
    func receive(_ commands: [Command], on link: Link) {
        receivingBatch = true
        for command in commands { receive(command, on: link) }
        receivingBatch = false
        if !unacknowledged.isEmpty { flushAcknowledgements(on: link) }
    }

    func receiveUndecodable(_ text: String, on link: Link) {
        guard self.link?.id == link.id else { return }
        hub.emit(.undecodable(text))
    }

    /// Remembers a received message id; false when it was seen before.
    func markSeen(_ id: String) -> Bool { seen.insert(id) }

    func dispatchEvent(_ command: Command, on link: Link) {
        switch (command.cmd, command.op) {
        case (.direct, _):
            receiveDirect(command, on: link)
        case (.rcp, _):
            guard let cid = command.cid, let from = command.from else { return hub.emit(.unhandled(command)) }
            let receipt = IMReceipt(conversationId: cid, messageId: command.id, by: from, timestamp: command.t ?? 0)
            hub.emit(command.read == true ? .read(receipt) : .delivered(receipt))
        case (.unread, _):
            hub.emit(.unread((command.convs ?? []).map(unreadCount)))
        case (.patch, .modify?):
            for patch in command.patches ?? [] {
                if let t = patch.patchTimestamp { lastPatchTime = max(lastPatchTime ?? t, t) }
                hub.emit(patch.recall == true ? .recalled(recalledMessage(patch)) : .edited(editedMessage(patch)))
            }
        case (.conv, let op?):
            conversationEvent(command, op: op)
        default:
            hub.emit(.unhandled(command))
        }
    }

    private func receiveDirect(_ command: Command, on link: Link) {
        guard let cid = command.cid, let id = command.id else { return hub.emit(.unhandled(command)) }
        let timestamp = command.timestamp ?? 0
        let from = command.fromPeerId ?? ""
        if let action = command.action {
            guard markSeen(id) else { return }
            hub.emit(
                .cmd(
                    IMCmdMessage(
                        id: id, conversationId: cid, from: from, timestamp: timestamp, action: action,
                        ext: command.ext ?? [:])))
            return
        }
        let transient = command.transient == true
        let isNew = markSeen(id)
        if isNew {
            var message = IMMessage(
                id: id, conversationId: cid, from: from, timestamp: timestamp,
                content: .decode(command.msg ?? "", registry: registry), body: command.msg, status: .received)
            message.isTransient = transient
            message.isOffline = command.offline == true
            message.receiptRequested = command.r == true
            message.priority = command.priority.flatMap(IMMessagePriority.init(rawValue:))
            message.mentionPids = command.mentionPids
            message.mentionAll = command.mentionAll
            message.binary = command.binaryMsg.flatMap { Data(base64Encoded: $0) }
            message.editedAt = command.patchTimestamp
            if !transient { noteLastMessage(cid: cid, id: id, timestamp: timestamp) }
            hub.emit(.message(message))
        }
        if !transient { acknowledgeLater(id, in: cid, on: link) }
    }

    /// Queues an ack; acks of messages that arrive together leave as one `ack` per conversation.
    private func acknowledgeLater(_ id: String, in cid: String, on link: Link) {
        unacknowledged[cid, default: []].append(id)
        guard !ackFlushScheduled, !receivingBatch else { return }
        ackFlushScheduled = true
        Task { self.flushAcknowledgements(on: link) }
    }

    private func flushAcknowledgements(on link: Link) {
        ackFlushScheduled = false
        let batches = unacknowledged
        unacknowledged.removeAll()
        for (cid, ids) in batches {
            var ack = Command(cmd: .ack)
            ack.cid = cid
            ack.ids = ids
            try? link.send(ack)
        }
    }

    func noteLastMessage(cid: String, id: String, timestamp: Int64) {
        if let last = lastMessages[cid], last.timestamp > timestamp { return }
        lastMessages[cid] = (id, timestamp)
    }

    private func unreadCount(_ info: UnreadInfo) -> IMUnreadCount {
        var last: IMMessage?
        if let mid = info.mid, let timestamp = info.timestamp, let data = info.data {
            let from = info.from ?? ""
            last = IMMessage(
                id: mid, conversationId: info.cid, from: from, timestamp: timestamp,
                content: .decode(data, registry: registry), body: data,
                status: from == clientId ? .sent : .received)
            noteLastMessage(cid: info.cid, id: mid, timestamp: timestamp)
        }
        return IMUnreadCount(conversationId: info.cid, count: info.unread, lastMessage: last)
    }

    func recalledMessage(_ patch: PatchItem) -> IMMessage {
        let placeholder = TypedMessage(type: MessageType.recalled.rawValue).encoded()
        let body = patch.data ?? placeholder
        return IMMessage(
            id: patch.mid, conversationId: patch.cid, from: patch.from ?? "", timestamp: patch.timestamp,
            content: .decode(body, registry: registry), body: body, status: .recalled)
    }

    private func conversationEvent(_ command: Command, op: OpType) {
        guard let cid = command.cid else { return hub.emit(.unhandled(command)) }
        let by = command.initBy
        switch op {
        case .joined: hub.emit(.joined(conversationId: cid, by: by))
        case .invited: hub.emit(.invited(conversationId: cid, by: by))
        case .kicked: hub.emit(.kicked(conversationId: cid, by: by))
        case .left: hub.emit(.left(conversationId: cid, by: by))
        case .membersJoined:
            hub.emit(.membersJoined(conversationId: cid, members: command.m ?? [], by: by, founding: command.cdate != nil))
        case .membersLeft: hub.emit(.membersLeft(conversationId: cid, members: command.m ?? [], by: by))
        case .updated:
            hub.emit(
                .conversationUpdated(
                    conversationId: cid, patch: command.attr?.objectValue ?? [:], by: by,
                    updatedAt: command.udate))
        default: if !memberControlEvent(command, cid: cid, op: op) { hub.emit(.unhandled(command)) }
        }
    }
}
