import Foundation
import IMCore
import IMSignatures
import NIOWebSocket

/// Login, single-device tags, logout and offline backlog.
extension IMService {

    func openSession(_ command: Command, on connection: Connection) async throws {
        if let current = connection.clientID {
            throw IMError(.invalidField, "session already open as \(current)")
        }
        if let error = ClientID.validate(command.peerId) { throw error }
        let clientID = command.peerId ?? ""
        // A session token issued to this client id resumes an earlier authenticated login.
        var resumesWithToken = false
        if let token = command.st { resumesWithToken = try await tokens.clientID(for: token) == clientID }
        if isInterceptorID(clientID) {
            // Interceptors sign with their own secret (or the master key), whatever the app's setting.
            if !resumesWithToken { try await authenticateInterceptor(command, clientID: clientID) }
        } else if let signatures {
            if command.st != nil {
                guard resumesWithToken else {
                    throw IMError(.sessionTokenExpired, "session token is unknown or expired; log in with a signature")
                }
            } else {
                try await signatures.verify(.open, by: clientID, command: command, failure: .signatureFailed)
            }
        }
        let tag = command.tag.flatMap { $0.isEmpty ? nil : $0 }
        let deviceID = command.deviceId ?? "connection-\(connection.id)"
        var generation: Int64 = 0
        if let tag {
            let forced = command.r != true
            guard let claimed = try await store.claimTag(clientID: clientID, tag: tag, deviceID: deviceID, forced: forced) else {
                throw IMError(.sessionConflict, "another device logged in with tag '\(tag)'; open with force to take over")
            }
            generation = claimed
        }
        let token = try await tokens.issue(for: clientID)
        let pushToken = try await registerLoginDevice(command, clientID: clientID)
        connection.setIdentity(
            .init(clientID: clientID, tag: tag, deviceID: deviceID, sessionToken: token, tagGeneration: generation, deviceToken: pushToken))
        // The reply goes out before the session is registered, so a racing login that takes the tag kicks
        // it only after it was told it had opened.
        var opened = Command(cmd: .session, op: .opened, i: command.i)
        opened.peerId = clientID
        opened.st = token
        opened.stTtl = configuration.sessionTokenTTL
        let openedAt = Identifiers.nowMillis()
        opened.t = openedAt
        connection.send(opened)
        metrics.sessionOpened(connection.transport.format)
        memoryTrim.noteSession()
        for other in registry.add(connection, clientID: clientID, tag: tag) { kick(other, tag: tag) }
        // A login that raced the shutdown's goaway (its reply went out before it was registered, so goAway()
        // did not see it) is told now.
        if goingAway.load(ordering: .sequentiallyConsistent) { connection.send(Command(cmd: .goaway)) }
        if let cluster {
            await cluster.sessionOpened(connection.id, clientID: clientID, tag: tag, interceptor: interceptors.isInterceptor(clientID))
            if let tag {
                await cluster.announce(
                    .kick(clientID: clientID, tag: tag, generation: generation, keep: .init(node: cluster.id, connection: connection.id)))
            }
        }
        if interceptors.isInterceptor(clientID) { interceptors.attach(connection, as: clientID) }
        logger.info("session opened", metadata: ["client": "\(clientID)", "tag": "\(tag ?? "")", "conn": "\(connection.id)"])
        do {
            let unread = try await unreadCounts(for: clientID)
            if !unread.isEmpty {
                var notice = Command(cmd: .unread)
                notice.convs = unread
                notice.t = Identifiers.nowMillis()
                connection.send(notice)
            }
        } catch {
            logger.error("unread counts failed", metadata: ["client": "\(clientID)", "error": "\(error)"])
        }
        if let lastPatchTime = command.lastPatchTime {
            await pushMissedPatches(to: connection, clientID: clientID, after: lastPatchTime)
        }
        if connection.transport.notifiesUnreadOnly {
            // Protocol version 3: the unread notice stands for the backlog; the client pulls it with `logs`.
            connection.markReady(alreadySent: [])
        } else {
            await deliverBacklog(to: connection, clientID: clientID, openedAt: openedAt)
        }
    }

