import Foundation
import IMCore
import Synchronization

/// Member mutes ("shut-up", timed or not, and conversation-wide), block lists and member roles: the
/// `conv add-shutup` / `remove-shutup` / `query-shutup` / `member-info-update` requests and the
/// `blacklist` command, with their events, and the mute check on every send.
extension IMService {
    /// The longest timed mute (`duration`), in seconds: a year.
    static let maxMuteSeconds = 365 * 86_400

    func handleMemberControl(_ command: Command, by clientID: String, on connection: Connection) async throws {
        switch (command.cmd, command.op) {
        case (.conv, .addShutup?), (.conv, .removeShutup?): try await changeMutes(command, by: clientID, on: connection)
        case (.conv, .queryShutup?): try await queryMutes(command, by: clientID, on: connection)
        case (.conv, .memberInfoUpdate?): try await updateMemberRole(command, by: clientID, on: connection)
        case (.blacklist, .block?), (.blacklist, .unblock?): try await changeBlocks(command, by: clientID, on: connection)
        case (.blacklist, .query?): try await queryBlocks(command, by: clientID, on: connection)
        default:
            throw IMError(.unknownCommand, "unsupported command \(command.cmd.rawValue) \(command.op?.rawValue ?? "")")
        }
    }

    // MARK: State

    /// The conversation's controls now (cached per node; see `MemberControlCache`).
    func memberControls(_ cid: String) async throws -> MemberControls {
        let now = Identifiers.nowMillis()
        if let cached = memberControlCache.get(cid, maxAge: cluster == nil ? nil : .seconds(1)) {
            return MemberControls(controls: cached, now: now)
        }
        let controls = try await store.memberControls(cid: cid, now: now)
        memberControlCache.put(cid, controls)
        return MemberControls(controls: controls, now: now)
    }

    /// Changes controls and forgets the cached ones (here; other nodes within a second).
    func setMemberControls(
        _ cid: String, _ kind: MemberControl.Kind, _ ids: [String], on: Bool, value: String? = nil, until: Int64? = nil, by actor: String
    ) async throws -> [String] {
        defer { memberControlCache.forget(cid) }
        return try await store.setMemberControls(
            cid: cid, kind: kind, clientIDs: ids, on: on, value: value, until: until, by: actor, now: Identifiers.nowMillis())
    }

    /// The ids among `requested` that are not blocked in `cid`, and those that are; all blocked: 4315.
    func withoutBlocked(_ requested: [String], cid: String) async throws -> (admitted: [String], blocked: [String]) {
        let controls = try await memberControls(cid)
        let blocked = requested.filter(controls.isBlocked)
        guard !blocked.isEmpty else { return (requested, []) }
        let admitted = requested.filter { !blocked.contains($0) }
        if admitted.isEmpty {
            throw IMError(
                .conversationBlacklisted, "\(blocked.joined(separator: ", ")) \(blocked.count == 1 ? "is" : "are") blocked in \(cid)")
        }
        return (admitted, blocked)
    }

    /// The role `clientID` acts with: configured interceptors (the bot) act as managers.
    func actingRole(_ clientID: String, in record: ConversationRecord, _ controls: MemberControls) -> MemberRole {
        let role = controls.role(of: clientID, in: record)
        return interceptors.isInterceptor(clientID) ? max(role, .manager) : role
    }

    /// Refuses a message from a muted sender (4905), with no bot involved: timed mutes end by themselves.
    func refuseIfMuted(cid: String, sender: String) async throws {
        if interceptors.isInterceptor(sender) { return }
        let controls = try await memberControls(cid)
        // The conversation's creator (its owner, whom a conversation-wide mute spares) is read only then.
        let mute: MemberControl
        if let own = controls.ownMute(of: sender) {
            mute = own
        } else if controls.allMuted, let record = try await store.conversation(cid), let all = controls.mute(of: sender, in: record) {
            mute = all
        } else {
            return
        }
        var detail = mute.clientID == MemberControl.everyone ? "\(cid) is muted for members" : "\(sender) is muted in \(cid)"
        if let until = mute.until {
            detail += " for \(max(1, (until - controls.now + 999) / 1000)) more s (until \(Self.isoDate(until)))"
        }
        if let reason = mute.value, !reason.isEmpty { detail += ": \(reason)" }
        throw IMError(.memberMuted, detail)
    }

