/// What the server asks an interceptor before it acts (docs/PROTOCOL.md, "Interception"): a message to be
/// delivered, an edit, a membership change, or what to push to a stored message's offline receivers.
///
/// The server, the bot host and the SDK's in-process attachment pass these values; only a connection that
/// carries commands (a WebSocket, another cluster node) encodes them, as a `hook request` command
/// (`HookRequest(command:)`, `command(id:)` in HookWire.swift).
public enum HookRequest: Sendable, Equatable {
    case message(Message)
    /// An edit of a stored message, reviewed like a send.
    case edit(Edit)
    case membership(Membership)
    /// A stored message's offline receivers and their default notification (`on_offline`, docs/PUSH.md).
    case offline(Offline)

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

    public struct Message: Sendable, Equatable {
        public var cid: String
        public var from: String
        public var content: Content
        /// `high`, `normal` or `low` in group conversations, as the sender gave it.
        public var priority: String?
        public var mentionPids: [String]?

        public init(cid: String, from: String, content: Content, priority: String? = nil, mentionPids: [String]? = nil) {
            self.cid = cid
            self.from = from
            self.content = content
            self.priority = priority
            self.mentionPids = mentionPids
        }
    }

    public struct Edit: Sendable, Equatable {
        public var cid: String
        /// The id of the message being edited.
        public var messageID: String
        /// Who edits it.
        public var from: String
        /// The new content.
        public var content: Content
        public var mentionPids: [String]?

        public init(cid: String, messageID: String, from: String, content: Content, mentionPids: [String]? = nil) {
            self.cid = cid
            self.messageID = messageID
            self.from = from
            self.content = content
            self.mentionPids = mentionPids
        }
    }

    public struct Membership: Sendable, Equatable {
        /// What is asked for: a member joins by itself, is invited, leaves by itself or is kicked.
        public enum Action: String, Sendable, CaseIterable {
            case join, invite, quit, kick
        }

        public var cid: String
        /// Who asks (the joining member, the inviter, the kicker).
        public var actor: String
        public var members: [String]
        public var action: Action

        public init(cid: String, actor: String, members: [String], action: Action) {
            self.cid = cid
            self.actor = actor
            self.members = members
            self.action = action
        }
    }

    public struct Offline: Sendable, Equatable {
        public var cid: String
        /// The stored message's id.
        public var messageID: String
        public var from: String
        /// When the message was stored (ms since 1970); nil when the request did not say.
        public var timestamp: Int64?
        public var mentionPids: [String]?
        public var mentionAll: Bool
        public var content: Content
        /// The receivers with a push held for this message.
        public var receivers: [String]
        /// The default notification (`title`, `body`, `sound`, `badge`, `data`, `collapse_id`).
        public var notification: [String: JSONValue]
        /// How long the server waits for the answer, in milliseconds; nil when the request did not say.
        public var deadlineMillis: Int?

        public init(
            cid: String, messageID: String, from: String, timestamp: Int64?, mentionPids: [String]? = nil, mentionAll: Bool = false,
            content: Content, receivers: [String], notification: [String: JSONValue], deadlineMillis: Int?
        ) {
            self.cid = cid
            self.messageID = messageID
            self.from = from
            self.timestamp = timestamp
            self.mentionPids = mentionPids
            self.mentionAll = mentionAll
            self.content = content
            self.receivers = receivers
            self.notification = notification
            self.deadlineMillis = deadlineMillis
        }
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
        case .message(let message): message.cid
        case .edit(let edit): edit.cid
        case .membership(let membership): membership.cid
        case .offline(let offline): offline.cid
        }
    }

    /// Who the request is about: the sender, editor or actor.
    public var from: String {
        switch self {
        case .message(let message): message.from
        case .edit(let edit): edit.from
        case .membership(let membership): membership.actor
        case .offline(let offline): offline.from
        }
    }

    /// This request with its content replaced by `text` (what the next interceptor of a chain sees after a
    /// `modify`); a membership change has no content and stays as it is.
    public func replacingContent(with text: String) -> HookRequest {
        switch self {
        case .message(var message):
            message.content = .text(text)
            return .message(message)
        case .edit(var edit):
            edit.content = .text(text)
            return .edit(edit)
        case .offline(var offline):
            offline.content = .text(text)
            return .offline(offline)
        case .membership:
            return self
        }
    }
}
