import Foundation
import IMCore

/// What a message carries.
public enum IMMessageContent: Sendable {
    /// A typed message: a built-in kind (text, image, audio, video, location, file, recalled) or an
    /// application type no Swift type is registered for (its fields are in `TypedMessage.fields`).
    case typed(TypedMessage)
    /// An application type decoded to the Swift type registered for it.
    case custom(any IMCustomMessage)
    /// A body that is not typed JSON, as sent.
    case common(String)

    /// A text message.
    public static func text(_ text: String, attributes: [String: JSONValue]? = nil) -> Self {
        .typed(.text(text, attributes: attributes))
    }

    /// An image message; `text` is an optional caption.
    public static func image(_ file: FileInfo, text: String? = nil, attributes: [String: JSONValue]? = nil) -> Self {
        .typed(TypedMessage(type: MessageType.image.rawValue, text: text, attributes: attributes, file: file))
    }

    /// An audio message (`file.duration` in seconds).
    public static func audio(_ file: FileInfo, text: String? = nil, attributes: [String: JSONValue]? = nil) -> Self {
        .typed(TypedMessage(type: MessageType.audio.rawValue, text: text, attributes: attributes, file: file))
    }

    /// A video message (`file.duration` in seconds).
    public static func video(_ file: FileInfo, text: String? = nil, attributes: [String: JSONValue]? = nil) -> Self {
        .typed(TypedMessage(type: MessageType.video.rawValue, text: text, attributes: attributes, file: file))
    }

    /// A file message.
    public static func file(_ file: FileInfo, text: String? = nil, attributes: [String: JSONValue]? = nil) -> Self {
        .typed(TypedMessage(type: MessageType.file.rawValue, text: text, attributes: attributes, file: file))
    }

    /// A location message.
    public static func location(_ location: Location, text: String? = nil, attributes: [String: JSONValue]? = nil) -> Self {
        .typed(TypedMessage(type: MessageType.location.rawValue, text: text, attributes: attributes, location: location))
    }

    /// The typed form of the content (custom types encoded); nil for a common message.
    public var typedMessage: TypedMessage? {
        switch self {
        case .typed(let typed): typed
        case .custom(let custom): try? custom.encodedTypedMessage()
        case .common: nil
        }
    }

    /// The `_lctype` of a typed message; nil for a common message.
    public var messageType: Int? { typedMessage?.type }

    /// The text of a typed message (`_lctext`), or the body of a common message.
    public var text: String? {
        switch self {
        case .common(let body): body
        default: typedMessage?.text
        }
    }

    /// The free attributes of a typed message (`_lcattrs`).
    public var attributes: [String: JSONValue]? { typedMessage?.attributes }

    /// The registered Swift value when the content decoded to `type`.
    public func `as`<T: IMCustomMessage>(_ type: T.Type) -> T? {
        if case .custom(let custom) = self { return custom as? T }
        return nil
    }

    /// The wire body (`msg`).
    public var body: String {
        switch self {
        case .common(let body): body
        default: typedMessage?.encoded() ?? ""
        }
    }

    /// Decodes a wire body, using `registry` for application types.
    static func decode(_ body: String, registry: IMMessageRegistry) -> Self {
        guard let typed = TypedMessage.decode(body) else { return .common(body) }
        if typed.type > 0, let custom = registry.decode(typed) { return .custom(custom) }
        return .typed(typed)
    }
}

/// Where a message stands, seen from this client.
public enum IMMessageStatus: Sendable, Equatable {
    /// Sent by this client and stored by the server.
    case sent
    /// Sent by this client and acknowledged by at least one recipient.
    case delivered
    /// Sent by this client and read by at least one recipient.
    case read
    /// Received from another client.
    case received
    /// Recalled by its sender; the content is the recalled placeholder.
    case recalled
}

/// Priority of a message (meaningful in large conversations and chat rooms).
public enum IMMessagePriority: String, Sendable {
    case high, normal, low
}

