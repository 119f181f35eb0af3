import Foundation
import GRDB
import IMCore
import NIOWebSocket
import Logging

/// Handles the commands of logged-in and logging-in connections. It knows nothing about the encoding
/// of frames: connections decode commands before handing them here and encode what it sends.
final class IMService: Sendable {
    let configuration: ServerConfiguration
    let db: DatabasePool
    let registry = SessionRegistry()
    let receipts = ReceiptTracker()
    let tokens: SessionTokens
    let pipeline: MessagePipeline
    let cursors: CursorWriter
    let logger: Logger

    init(configuration: ServerConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        db = try ServerDatabase.open(path: configuration.databasePath, synchronousFull: configuration.synchronousFull)
        tokens = SessionTokens(ttl: TimeInterval(configuration.sessionTokenTTL))
        pipeline = MessagePipeline(db: db, registry: registry, receipts: receipts, logger: logger)
        cursors = CursorWriter(db: db)
    }

    /// Handles one decoded command. Every request (a command with `i`) gets exactly one reply.
    func handle(_ command: Command, on connection: Connection) async {
        do {
            try await dispatch(command, on: connection)
        } catch let error as IMError {
            connection.send(Self.errorReply(error, to: command))
        } catch {
            logger.error("command failed", metadata: ["cmd": "\(command.cmd.rawValue)", "error": "\(error)"])
            connection.send(Self.errorReply(IMError(.internalError), to: command))
        }
    }

    /// The reply for a failed request: `ack` for messages, `session closed` for logins, `error` otherwise.
    static func errorReply(_ error: IMError, to command: Command?) -> Command {
        var reply: Command
        switch (command?.cmd, command?.op) {
        case (.direct?, _): reply = Command(cmd: .ack)
        case (.session?, .open?): reply = Command(cmd: .session, op: .closed)
        default: reply = Command(cmd: .error)
        }
        reply.i = command?.i
        reply.code = error.code
        reply.reason = error.reason
        reply.detail = error.detail
        reply.appCode = error.appCode
        return reply
    }

    private func dispatch(_ command: Command, on connection: Connection) async throws {
        if command.cmd == .session, command.op == .open {
            return try await openSession(command, on: connection)
        }
        if command.cmd == .echo {
            var reply = Command(cmd: .echo, i: command.i)
            reply.t = Identifiers.nowMillis()
            return connection.send(reply)
        }
        guard let identity = connection.identity else {
            throw IMError(.sessionRequired, "open a session first")
        }
        switch (command.cmd, command.op) {
        case (.session, .close?):
            connection.send(Command(cmd: .session, op: .closed, i: command.i))
            connectionClosed(connection)
            connection.close()
        case (.direct, _):
            try await sendMessage(command, from: identity.clientID, on: connection)
        case (.ack, _):
            await acknowledge(command, by: identity.clientID, on: connection)
        case (.conv, .start?):
            try await startConversation(command, by: identity.clientID, on: connection)
        case (.logs, _):
            try await history(command, for: identity.clientID, on: connection)
        default:
            throw IMError(.unknownCommand, "unsupported command \(command.cmd.rawValue) \(command.op?.rawValue ?? "")")
        }
    }

    // MARK: Sessions