    static func isoDate(_ millis: Int64) -> String {
        Date(timeIntervalSince1970: TimeInterval(millis) / 1000).formatted(.iso8601)
    }

    /// The conversation and its controls, when `clientID` may moderate it (owner, manager or the bot).
    private func moderated(_ cid: String, by clientID: String, action: String, targets: [String]) async throws
        -> (ConversationRecord, MemberControls)
    {
        let record = try StoreRules.existing(await store.conversation(cid), cid)
        let controls = try await memberControls(cid)
        try StoreRules.authorizeModeration(
            action, cid: cid, actor: clientID, actorRole: actingRole(clientID, in: record, controls),
            targets: targets.map { ($0, controls.role(of: $0, in: record)) })
        return (record, controls)
    }

    /// Members, and the actor's right to read the conversation's lists (a member, or the bot).
    private func readable(_ cid: String, by clientID: String) async throws -> ConversationRecord {
        let record = try StoreRules.existing(await store.conversation(cid), cid)
        if !record.transient, !interceptors.isInterceptor(clientID), try await !store.isMember(clientID, of: cid) {
            throw IMError(.conversationMembershipRequired, "only members may read the lists of \(cid)")
        }
        return record
    }

    /// `limit` (default 10, at most 100) and `next` (an offset this server handed out) of a paged list.
    private func page<T>(_ items: [T], _ command: Command) throws -> (items: [T], next: String?) {
        let limit = command.limit ?? 10
        guard (1...100).contains(limit) else { throw IMError(.invalidField, "limit must be 1–100") }
        let offset: Int
        if let next = command.next {
            guard let value = Int(next), value >= 0 else { throw IMError(.invalidField, "next is not a cursor this server handed out") }
            offset = value
        } else {
            offset = 0
        }
        let slice = Array(items.dropFirst(offset).prefix(limit))
        return (slice, offset + slice.count < items.count ? String(offset + slice.count) : nil)
    }

    // MARK: Mutes

    private func changeMutes(_ command: Command, by clientID: String, on connection: Connection) async throws {
        let cid = try requiredCID(command)
        let adding = command.op == .addShutup
        let all = command.all == true
        let ids = all && command.m == nil ? [] : try validatedMembers(command.m, field: "m")
        if command.duration != nil, !adding { throw IMError(.invalidField, "duration applies to add-shutup only") }
        if let duration = command.duration, !(1...Self.maxMuteSeconds).contains(duration) {
            throw IMError(.invalidField, "duration must be 1–\(Self.maxMuteSeconds) seconds")
        }
        if let detail = command.detail, detail.count > 500 {
            throw IMError(.invalidField, "detail (the reason) is longer than 500 characters")
        }
        let (record, controls) = try await moderated(cid, by: clientID, action: adding ? "mute" : "unmute", targets: ids)
        let until = command.duration.map { controls.now + Int64($0) * 1000 }
        var changed: [String] = []
        if all {
            _ = try await setMemberControls(
                cid, .mute, [MemberControl.everyone], on: adding, value: command.detail, until: until, by: clientID)
            if !adding {
                _ = try await setMemberControls(cid, .unmute, controls.exempted, on: false, by: clientID)
            }
        }
        if !ids.isEmpty {
            changed = try await setMemberControls(cid, .mute, ids, on: adding, value: command.detail, until: until, by: clientID)
            if adding {
                _ = try await setMemberControls(cid, .unmute, ids, on: false, by: clientID)
            } else if controls.allMuted || all {
                // Unmuting by name while the whole conversation is muted lets them speak.
                if !all { _ = try await setMemberControls(cid, .unmute, ids, on: true, by: clientID) }
                changed = ids
            }
        }
        var reply = Command(cmd: .conv, op: adding ? .shutupAdded : .shutupRemoved, i: command.i)
        reply.cid = cid
        let wasMuted = Set(controls.muted.map(\.clientID))
        reply.allowedPids = adding ? ids : ids.filter { changed.contains($0) || !wasMuted.contains($0) }
        if all { reply.all = true }
        reply.duration = command.duration
        connection.send(reply)

        let members = record.transient ? [] : try await store.members(of: cid)
        let affected = all ? members.filter { controls.role(of: $0, in: record) == .member && !ids.contains($0) } : ids
        var own = Command(cmd: .conv, op: adding ? .shutuped : .unshutuped)
        own.cid = cid
        own.initBy = clientID
        own.duration = command.duration
        if all { own.all = true }
        await notify(affected, own)
        var event = Command(cmd: .conv, op: adding ? .membersShutuped : .membersUnshutuped)
        event.cid = cid
        event.initBy = clientID
        event.m = all ? [] : ids
        event.duration = command.duration
        if all { event.all = true }
        await notify(members, event)
    }

