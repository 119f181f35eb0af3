import Foundation
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
        let request = MembershipRequest(kind: .add, cid: cid, actor: clientID, clientIDs: requested, now: now)
        // Interceptors review only changes the server would make: authorize first (and again in the write).
        try await authorize(request)
        try await reviewMembership(cid: cid, actor: clientID, members: requested, action: selfJoin ? "join" : "invite")
        let change = try await store.changeMembers(request)
        if change.record.transient {
            rooms.enter(connection, room: cid)
        }
        var reply = Command(cmd: .conv, op: .added, i: command.i)
        reply.cid = cid
        reply.m = change.changed
        // Members already in the conversation count as added: the request's outcome holds for them.
        reply.allowedPids = change.record.transient ? [clientID] : requested.filter(change.members.contains)
        connection.send(reply)
        guard !change.record.transient, !change.changed.isEmpty else { return }

        for member in change.changed {
            var event = Command(cmd: .conv, op: member == clientID ? .joined : .invited)
            event.cid = cid
            event.initBy = clientID
            notify([member], event)
        }
        var joined = Command(cmd: .conv, op: .membersJoined)
        joined.cid = cid
        joined.m = change.changed
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
        let request = MembershipRequest(kind: .remove, cid: cid, actor: clientID, clientIDs: requested, now: Identifiers.nowMillis())
        try await authorize(request)
        try await reviewMembership(cid: cid, actor: clientID, members: requested, action: requested == [clientID] ? "quit" : "kick")
        let change = try await store.changeMembers(request)
        if change.record.transient {
            rooms.leave(connection, room: cid)
        }
        var reply = Command(cmd: .conv, op: .removed, i: command.i)
        reply.cid = cid
        reply.m = change.changed
        reply.allowedPids = change.changed
        let notMembers = requested.filter { !change.changed.contains($0) }
        if !notMembers.isEmpty {
            reply.failedPids = [FailedPids(pids: notMembers, error: IMError(.invalidMessagingTarget, "not a member of \(cid)"))]
        }
        connection.send(reply)
        guard !change.record.transient, !change.changed.isEmpty else { return }

        for member in change.changed {
            var event = Command(cmd: .conv, op: member == clientID ? .left : .kicked)
            event.cid = cid
            event.initBy = clientID
            notify([member], event)
        }
        var left = Command(cmd: .conv, op: .membersLeft)
        left.cid = cid
        left.m = change.changed
        left.initBy = clientID
        notify(change.members, left)
    }

    /// Checks a membership change before the interceptors review it (the store checks again when it writes).
    private func authorize(_ request: MembershipRequest) async throws {
        let record = try StoreRules.existing(await store.conversation(request.cid), request.cid)
        try StoreRules.authorize(request, record: record, actorIsMember: try await store.isMember(request.actor, of: request.cid))
    }

    func countMembers(_ command: Command, on connection: Connection) async throws {
        let cid = try requiredCID(command)
        let clientID = connection.clientID ?? ""
        let record = try StoreRules.existing(await store.conversation(cid), cid)
        let count: Int
        if record.transient {
            count = await roomOccupancy(cid)
        } else {
            guard try await store.isMember(clientID, of: cid) else {
                throw IMError(.conversationMembershipRequired, "only members may count the members of \(cid)")
            }
            count = try await store.memberCount(of: cid)
        }
        var reply = Command(cmd: .conv, op: .result, i: command.i)
        reply.cid = cid
        reply.count = count
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

    /// Sends `command` to every connection in the chat room `cid`.
    func notifyRoom(_ cid: String, _ command: Command, except skipped: Connection? = nil) {
        for connection in rooms.connections(in: cid) where connection !== skipped { connection.send(command) }
    }

    /// How many distinct clients are in the chat room `cid`.
    func roomOccupancy(_ cid: String) async -> Int { rooms.clientIDs(in: cid).count }

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
