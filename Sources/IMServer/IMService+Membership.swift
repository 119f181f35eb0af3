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
        // Blocked ids are refused one by one (4315); the others are added.
        let (admitted, blocked) = try await withoutBlocked(requested, cid: cid)
        let request = MembershipRequest(kind: .add, cid: cid, actor: clientID, clientIDs: admitted, now: now)
        // Interceptors review only changes the server would make: authorize first (and again in the write).
        try await authorize(request)
        try await reviewMembership(cid: cid, actor: clientID, members: admitted, action: selfJoin ? .join : .invite)
        let change = try await store.changeMembers(request)
        if change.record.transient {
            await setRoom(connection, cid)
        }
        var reply = Self.membershipReply(.added, change, cid: cid, serial: command.i)
        // Members already in the conversation count as added: the request's outcome holds for them.
        reply.allowedPids = change.record.transient ? [clientID] : admitted.filter(change.members.contains)
        if !blocked.isEmpty {
            reply.failedPids = [FailedPids(pids: blocked, error: IMError(.conversationBlacklisted, "blocked in \(cid)"))]
        }
        connection.send(reply)
        await announce(change, cid: cid, actor: clientID, ownOp: .joined, otherOp: .invited, membersOp: .membersJoined)
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
        try await reviewMembership(cid: cid, actor: clientID, members: requested, action: requested == [clientID] ? .quit : .kick)
        let change = try await store.changeMembers(request)
        if change.record.transient {
            await setRoom(connection, nil, leaving: cid)
        }
        var reply = Self.membershipReply(.removed, change, cid: cid, serial: command.i)
        reply.allowedPids = change.changed
        let notMembers = requested.filter { !change.changed.contains($0) }
        if !notMembers.isEmpty {
            reply.failedPids = [FailedPids(pids: notMembers, error: IMError(.invalidMessagingTarget, "not a member of \(cid)"))]
        }
        connection.send(reply)
        await announce(change, cid: cid, actor: clientID, ownOp: .left, otherOp: .kicked, membersOp: .membersLeft)
    }

    /// The answer to `conv add` / `conv remove`: the conversation and the clients changed.
    private static func membershipReply(_ op: OpType, _ change: MembershipChange, cid: String, serial: Int?) -> Command {
        var reply = Command(cmd: .conv, op: op, i: serial)
        reply.cid = cid
        reply.m = change.changed
        return reply
    }

    /// Tells each client added or removed (`ownOp` when it is the actor, `otherOp` when another member acted)
    /// and the members after the change (`membersOp`, with the list); nothing for a chat room or no change.
    private func announce(
        _ change: MembershipChange, cid: String, actor: String, ownOp: OpType, otherOp: OpType, membersOp: OpType
    ) async {
        guard !change.record.transient, !change.changed.isEmpty else { return }
        for member in change.changed {
            var event = Command(cmd: .conv, op: member == actor ? ownOp : otherOp)
            event.cid = cid
            event.initBy = actor
            await notify([member], event)
        }
        var all = Command(cmd: .conv, op: membersOp)
        all.cid = cid
        all.m = change.changed
        all.initBy = actor
        await notify(change.members, all)
    }

    /// Checks a membership change before the interceptors review it (the store checks again when it writes).
    private func authorize(_ request: MembershipRequest) async throws {
        let record = try StoreRules.existing(await store.conversation(request.cid), request.cid)
        try StoreRules.authorize(
            request, record: record, actorIsMember: try await store.isMember(request.actor, of: request.cid),
            controls: try await memberControls(request.cid))
    }

    func countMembers(_ command: Command, on connection: Connection) async throws {
        let cid = try requiredCID(command)
        let clientID = connection.clientID ?? ""
        let record = try StoreRules.existing(await store.conversation(cid), cid)
        let count: Int
        if record.transient {
            count = try await roomOccupancy(cid)
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

    /// How many of a conversation's newest messages `memberInfo` counts each member's sent messages in.
    static let memberInfoWindow = 10_000

    /// `conv query` flag bit 4: the results the viewer sees the members of (it is a member, or an
    /// interceptor) with `memberInfo`: each member's join time, role, messages sent among the newest
    /// `memberInfoWindow` and whether it founded the conversation (joined when it was created).
    func withMemberInfo(_ results: [ConversationInfo], viewer: String) async throws -> [ConversationInfo] {
        var answered: [ConversationInfo] = []
        for var info in results {
            if let members = info.m, members.contains(viewer) || interceptors.isInterceptor(viewer),
                let record = try await store.conversation(info.objectId)
            {
                let controls = try await memberControls(record.id)
                var described: [String: JSONValue] = [:]
                for member in try await store.memberActivity(of: record.id, window: Self.memberInfoWindow) {
                    var fields: [String: JSONValue] = [
                        "joinedAt": .int(Int(member.joinedAt)), "role": .string(controls.role(of: member.clientID, in: record).rawValue),
                        "sent": .int(member.sent),
                    ]
                    if member.joinedAt == record.createdAt { fields["founder"] = .bool(true) }
                    described[member.clientID] = .object(fields)
                }
                info.memberInfo = .object(described)
            }
            answered.append(info)
        }
        return answered
    }

    /// Asks the interceptors whether a membership change may happen; a drop becomes 4305.
    func reviewMembership(cid: String, actor: String, members: [String], action: HookRequest.MembershipAction) async throws {
        guard interceptors.isActive, interceptors.configuration.reviewMembership, interceptors.inScope(cid),
            !interceptors.isInterceptor(actor)
        else { return }
        if case .drop(let error, _) = await interceptors.review(.membership(cid: cid, actor: actor, members: members, action: action)) {
            throw IMError(
                code: IMErrorCode.conversationRejectedByApp.rawValue, reason: IMErrorCode.conversationRejectedByApp.reason,
                detail: error.detail, appCode: error.appCode)
        }
    }

    /// Sends `command` to every connection of the given clients, on every node.
    func notify(_ clientIDs: [String], _ command: Command, except skipped: Connection? = nil) async {
        deliverLocally(command, to: clientIDs.flatMap { registry.connections(of: $0) }, except: skipped)
        if let cluster, !clientIDs.isEmpty { await cluster.announce(.clients(clientIDs, command, origin: cluster.id)) }
    }

    /// Sends `command` to every connection in the chat room `cid`, on every node.
    func notifyRoom(_ cid: String, _ command: Command, except skipped: Connection? = nil) async {
        deliverLocally(command, to: rooms.connections(in: cid), except: skipped)
        if let cluster { await cluster.announce(.room(cid, command, origin: cluster.id)) }
    }

    /// Sends a command to this node's connections; a message (`direct`) is delivered (held behind a
    /// backlog being sent) and not to its sender's own connections.
    func deliverLocally(_ command: Command, to connections: [Connection], except skipped: Connection? = nil) {
        guard command.cmd == .direct, let id = command.id else {
            for connection in connections where connection !== skipped { connection.send(command) }
            return
        }
        let delivered = SharedFrame(command).deliver(messageID: id, to: connections, sender: command.fromPeerId, except: skipped)
        metrics.messagesDelivered.increment(by: delivered)
    }

    /// How many distinct clients are in the chat room `cid` (on every node).
    func roomOccupancy(_ cid: String) async throws -> Int {
        guard let cluster else { return rooms.clientIDs(in: cid).count }
        return try await cluster.roomOccupancy(cid)
    }

    /// Puts a connection in a chat room (or takes it out, with nil), here and in the cluster's presence.
    func setRoom(_ connection: Connection, _ cid: String?, leaving left: String? = nil) async {
        if let cid { rooms.enter(connection, room: cid) } else { rooms.leave(connection, room: left) }
        await cluster?.room(connection.id, is: rooms.room(of: connection))
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
