import Foundation
import IMCore

/// Creating, finding and managing conversations.
extension IMClient {
    /// A handle for a conversation id, without a round trip (its `info` is nil).
    public nonisolated func conversation(_ id: String) -> IMConversation {
        IMConversation(id: id, client: self)
    }

    /// Creates a conversation with `members` (this client is added). With `.unique`, the same member set
    /// returns the existing conversation; with `.chatRoom`, a chat room (members are ignored).
    public func createConversation(
        name: String? = nil, members: [String] = [], attributes: [String: JSONValue]? = nil,
        options: IMConversationCreationOptions = []
    ) async throws(IMError) -> IMConversation {
        var start = Command(cmd: .conv, op: .start)
        let chatRoom = options.contains(.chatRoom)
        // The creator is listed, as LeanCloud's SDKs do: a signed start with no members would sign a login's text.
        start.m = chatRoom ? [clientId] : members.contains(clientId) ? members : members + [clientId]
        start.name = name
        start.attr = attributes.map(JSONValue.object)
        start.unique = options.contains(.unique) ? true : nil
        start.transient = chatRoom ? true : nil
        let reply = try await request(try await signed(start, .startConversation(members: start.m ?? [])))
        guard let cid = reply.cid else { throw IMError(.unexpectedReply, "conv started without cid") }
        var info = ConversationInfo(objectId: cid)
        info.name = name
        info.m = chatRoom ? nil : Array(Set(members + [clientId])).sorted()
        info.c = clientId
        info.tr = chatRoom ? true : nil
        info.unique = reply.unique
        info.attr = start.attr
        info.createdAt = reply.cdate
        chatRoomFlags[cid] = chatRoom
        return IMConversation(id: cid, client: self, info: info)
    }

    /// Creates a chat room.
    public func createChatRoom(name: String? = nil, attributes: [String: JSONValue]? = nil) async throws(IMError) -> IMConversation {
        try await createConversation(name: name, attributes: attributes, options: .chatRoom)
    }

    /// Conversations matching `query`.
    public func conversations(matching query: IMConversationQuery) async throws(IMError) -> [IMConversation] {
        let reply = try await request(query.command())
        let results = reply.results ?? []
        for info in results { chatRoomFlags[info.objectId] = info.tr == true }
        return results.map { IMConversation(id: $0.objectId, client: self, info: $0) }
    }

    /// The conversation with `id`, or nil when there is none.
    public func fetchConversation(id: String) async throws(IMError) -> IMConversation? {
        try await conversations(matching: IMConversationQuery().whereKey("objectId", equalTo: .string(id)).limit(1)).first
    }

    func join(_ cid: String, chatRoom: Bool) async throws(IMError) {
        var join = Command(cmd: .conv, op: .join)
        join.cid = cid
        _ = try await request(try await signed(join, .join(conversationId: cid)))
        if chatRoom { chatRoomFlags[cid] = true }
        if chatRoomFlags[cid] == nil { _ = try? await fetchConversation(id: cid) }
        if chatRoomFlags[cid] == true { currentChatRoom = cid }
    }

    func addMembers(_ members: [String], to cid: String) async throws(IMError) -> [String] {
        var add = Command(cmd: .conv, op: .add)
        add.cid = cid
        add.m = members
        let action: IMSignatureAction = members == [clientId] ? .join(conversationId: cid) : .invite(conversationId: cid, members: members)
        return try await request(try await signed(add, action)).m ?? []
    }

    func quit(_ cid: String) async throws(IMError) {
        var quit = Command(cmd: .conv, op: .quit)
        quit.cid = cid
        _ = try await request(quit)
        if currentChatRoom == cid { currentChatRoom = nil }
    }

    func removeMembers(_ members: [String], from cid: String) async throws(IMError) -> [String] {
        var remove = Command(cmd: .conv, op: .remove)
        remove.cid = cid
        remove.m = members
        if members != [clientId] { remove = try await signed(remove, .kick(conversationId: cid, members: members)) }
        return try await request(remove).m ?? []
    }

    func countMembers(_ cid: String) async throws(IMError) -> Int {
        var count = Command(cmd: .conv, op: .count)
        count.cid = cid
        guard let n = try await request(count).count else { throw IMError(.unexpectedReply, "conv result without count") }
        return n
    }

    func updateConversation(_ cid: String, patch: [String: JSONValue]) async throws(IMError) -> Int64? {
        guard !patch.isEmpty else { throw IMError(.invalidArgument, "nothing to update") }
        var update = Command(cmd: .conv, op: .update)
        update.cid = cid
        update.attr = .object(patch)
        return try await request(update).udate
    }

    func setMuted(_ cid: String, _ muted: Bool) async throws(IMError) {
        var command = Command(cmd: .conv, op: muted ? .mute : .unmute)
        command.cid = cid
        _ = try await request(command)
    }

    /// Sends any command as a request and returns the reply with the same `i` (the SDK sets `i`). A reply
    /// carrying an error code is thrown. The escape hatch for commands the SDK has no method for.
    public func send(_ command: Command) async throws(IMError) -> Command {
        try await request(command)
    }

    /// Sends a command that gets no reply (no `i`); fails when the client is not connected right now.
    public func sendWithoutReply(_ command: Command) throws(IMError) {
        var command = command
        command.i = nil
        try post(command)
    }
}
