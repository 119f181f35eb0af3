import Foundation
import GRDB
import IMCore
import IMSignatures

/// Joining, inviting, quitting and kicking, with their events; chat-room presence.
extension IMService {
    func addMembers(_ command: Command, by clientID: String, on connection: Connection) async throws {
        let cid = try requiredCID(command)
        let requested = command.op == .join ? [clientID] : try validatedMembers(command.m, field: "m")
        let now = Identifiers.nowMillis()
        let selfJoin = requested == [clientID]
        try await signatures?.verify(
            selfJoin ? .join(conversationId: cid) : .invite(conversationId: cid, members: requested), by: clientID,
            command: command, failure: .conversationSignatureFailed)
        // Interceptors review only changes the server would make: authorize first (and again in the write).
        _ = try await db.read { db in try Self.authorizeAdding(db, cid: cid, actor: clientID, selfJoin: selfJoin) }
        try await reviewMembership(cid: cid, actor: clientID, members: requested, action: selfJoin ? "join" : "invite")
        let change = try await db.write { db -> (record: ConversationRecord, added: [String], members: [String]) in
            let record = try Self.authorizeAdding(db, cid: cid, actor: clientID, selfJoin: selfJoin)
            if record.transient { return (record, [clientID], []) }
            let added = try ConversationStore.addMembers(db, cid: cid, clientIDs: requested, now: now)
            return (record, added, try ConversationStore.members(db, cid: cid))
        }
        if change.record.transient {
            rooms.enter(connection, room: cid)
        }
        var reply = Command(cmd: .conv, op: .added, i: command.i)
        reply.cid = cid
        reply.m = change.added
        // Members already in the conversation count as added: the request's outcome holds for them.
        reply.allowedPids = change.record.transient ? [clientID] : requested.filter(change.members.contains)
        connection.send(reply)
        guard !change.record.transient, !change.added.isEmpty else { return }

        for member in change.added {
            var event = Command(cmd: .conv, op: member == clientID ? .joined : .invited)
            event.cid = cid
            event.initBy = clientID
            notify([member], event)
        }
        var joined = Command(cmd: .conv, op: .membersJoined)
        joined.cid = cid
        joined.m = change.added
        joined.initBy = clientID
        notify(change.members, joined)
    }

    func removeMembers(_ command: Command, by clientID: String, on connection: Connection) async throws {
        let cid = try requiredCID(command)
        let requested = command.op == .quit ? [clientID] : try validatedMembers(command.m, field: "m")
        if requested != [clientID] {
            try await signatures?.verify(
                .kick(conversationId: cid, members: requested), by: clientID,
                command: command, failure: .conversationSignatureFailed)
        }
        _ = try await db.read { db in try Self.authorizeRemoving(db, cid: cid, actor: clientID, requested: requested) }
        try await reviewMembership(cid: cid, actor: clientID, members: requested, action: requested == [clientID] ? "quit" : "kick")
        let change = try await db.write { db -> (record: ConversationRecord, removed: [String], remaining: [String]) in
            let record = try Self.authorizeRemoving(db, cid: cid, actor: clientID, requested: requested)
            if record.transient { return (record, [clientID], []) }
            let removed = try ConversationStore.removeMembers(db, cid: cid, clientIDs: requested)
            return (record, removed, try ConversationStore.members(db, cid: cid))
        }
        if change.record.transient {
            rooms.leave(connection, room: cid)
        }
        var reply = Command(cmd: .conv, op: .removed, i: command.i)
        reply.cid = cid
        reply.m = change.removed
        reply.allowedPids = change.removed
        let notMembers = requested.filter { !change.removed.contains($0) }
        if !notMembers.isEmpty {
            reply.failedPids = [FailedPids(pids: notMembers, error: IMError(.invalidMessagingTarget, "not a member of \(cid)"))]
        }
        connection.send(reply)
        guard !change.record.transient, !change.removed.isEmpty else { return }

        for member in change.removed {
            var event = Command(cmd: .conv, op: member == clientID ? .left : .kicked)
            event.cid = cid
            event.initBy = clientID
            notify([member], event)
        }
        var left = Command(cmd: .conv, op: .membersLeft)
        left.cid = cid
        left.m = change.removed
        left.initBy = clientID
        notify(change.remaining, left)
    }

