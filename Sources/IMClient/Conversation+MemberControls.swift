import IMCore

/// A page of a conversation's mute or block list.
public struct IMMemberPage: Sendable, Equatable {
    /// The client ids on this page.
    public var ids: [String]
    /// Where the next page starts; nil on the last page.
    public var next: String?
    /// For the mute list: the whole conversation is muted (owner, managers and members unmuted by name may speak).
    public var allMuted: Bool
}

/// The role of a member of a conversation (docs/PROTOCOL.md, "Mutes, block lists and roles").
public enum IMMemberRole: String, Sendable {
    case owner = "Owner"
    case manager = "Manager"
    case member = "Member"
}

/// Member mutes ("shut-up"), block lists and roles. Only the owner and managers may mute and block
/// members; only the owner changes roles (4308 otherwise).
extension IMConversation {
    /// Mutes members: their messages are refused (4905) until `seconds` pass (nil: until unmuted).
    /// Returns the ids muted.
    @discardableResult
    nonisolated(nonsending) public func muteMembers(_ ids: [String], seconds: Int? = nil, reason: String? = nil) async throws(IMError)
        -> [String]
    {
        var command = memberControl(.addShutup)
        command.m = ids
        command.duration = seconds
        command.detail = reason
        return try await client.request(command).allowedPids ?? []
    }

    /// Lifts members' mutes (during a conversation-wide mute: lets them speak). Returns the ids unmuted.
    @discardableResult
    nonisolated(nonsending) public func unmuteMembers(_ ids: [String]) async throws(IMError) -> [String] {
        var command = memberControl(.removeShutup)
        command.m = ids
        return try await client.request(command).allowedPids ?? []
    }

    /// Mutes every member but the owner and managers (for `seconds`, or until `unmuteAll`).
    nonisolated(nonsending) public func muteAll(seconds: Int? = nil, reason: String? = nil) async throws(IMError) {
        var command = memberControl(.addShutup)
        command.all = true
        command.duration = seconds
        command.detail = reason
        _ = try await client.request(command)
    }

    /// Lifts a conversation-wide mute (and its exceptions).
    nonisolated(nonsending) public func unmuteAll() async throws(IMError) {
        var command = memberControl(.removeShutup)
        command.all = true
        _ = try await client.request(command)
    }

    /// The members muted by name, a page at a time.
    nonisolated(nonsending) public func mutedMembers(limit: Int = 10, next: String? = nil) async throws(IMError) -> IMMemberPage {
        var command = memberControl(.queryShutup)
        command.limit = limit
        command.next = next
        let reply = try await client.request(command)
        return IMMemberPage(ids: reply.m ?? [], next: reply.next, allMuted: reply.all == true)
    }

    /// Blocks clients: members among them are removed, and none may join or be added (4315) until
    /// unblocked. Returns the ids blocked.
    @discardableResult
    nonisolated(nonsending) public func blockMembers(_ ids: [String]) async throws(IMError) -> [String] {
        var command = blockList(.block)
        command.toPids = ids
        return try await client.request(command).allowedPids ?? []
    }

    @discardableResult
    nonisolated(nonsending) public func unblockMembers(_ ids: [String]) async throws(IMError) -> [String] {
        var command = blockList(.unblock)
        command.toPids = ids
        return try await client.request(command).allowedPids ?? []
    }

    /// The blocked client ids, a page at a time.
    nonisolated(nonsending) public func blockedMembers(limit: Int = 10, next: String? = nil) async throws(IMError) -> IMMemberPage {
        var command = blockList(.query)
        command.limit = limit
        command.next = next
        let reply = try await client.request(command)
        return IMMemberPage(ids: reply.blockedPids ?? [], next: reply.next, allMuted: false)
    }

    /// Makes a member a manager or a plain member again (the owner only).
    nonisolated(nonsending) public func updateMemberRole(_ member: String, to role: IMMemberRole) async throws(IMError) {
        var command = memberControl(.memberInfoUpdate)
        command.targetClientId = member
        command.role = role.rawValue
        _ = try await client.request(command)
    }

    /// A `conv` command about this conversation's mutes or roles.
    private func memberControl(_ op: OpType) -> Command {
        var command = Command(cmd: .conv, op: op)
        command.cid = id
        return command
    }

    /// A `blacklist` command about this conversation's block list.
    private func blockList(_ op: OpType) -> Command {
        var command = Command(cmd: .blacklist, op: op)
        command.srcCid = id
        return command
    }
}

extension IMClient {
    /// The events of mutes, block lists and roles; false for other ops.
    func memberControlEvent(_ command: Command, cid: String, op: OpType) -> Bool {
        let by = command.initBy
        let members = command.m ?? []
        switch op {
        case .shutuped: hub.emit(.muted(conversationId: cid, by: by, seconds: command.duration, all: command.all == true))
        case .unshutuped: hub.emit(.unmuted(conversationId: cid, by: by, all: command.all == true))
        case .membersShutuped:
            hub.emit(.membersMuted(conversationId: cid, members: members, by: by, seconds: command.duration, all: command.all == true))
        case .membersUnshutuped: hub.emit(.membersUnmuted(conversationId: cid, members: members, by: by, all: command.all == true))
        case .blocked: hub.emit(.blocked(conversationId: cid, by: by))
        case .unblocked: hub.emit(.unblocked(conversationId: cid, by: by))
        case .membersBlocked: hub.emit(.membersBlocked(conversationId: cid, members: members, by: by))
        case .membersUnblocked: hub.emit(.membersUnblocked(conversationId: cid, members: members, by: by))
        case .memberInfoChanged:
            guard let member = command.targetClientId, let role = command.role.flatMap(IMMemberRole.init(rawValue:)) else { return false }
            hub.emit(.memberRoleChanged(conversationId: cid, member: member, role: role, by: by))
        default: return false
        }
        return true
    }
}