/// A message of a conversation: sent, received or read from history.
public struct IMMessage: Sendable {
    public var id: String
    public var conversationId: String
    /// The sender's client id.
    public var from: String
    /// Server timestamp in milliseconds; unique and increasing within a conversation.
    public var timestamp: Int64
    public var content: IMMessageContent
    /// The body as it travels (`msg`): typed JSON or any other text.
    public var body: String
    /// Transient: never stored, delivered to online members only.
    public var isTransient: Bool = false
    /// Delivered from the backlog at login rather than live.
    public var isOffline: Bool = false
    /// The sender asked for receipts.
    public var receiptRequested: Bool = false
    public var priority: IMMessagePriority?
    public var mentionPids: [String]?
    public var mentionAll: Bool?
    public var status: IMMessageStatus
    /// When a recipient acknowledged it / read it (history of own messages), in ms.
    public var deliveredAt: Int64?
    public var readAt: Int64?
    /// A binary message's bytes (`binaryMsg`); then `content` is `.common("")` and `body` is empty.
    public var binary: Data?
    /// When its sender last edited it (ms); nil for a message never edited.
    public var editedAt: Int64?

    public init(
        id: String, conversationId: String, from: String, timestamp: Int64, content: IMMessageContent,
        body: String? = nil, status: IMMessageStatus
    ) {
        self.id = id
        self.conversationId = conversationId
        self.from = from
        self.timestamp = timestamp
        self.content = content
        self.body = body ?? content.body
        self.status = status
    }

    /// The body as a typed message, exactly as received (for a registered custom type this includes keys
    /// the Swift type does not model); nil for a common message.
    public var typedMessage: TypedMessage? { TypedMessage.decode(body) }

    /// Recalled by its sender.
    public var isRecalled: Bool { status == .recalled }
}

/// Options for sending a message.
public struct IMSendOptions: Sendable {
    /// Deliver to online members only and never store it.
    public var transient: Bool = false
    /// Ask for receipts: `IMEvent.delivered` when a recipient's device acknowledges it, `IMEvent.read`
    /// when a recipient marks it read.
    public var receipt: Bool = false
    public var priority: IMMessagePriority?
    /// Members to notify specially, or all of them.
    public var mentionPids: [String]?
    public var mentionAll: Bool = false
    /// The de-duplication token sent as `dt`. Left nil, a fresh token (a per-client random prefix and a counter) is used; pass the same token to
    /// retry a send whose outcome is unknown (for example after `REQUEST_TIMEOUT`) without duplicating it.
    public var dedupeToken: String?
    /// What the push notification of members who are offline says (LeanCloud's `pushData`); nil: the
    /// server's templates. Ignored for transient messages (they are never pushed).
    public var pushData: IMPushData?

    public init(
        transient: Bool = false, receipt: Bool = false, priority: IMMessagePriority? = nil,
        mentionPids: [String]? = nil, mentionAll: Bool = false, dedupeToken: String? = nil, pushData: IMPushData? = nil
    ) {
        self.transient = transient
        self.receipt = receipt
        self.priority = priority
        self.mentionPids = mentionPids
        self.mentionAll = mentionAll
        self.dedupeToken = dedupeToken
        self.pushData = pushData
    }

    public static let `default` = IMSendOptions()
    public static let transient = IMSendOptions(transient: true)
    public static let receipt = IMSendOptions(receipt: true)
}

/// A cmd message: an action with string-keyed extension values, delivered to online members only.
public struct IMCmdMessage: Sendable {
    public var id: String
    public var conversationId: String
    public var from: String
    public var timestamp: Int64
    public var action: String
    public var ext: [String: JSONValue]

    public init(
        id: String, conversationId: String, from: String, timestamp: Int64, action: String,
        ext: [String: JSONValue]
    ) {
        self.id = id
        self.conversationId = conversationId
        self.from = from
        self.timestamp = timestamp
        self.action = action
        self.ext = ext
    }
}

/// A delivery or read receipt for a message this client sent.
public struct IMReceipt: Sendable, Equatable {
    public var conversationId: String
    /// The message (delivery receipts); nil for read receipts, which cover everything up to `timestamp`.
    public var messageId: String?
    /// The recipient who acknowledged or read.
    public var by: String
    /// Delivery time, or the timestamp read up to.
    public var timestamp: Int64
}

/// The unread state of one conversation, sent at login.
public struct IMUnreadCount: Sendable {
    public var conversationId: String
    public var count: Int
    /// The conversation's last message, when the server sent it.
    public var lastMessage: IMMessage?
}
