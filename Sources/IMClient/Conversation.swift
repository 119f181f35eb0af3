import Foundation
import IMCore

/// How a conversation is created.
public struct IMConversationCreationOptions: OptionSet, Sendable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// The same member set always yields the same conversation.
    public static let unique = IMConversationCreationOptions(rawValue: 1)
    /// A chat room: no member list, members are whoever joined and is online, no offline delivery.
    public static let chatRoom = IMConversationCreationOptions(rawValue: 2)
}

/// A conversation handle: its id, the client it is used through, and the conversation's data as last
/// fetched (`info`, nil when the handle was made from an id alone). Every method is a server round trip.
public struct IMConversation: Sendable, Identifiable, Hashable {
    public let id: String
    public let client: IMClient
    /// The conversation's data when this handle was made (creation, query or `fetch()`).
    public let info: ConversationInfo?

    public init(id: String, client: IMClient, info: ConversationInfo? = nil) {
        self.id = id
        self.client = client
        self.info = info
    }

    public var name: String? { info?.name }
    /// Members (nil for chat rooms or when unknown).
    public var members: [String]? { info?.m }
    public var creator: String? { info?.c }
    /// Custom attributes.
    public var attributes: [String: JSONValue]? { info?.attr?.objectValue }
    public var isChatRoom: Bool { info?.tr == true }
    public var isUnique: Bool { info?.unique == true }
    /// Members who muted the conversation.
    public var mutedMembers: [String]? { info?.mu }
    /// Time of the last message, in ms.
    public var lastMessageAt: Int64? { info?.lm }
    public var createdAt: Int64? { info?.createdAt }
    public var updatedAt: Int64? { info?.updatedAt }

    public static func == (lhs: IMConversation, rhs: IMConversation) -> Bool {
        lhs.id == rhs.id && lhs.client === rhs.client
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(ObjectIdentifier(client))
    }

    // MARK: Messages

    /// Sends a message; returns it with its server id and timestamp once the server stored it.
    @discardableResult
    nonisolated(nonsending) public func send(_ content: IMMessageContent, options: IMSendOptions = .default) async throws(IMError)
        -> IMMessage
    {
        try await client.sendMessage(content, to: id, options: options)
    }

    /// Writes a message without waiting for its ack; await `message()` on the result for the ack. Messages
    /// submitted one after another are sent in that order, so many can be in flight at once.
    nonisolated(nonsending) public func submit(_ content: IMMessageContent, options: IMSendOptions = .default) async throws(IMError)
        -> IMPendingMessage
    {
        try await client.submitMessage(content, to: id, options: options)
    }

    /// Sends a message of a registered custom type.
    @discardableResult
    nonisolated(nonsending) public func send(_ message: some IMCustomMessage, options: IMSendOptions = .default) async throws(IMError)
        -> IMMessage
    {
        try await client.sendMessage(.custom(message), to: id, options: options)
    }

    /// Sends a cmd message (`action` must not start with `_` or `hookbot.`) to the online members.
    @discardableResult
    nonisolated(nonsending) public func sendCmd(action: String, ext: [String: JSONValue] = [:]) async throws(IMError) -> IMCmdMessage {
        try await client.sendCmd(action: action, ext: ext, to: id)
    }

    /// Recalls a message this client sent (within the server's recall window).
    @discardableResult
    nonisolated(nonsending) public func recall(_ message: IMMessage) async throws(IMError) -> IMMessage {
        try await client.recall(messageId: message.id, timestamp: message.timestamp, in: id)
    }

    /// Recalls a message by id and timestamp.
    @discardableResult
    nonisolated(nonsending) public func recall(messageId: String, timestamp: Int64) async throws(IMError) -> IMMessage {
        try await client.recall(messageId: messageId, timestamp: timestamp, in: id)
    }

    /// Marks the conversation read up to `message`, or up to the last message this client has seen in it.
    nonisolated(nonsending) public func markRead(upTo message: IMMessage? = nil) async throws(IMError) {
        try await client.markRead(id, upTo: message.map { ($0.id, $0.timestamp) })
    }