    /// The conversation, when `actor` may add members to it (itself, with `selfJoin`).
    private static func authorizeAdding(_ db: Database, cid: String, actor: String, selfJoin: Bool) throws -> ConversationRecord {
        let record = try ConversationStore.existing(db, id: cid)
        if record.transient {
            guard selfJoin else { throw IMError(.conversationNotAllowed, "chat rooms can only be joined by the client itself") }
        } else if !selfJoin, try !ConversationStore.isMember(db, cid: cid, clientID: actor) {
            throw IMError(.conversationMembershipRequired, "only members may add others to \(cid)")
        }
        return record
    }

    /// The conversation, when `actor` may remove `requested` from it.
    private static func authorizeRemoving(_ db: Database, cid: String, actor: String, requested: [String]) throws -> ConversationRecord {
        let record = try ConversationStore.existing(db, id: cid)
        if record.transient {
            guard requested == [actor] else { throw IMError(.conversationNotAllowed, "chat rooms have no members to remove") }
        } else if try !ConversationStore.isMember(db, cid: cid, clientID: actor) {
            throw IMError(.conversationMembershipRequired, "only members may remove members of \(cid)")
        }
        return record
    }

    func countMembers(_ command: Command, on connection: Connection) async throws {
        let cid = try requiredCID(command)
        let clientID = connection.clientID ?? ""
        let count = try await db.read { db -> Int? in
            guard let record = try ConversationStore.find(db, id: cid) else { return nil }
            if record.transient { return -1 }
            guard try ConversationStore.isMember(db, cid: cid, clientID: clientID) else {
                throw IMError(.conversationMembershipRequired, "only members may count the members of \(cid)")
            }
            return try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM members WHERE cid = ?", arguments: [cid]) ?? 0
        }
        guard let count else { throw IMError(.invalidMessagingTarget, "conversation \(cid) does not exist") }
        var reply = Command(cmd: .conv, op: .result, i: command.i)
        reply.cid = cid
        reply.count = count >= 0 ? count : rooms.clientIDs(in: cid).count
        connection.send(reply)
    }

    /// Asks the interceptors whether a membership change may happen; a drop becomes 4305.
    func reviewMembership(cid: String, actor: String, members: [String], action: String) async throws {
        guard interceptors.isActive, interceptors.configuration.reviewMembership, interceptors.inScope(cid),
            !interceptors.isInterceptor(actor)
        else { return }
        if case .drop(let error, _) = await interceptors.review(.membership(cid: cid, actor: actor, members: members, action: action)) {
            throw IMError(
                code: IMErrorCode.conversationRejectedByApp.rawValue, reason: IMErrorCode.conversationRejectedByApp.reason,
                detail: error.detail, appCode: error.appCode)
        }
    }

    /// Sends `command` to every connection of the given clients.
    func notify(_ clientIDs: [String], _ command: Command, except skipped: Connection? = nil) {
        for clientID in clientIDs {
            for connection in registry.connections(of: clientID) where connection !== skipped {
                connection.send(command)
            }
        }
    }

    func requiredCID(_ command: Command) throws -> String {
        guard let cid = command.cid, !cid.isEmpty else { throw IMError(.invalidField, "missing field 'cid'") }
        return cid
    }

    /// Validates a list of client ids (1–1000 of them, each a valid client id), dropping repeats.
    func validatedMembers(_ ids: [String]?, field: String) throws -> [String] {
        guard let ids, !ids.isEmpty else { throw IMError(.invalidField, "missing field '\(field)'") }
        if ids.count > 1000 { throw IMError(.invalidField, "at most 1000 ids in '\(field)'") }
        var unique: [String] = []
        for id in ids {
            if let error = ClientID.validate(id) { throw IMError(.invalidField, "\(field): '\(id)': \(error.detail ?? error.reason)") }
            if !unique.contains(id) { unique.append(id) }
        }
        return unique
    }
}