    private func openSession(_ command: Command, on connection: Connection) async throws {
        if let current = connection.clientID {
            throw IMError(.invalidField, "session already open as \(current)")
        }
        if let error = ClientID.validate(command.peerId) { throw error }
        let clientID = command.peerId ?? ""
        let tag = command.tag.flatMap { $0.isEmpty ? nil : $0 }
        let deviceID = command.deviceId ?? "connection-\(connection.id)"
        if let tag {
            let forced = command.r != true
            let kicked = try await db.write { db -> Bool in
                let holder = try String.fetchOne(
                    db, sql: "SELECT device_id FROM device_tags WHERE client_id = ? AND tag = ?", arguments: [clientID, tag])
                if !forced, let holder, holder != deviceID { return true }
                try db.execute(
                    sql: "INSERT INTO device_tags (client_id, tag, device_id) VALUES (?, ?, ?) ON CONFLICT DO UPDATE SET device_id = excluded.device_id",
                    arguments: [clientID, tag, deviceID])
                return false
            }
            if kicked {
                throw IMError(.sessionConflict, "another device logged in with tag '\(tag)'; open with force to take over")
            }
            for other in registry.connections(of: clientID) where other.identity?.tag == tag {
                var closed = Command(cmd: .session, op: .closed)
                closed.code = IMErrorCode.sessionConflict.rawValue
                closed.reason = IMErrorCode.sessionConflict.reason
                closed.detail = "logged in on another device with tag '\(tag)'"
                other.send(closed)
                connectionClosed(other)
                other.close(code: .normalClosure, reason: "SESSION_CONFLICT")
            }
        }
        connection.setIdentity(.init(clientID: clientID, tag: tag, deviceID: deviceID))
        registry.add(connection, clientID: clientID)
        logger.info("session opened", metadata: ["client": "\(clientID)", "tag": "\(tag ?? "")", "conn": "\(connection.id)"])

        var opened = Command(cmd: .session, op: .opened, i: command.i)
        opened.peerId = clientID
        opened.st = tokens.issue(for: clientID)
        opened.stTtl = configuration.sessionTokenTTL
        opened.t = Identifiers.nowMillis()
        connection.send(opened)
        await deliverBacklog(to: connection, clientID: clientID)
    }

    /// Sends stored messages the client has not acknowledged, oldest first per conversation, then
    /// releases messages that arrived meanwhile.
    private func deliverBacklog(to connection: Connection, clientID: String) async {
        await cursors.flush()
        let limit = configuration.backlogLimitPerConversation
        let backlog = (try? await db.read { db -> [(records: [MessageRecord], hasMore: Bool)] in
            try ConversationStore.memberships(db, clientID: clientID).map { membership in
                let records = try MessageStore.backlog(
                    db, cid: membership.cid, clientID: clientID, after: membership.deliveredT, limit: limit + 1)
                return (Array(records.prefix(limit)), records.count > limit)
            }
        }) ?? []
        var sent = Set<String>()
        for (records, hasMore) in backlog {
            for (index, record) in records.enumerated() {
                if record.receipt { receipts.track(messageID: record.id, sender: record.from, cid: record.cid) }
                var command = MessagePipeline.directCommand(record, offline: true)
                if hasMore, index == records.count - 1 { command.hasMore = true }
                connection.send(command)
                sent.insert(record.id)
            }
        }
        connection.markReady(alreadySent: sent)
    }

    /// Forgets a connection that closed or was kicked.
    func connectionClosed(_ connection: Connection) {
        guard let identity = connection.identity else { return }
        registry.remove(connection, clientID: identity.clientID)
        connection.setIdentity(nil)
        logger.info("session closed", metadata: ["client": "\(identity.clientID)", "conn": "\(connection.id)"])
    }

    // MARK: Messages

    private func sendMessage(_ command: Command, from clientID: String, on connection: Connection) async throws {
        guard let cid = command.cid, !cid.isEmpty else { throw IMError(.invalidField, "missing field 'cid'") }
        guard let body = command.msg else { throw IMError(.invalidField, "missing field 'msg'") }
        if body.utf8.count > configuration.maxMessageBytes {
            throw IMError(.frameTooLong, "message body is \(body.utf8.count) bytes; the limit is \(configuration.maxMessageBytes)")
        }
        if let priority = command.priority, !["high", "normal", "low"].contains(priority) {
            throw IMError(.invalidField, "priority must be high, normal or low")
        }
        if command.transient == true {
            return try await sendTransient(command, cid: cid, body: body, from: clientID, on: connection)
        }
        await pipeline.enqueue(OutgoingMessage(
            cid: cid, from: clientID, data: body, receipt: command.r == true, priority: command.priority,
            dedupeToken: command.dt, mentionPids: command.mentionPids, mentionAll: command.mentionAll,
            sender: connection, serial: command.i))
    }