    // MARK: History

    /// The newest `limit` stored messages, oldest first.
    nonisolated(nonsending) public func messages(limit: Int = 20) async throws(IMError) -> [IMMessage] {
        try await client.history(id, before: nil, after: nil, limit: limit)
    }

    /// The `limit` stored messages just before a message (its timestamp and optionally its id), oldest first:
    /// pass the first message of the previous page to page backwards.
    nonisolated(nonsending) public func messages(beforeTimestamp timestamp: Int64, messageId: String? = nil, limit: Int = 20)
        async throws(IMError) -> [IMMessage]
    {
        try await client.history(id, before: (messageId, timestamp), after: nil, limit: limit)
    }

    /// The `limit` stored messages before `message`, oldest first.
    nonisolated(nonsending) public func messages(before message: IMMessage, limit: Int = 20) async throws(IMError) -> [IMMessage] {
        try await messages(beforeTimestamp: message.timestamp, messageId: message.id, limit: limit)
    }

    /// The newest `limit` stored messages after `timestamp`, oldest first.
    nonisolated(nonsending) public func messages(afterTimestamp timestamp: Int64, limit: Int = 20) async throws(IMError) -> [IMMessage] {
        try await client.history(id, before: nil, after: timestamp, limit: limit)
    }

    // MARK: Membership

    /// Joins the conversation (for a chat room: enters it while online; rejoined after reconnects).
    nonisolated(nonsending) public func join() async throws(IMError) {
        try await client.join(id, chatRoom: isChatRoom)
    }

    /// Adds members; returns the ids the server added.
    @discardableResult
    nonisolated(nonsending) public func add(members: [String]) async throws(IMError) -> [String] {
        try await client.addMembers(members, to: id)
    }

    /// Leaves the conversation.
    nonisolated(nonsending) public func quit() async throws(IMError) {
        try await client.quit(id)
    }

    /// Removes (kicks) members; returns the ids the server removed.
    @discardableResult
    nonisolated(nonsending) public func remove(members: [String]) async throws(IMError) -> [String] {
        try await client.removeMembers(members, from: id)
    }

    /// The number of members (for a chat room: clients online in it).
    nonisolated(nonsending) public func countMembers() async throws(IMError) -> Int {
        try await client.countMembers(id)
    }

    // MARK: Data

    /// Changes the name and/or attributes. `attributes` keys are attribute paths (dots reach into nested
    /// objects) set to the given values; `removingAttributes` paths are deleted; other attributes stay.
    /// Returns the update time (ms).
    @discardableResult
    nonisolated(nonsending) public func update(
        name: String? = nil, attributes: [String: JSONValue] = [:], removingAttributes: [String] = []
    )
        async throws(IMError) -> Int64?
    {
        var patch: [String: JSONValue] = [:]
        if let name { patch["name"] = .string(name) }
        for (path, value) in attributes { patch[IMConversationQuery.attr(path)] = value }
        for path in removingAttributes { patch[IMConversationQuery.attr(path)] = ["__op": "Delete"] }
        return try await update(patch: patch)
    }

    /// Applies a raw patch (keys `name` or `attr.<path>`, `{"__op": "Delete"}` deletes). Returns the update time.
    @discardableResult
    nonisolated(nonsending) public func update(patch: [String: JSONValue]) async throws(IMError) -> Int64? {
        try await client.updateConversation(id, patch: patch)
    }

    /// Stops offline notifications of this conversation for this client.
    nonisolated(nonsending) public func mute() async throws(IMError) {
        try await client.setMuted(id, true)
    }

    nonisolated(nonsending) public func unmute() async throws(IMError) {
        try await client.setMuted(id, false)
    }

    /// The conversation's current data; nil when it no longer exists.
    nonisolated(nonsending) public func fetch() async throws(IMError) -> IMConversation? {
        try await client.fetchConversation(id: id)
    }
}