    private func queryMutes(_ command: Command, by clientID: String, on connection: Connection) async throws {
        let cid = try requiredCID(command)
        _ = try await readable(cid, by: clientID)
        let controls = try await memberControls(cid)
        let (items, next) = try page(controls.muted.map(\.clientID), command)
        var reply = Command(cmd: .conv, op: .shutupResult, i: command.i)
        reply.cid = cid
        reply.m = items
        reply.next = next
        if controls.allMuted { reply.all = true }
        connection.send(reply)
    }

    // MARK: Block lists

    private func changeBlocks(_ command: Command, by clientID: String, on connection: Connection) async throws {
        guard let cid = command.srcCid ?? command.cid, !cid.isEmpty else {
            throw IMError(
                .invalidField,
                "missing field 'srcCid' (block lists are per conversation; a client's own list of blocked conversations is not supported)")
        }
        let blocking = command.op == .block
        let ids = try validatedMembers(command.toPids, field: "toPids")
        let (record, controls) = try await moderated(cid, by: clientID, action: blocking ? "block" : "unblock", targets: ids)
        let targets = ids.filter { $0 != record.creator }
        let changed = try await setMemberControls(cid, .block, targets, on: blocking, by: clientID)
        var removed: [String] = []
        if blocking {
            _ = try await setMemberControls(cid, .role, targets, on: false, by: clientID)
            let members = record.transient ? [] : try await store.members(of: cid)
            let leaving = targets.filter(members.contains)
            if !leaving.isEmpty {
                let change = try await store.changeMembers(
                    MembershipRequest(
                        kind: .remove, cid: cid, actor: clientID, clientIDs: leaving, now: Identifiers.nowMillis(),
                        actorIsTrusted: interceptors.isInterceptor(clientID)))
                removed = change.changed
            }
        }
        var reply = Command(cmd: .blacklist, op: blocking ? .blocked : .unblocked, i: command.i)
        reply.srcCid = cid
        reply.allowedPids = blocking ? targets : ids.filter { changed.contains($0) || !controls.isBlocked($0) }
        if targets.count < ids.count {
            reply.failedPids = [
                FailedPids(pids: [record.creator], error: IMError(.conversationNotAllowed, "the owner of \(cid) cannot be blocked"))
            ]
        }
        connection.send(reply)

        for member in removed {
            var kicked = Command(cmd: .conv, op: .kicked)
            kicked.cid = cid
            kicked.initBy = clientID
            await notify([member], kicked)
        }
        let members = record.transient ? [] : try await store.members(of: cid)
        if !removed.isEmpty {
            var left = Command(cmd: .conv, op: .membersLeft)
            left.cid = cid
            left.m = removed
            left.initBy = clientID
            await notify(members, left)
        }
        var own = Command(cmd: .conv, op: blocking ? .blocked : .unblocked)
        own.cid = cid
        own.initBy = clientID
        await notify(blocking ? targets : ids, own)
        var event = Command(cmd: .conv, op: blocking ? .membersBlocked : .membersUnblocked)
        event.cid = cid
        event.initBy = clientID
        event.m = blocking ? targets : ids
        await notify(members, event)
    }