    /// Transient messages go to online members only and are never stored.
    private func sendTransient(_ command: Command, cid: String, body: String, from clientID: String,
                               on connection: Connection) async throws {
        let members = try await db.read { db -> [String]? in
            guard try ConversationStore.find(db, id: cid) != nil else { return nil }
            return try ConversationStore.members(db, cid: cid)
        }
        guard let members, members.contains(clientID) else {
            throw IMError(.invalidMessagingTarget, "conversation \(cid) does not exist or \(clientID) is not a member")
        }
        let t = Identifiers.nowMillis()
        let id = Identifiers.messageID()
        var direct = Command(cmd: .direct)
        direct.cid = cid
        direct.id = id
        direct.msg = body
        direct.fromPeerId = clientID
        direct.timestamp = t
        direct.transient = true
        for member in members where member != clientID {
            for other in registry.connections(of: member) { other.deliver(messageID: id, direct) }
        }
        var ack = Command(cmd: .ack, i: command.i)
        ack.uid = id
        ack.t = t
        connection.send(ack)
    }

    /// A client acknowledges delivered messages: the delivery cursor moves, and senders who asked for
    /// a receipt get an `rcp`.
    private func acknowledge(_ command: Command, by clientID: String, on connection: Connection) async {
        let ids = (command.ids ?? []) + [command.mid].compactMap { $0 }
        if let cid = command.cid, let t = command.t {
            await cursors.advance(CursorKey(cid: cid, clientID: clientID), to: t)
        }
        let now = Identifiers.nowMillis()
        for id in ids {
            guard let entry = receipts.entry(for: id), entry.sender != clientID else { continue }
            var rcp = Command(cmd: .rcp)
            rcp.id = id
            rcp.cid = entry.cid
            rcp.t = now
            rcp.from = clientID
            for sender in registry.connections(of: entry.sender) { sender.send(rcp) }
        }
        if let serial = command.i { connection.send(Command(cmd: .ack, i: serial)) }
    }

    // MARK: Conversations

    private func startConversation(_ command: Command, by clientID: String, on connection: Connection) async throws {
        let members = command.m ?? []
        if members.count > 1000 { throw IMError(.invalidField, "at most 1000 members at creation") }
        for member in members {
            if let error = ClientID.validate(member) { throw IMError(.invalidField, "member '\(member)': \(error.detail ?? error.reason)") }
        }
        if let attr = command.attr, attr.objectValue == nil { throw IMError(.invalidField, "attr must be a JSON object") }
        let now = Identifiers.nowMillis()
        let (record, _) = try await db.write { db in
            try ConversationStore.create(
                db, creator: clientID, members: members, name: command.name, attr: command.attr,
                unique: command.unique == true, transient: command.transient == true, now: now)
        }
        var reply = Command(cmd: .conv, op: .started, i: command.i)
        reply.cid = record.id
        reply.cdate = record.createdAt
        reply.unique = record.uniqueKey != nil ? true : nil
        connection.send(reply)
    }

    // MARK: History

    private func history(_ command: Command, for clientID: String, on connection: Connection) async throws {
        guard let cid = command.cid else { throw IMError(.invalidField, "missing field 'cid'") }
        let limit = command.limit ?? configuration.historyDefaultLimit
        guard limit >= 1 else { throw IMError(.invalidField, "limit must be at least 1") }
        let records = try await db.read { db -> [MessageRecord] in
            guard let conversation = try ConversationStore.find(db, id: cid) else {
                throw IMError(.invalidMessagingTarget, "conversation \(cid) does not exist")
            }
            if !conversation.transient, try !ConversationStore.isMember(db, cid: cid, clientID: clientID) {
                throw IMError(.conversationLogRejected, "\(clientID) is not a member of \(cid)")
            }
            return try MessageStore.history(
                db, cid: cid, limit: min(limit, self.configuration.historyMaxLimit), beforeT: command.t, afterT: command.tt)
        }
        var reply = Command(cmd: .logs, i: command.i)
        reply.cid = cid
        reply.logs = records.map(\.logItem)
        connection.send(reply)
    }
}
