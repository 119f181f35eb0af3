/// What the server asks an interceptor before it acts (docs/PROTOCOL.md, "Interception"): a message to be
/// delivered, an edit, a membership change, or what to push to a stored message's offline receivers.
///
/// The server, the bot host and the SDK's in-process attachment pass these values; only a connection that
/// carries commands (a WebSocket, another cluster node) encodes them, as a `hook request` command
/// (`HookRequest(command:)`, `command(id:)` in HookWire.swift).
public enum HookRequest: Sendable, Equatable {
    /// A message `from` a member to `cid` (`priority`: `high`, `normal` or `low` in group conversations, as
    /// the sender gave it).
    case message(cid: String, from: String, content: Content, priority: String?, mentionPids: [String]?)
    /// An edit of the stored message `messageID` by `from`, with its new content: reviewed like a send.
    case edit(cid: String, messageID: String, from: String, content: Content, mentionPids: [String]?)
    /// `actor` asks for `members` to join, be invited, leave or be kicked.
    case membership(cid: String, actor: String, members: [String], action: MembershipAction)
    /// A stored message's offline receivers and their default `notification` (`title`, `body`, `sound`,
    /// `badge`, `data`, `collapse_id`) (`on_offline`, docs/PUSH.md). `timestamp` (ms since 1970) and
    /// `deadlineMillis` (how long the server waits for the answer) are nil when the request did not say.
    case offline(
        cid: String, messageID: String, from: String, timestamp: Int64?, mentionPids: [String]?, mentionAll: Bool,
        content: Content, receivers: [String], notification: [String: JSONValue], deadlineMillis: Int?)

    /// The request's `kind` on the wire.
    public enum Kind: String, Sendable, CaseIterable {
        case message, edit, membership, offline
    }

    /// A message's content: text (a typed message's JSON or plain text) or binary bytes in base64.
    public enum Content: Sendable, Equatable {
        case text(String)
        case binary(base64: String)

        /// The text, nil for binary content.
        public var text: String? {
            if case .text(let text) = self { text } else { nil }
        }
    }

    /// What a membership change asks for: a member joins by itself, is invited, leaves by itself or is kicked.
    public enum MembershipAction: String, Sendable, CaseIterable {
        case join, invite, quit, kick
    }

    public var kind: Kind {
        switch self {
        case .message: .message
        case .edit: .edit
        case .membership: .membership
        case .offline: .offline
        }
    }

    public var cid: String {
        switch self {
        case .message(let cid, _, _, _, _), .edit(let cid, _, _, _, _), .membership(let cid, _, _, _),
            .offline(let cid, _, _, _, _, _, _, _, _, _):
            cid
        }
    }

    /// Who the request is about: the sender, editor or actor.
    public var from: String {
        switch self {
        case .message(_, let from, _, _, _), .edit(_, _, let from, _, _), .membership(_, let from, _, _),
            .offline(_, _, let from, _, _, _, _, _, _, _):
            from
        }
    }

    /// This request with its content replaced by `text` (what the next interceptor of a chain sees after a
    /// `modify`); a membership change has no content and stays as it is.
    public func replacingContent(with text: String) -> HookRequest {
        switch self {
        case .message(let cid, let from, _, let priority, let mentionPids):
            .message(cid: cid, from: from, content: .text(text), priority: priority, mentionPids: mentionPids)
        case .edit(let cid, let messageID, let from, _, let mentionPids):
            .edit(cid: cid, messageID: messageID, from: from, content: .text(text), mentionPids: mentionPids)
        case .offline(
            let cid, let messageID, let from, let timestamp, let mentionPids, let mentionAll, _, let receivers, let notification,
            let deadline):
            .offline(
                cid: cid, messageID: messageID, from: from, timestamp: timestamp, mentionPids: mentionPids, mentionAll: mentionAll,
                content: .text(text), receivers: receivers, notification: notification, deadlineMillis: deadline)
        case .membership:
            self
        }
    }
}