    private func queryBlocks(_ command: Command, by clientID: String, on connection: Connection) async throws {
        guard let cid = command.srcCid ?? command.cid, !cid.isEmpty else {
            throw IMError(
                .invalidField,
                "missing field 'srcCid' (block lists are per conversation; a client's own list of blocked conversations is not supported)")
        }
        _ = try await readable(cid, by: clientID)
        let (items, next) = try page(try await memberControls(cid).blocked, command)
        var reply = Command(cmd: .blacklist, op: .queryResult, i: command.i)
        reply.srcCid = cid
        reply.blockedPids = items
        reply.next = next
        connection.send(reply)
    }

    // MARK: Roles

    private func updateMemberRole(_ command: Command, by clientID: String, on connection: Connection) async throws {
        let cid = try requiredCID(command)
        guard let target = command.targetClientId, ClientID.validate(target) == nil else {
            throw IMError(.invalidField, "missing or invalid field 'targetClientId'")
        }
        guard let role = command.role.flatMap(MemberRole.init(rawValue:)), role != .owner else {
            throw IMError(.invalidField, "role must be 'Manager' or 'Member' (the owner is the creator and cannot change)")
        }
        let record = try StoreRules.existing(await store.conversation(cid), cid)
        guard clientID == record.creator else {
            throw IMError(.conversationNotAllowed, "only the owner of \(cid) may change roles")
        }
        guard target != record.creator else { throw IMError(.conversationNotAllowed, "the owner's role cannot change") }
        if !record.transient, try await !store.isMember(target, of: cid) {
            throw IMError(.invalidMessagingTarget, "\(target) is not a member of \(cid)")
        }
        _ = try await setMemberControls(cid, .role, [target], on: role == .manager, value: role.rawValue, by: clientID)
        var reply = Command(cmd: .conv, op: .memberInfoUpdated, i: command.i)
        reply.cid = cid
        reply.targetClientId = target
        reply.role = role.rawValue
        connection.send(reply)
        var event = Command(cmd: .conv, op: .memberInfoChanged)
        event.cid = cid
        event.targetClientId = target
        event.role = role.rawValue
        event.initBy = clientID
        await notify(record.transient ? [target] : try await store.members(of: cid), event)
    }

    /// Every member's role (the `_ConversationMemberInfo` endpoint): the owner, managers, members.
    func memberRoles(_ cid: String) async throws -> (record: ConversationRecord, roles: [(String, MemberRole)]) {
        let record = try StoreRules.existing(await store.conversation(cid), cid)
        let controls = try await memberControls(cid)
        let members = record.transient ? [] : try await store.members(of: cid)
        return (record, members.map { ($0, controls.role(of: $0, in: record)) })
    }
}

/// The member controls of recently used conversations, so that the mute check on a send reads the
/// store once per conversation, not once per message. A single node forgets an entry when it changes it;
/// nodes sharing a database re-read entries older than a second (a mute made on another node applies
/// here within a second).
final class MemberControlCache: Sendable {
    private let entries = Mutex<[String: (controls: [MemberControl], at: ContinuousClock.Instant)]>([:])

    func get(_ cid: String, maxAge: Duration?) -> [MemberControl]? {
        entries.withLock { entries in
            guard let entry = entries[cid] else { return nil }
            if let maxAge, ContinuousClock.now - entry.at > maxAge { return nil }
            return entry.controls
        }
    }

    func put(_ cid: String, _ controls: [MemberControl]) {
        entries.withLock { entries in
            if entries.count >= 10_000 { entries.removeAll(keepingCapacity: true) }
            entries[cid] = (controls, ContinuousClock.now)
        }
    }

    func forget(_ cid: String) {
        _ = entries.withLock { $0.removeValue(forKey: cid) }
    }
}