    /// Sends stored messages the client has not acknowledged, oldest first per conversation, then
    /// releases messages that arrived meanwhile. The backlog is read after `session opened` went out, so it
    /// may hold messages sent since; only those stored before the session opened are flagged `offline` (the
    /// others reach the client once, through the backlog, as the live messages they are). Offline: timestamped before
    /// `openedAt`, or not held by the session (held: delivered to it after it was registered, on this node or from
    /// another). The timestamp alone is not enough: a conversation that stores more than one message a millisecond gives
    /// each one above the one before, so the last messages of a burst stored and acknowledged before the login carry
    /// timestamps after it. In a cluster, such a message stored through another node whose notice reaches this node only
    /// after the registration is held, and so flagged live.
    func deliverBacklog(to connection: Connection, clientID: String, openedAt: Int64) async {
        await pipeline.flush()
        let limit = configuration.backlogLimitPerConversation
        let backlog: [(records: [MessageRecord], hasMore: Bool)]
        do {
            backlog = try await store.backlog(clientID: clientID, limit: limit)
        } catch {
            // The client is told, rather than left believing it has everything.
            logger.error("offline backlog failed", metadata: ["client": "\(clientID)", "error": "\(error)"])
            connection.send(Self.errorReply(IMError(.internalError, "offline messages could not be read; fetch them with logs"), to: nil))
            backlog = []
        }
        // Read after the backlog, so that it holds the messages stored since the registration and published by then; one
        // published later than this is flagged offline though it is just after the login (the safe side).
        let live = connection.heldMessageIDs()
        var sent = Set<String>()
        for (records, hasMore) in backlog {
            for (index, record) in records.enumerated() {
                if record.receipt { receipts.track(messageID: record.id, sender: record.from, cid: record.cid) }
                var command = MessagePipeline.directCommand(record, offline: record.t < openedAt || !live.contains(record.id))
                if hasMore, index == records.count - 1 { command.hasMore = true }
                connection.send(command)
                sent.insert(record.id)
            }
        }
        metrics.messagesDeliveredOffline.increment(by: sent.count)
        connection.markReady(alreadySent: sent)
    }

    /// Closes a session whose tag another login took (4111).
    func kick(_ connection: Connection, tag: String?) {
        var closed = Command(cmd: .session, op: .closed)
        closed.code = IMErrorCode.sessionConflict.rawValue
        closed.reason = IMErrorCode.sessionConflict.reason
        closed.detail = "logged in on another device with tag '\(tag ?? "")'"
        connection.send(closed)
        connectionClosed(connection)
        connection.close(code: .normalClosure, reason: "SESSION_CONFLICT")
    }

    /// Forgets a connection that closed or was kicked.
    func connectionClosed(_ connection: Connection) {
        wills.discard(connection.id)
        guard let identity = connection.identity else { return }
        registry.remove(connection, clientID: identity.clientID)
        metrics.sessionClosed(connection.transport.format)
        memoryTrim.noteSession()
        rooms.leave(connection)
        if let cluster { Task { await cluster.sessionClosed(connection.id) } }
        interceptors.detach(connection)
        connection.setIdentity(nil)
        logger.info("session closed", metadata: ["client": "\(identity.clientID)", "conn": "\(connection.id)"])
    }

    /// `session query`: which of up to 20 client ids are logged in somewhere (on any node).
    func onlineStatus(_ command: Command, on connection: Connection) async throws {
        let ids = try validatedMembers(command.sessionPeerIds, field: "sessionPeerIds")
        guard ids.count <= 20 else { throw IMError(.invalidField, "at most 20 ids in 'sessionPeerIds'") }
        var reply = Command(cmd: .session, op: .queryResult, i: command.i)
        let elsewhere = try await cluster?.online(ids) ?? []
        reply.onlineSessionPeerIds = ids.filter { !registry.connections(of: $0).isEmpty || elsewhere.contains($0) }
        connection.send(reply)
    }

    /// Forgets every session of a transport that ended.
    func transportClosed(_ transport: Transport) {
        for connection in transport.connections {
            // A connection that dropped without `session close` sends its will message.
            if let will = wills.take(connection.id) { Task { await self.sendWill(will, of: connection) } }
            connectionClosed(connection)
            connection.close(code: .goingAway)
        }
    }

    /// Sends `goaway` once on every transport with a logged-in session (the server is shutting down).
    func goAway() {
        goingAway.store(true, ordering: .sequentiallyConsistent)
        wills.discardAll()
        var told = Set<ObjectIdentifier>()
        for connection in registry.allConnections where told.insert(ObjectIdentifier(connection.transport)).inserted {
            connection.send(Command(cmd: .goaway))
        }
    }
}
