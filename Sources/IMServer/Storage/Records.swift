import Foundation
import IMCore

/// A stored message.
struct MessageRecord: Sendable, Equatable {
    var id: String
    var cid: String
    var from: String
    var data: String
    var t: Int64
    var receipt: Bool
    var priority: String?
    var recalled: Bool
    var patchT: Int64?
    /// Members the message mentions, and whether it mentions everyone.
    var mentionPids: [String]?
    var mentionAll: Bool
    /// A binary message: `data` is its bytes as base64.
    var binary: Bool

    init(
        id: String, cid: String, from: String, data: String, t: Int64, receipt: Bool, priority: String?,
        mentionPids: [String]? = nil, mentionAll: Bool = false, recalled: Bool = false, patchT: Int64? = nil, binary: Bool = false
    ) {
        self.id = id
        self.cid = cid
        self.from = from
        self.data = data
        self.t = t
        self.receipt = receipt
        self.priority = priority
        self.recalled = recalled
        self.patchT = patchT
        self.mentionPids = mentionPids?.isEmpty == false ? mentionPids : nil
        self.mentionAll = mentionAll
        self.binary = binary
    }

    var logItem: LogItem {
        var item = LogItem(msgId: id, from: from, data: data, timestamp: t)
        item.bin = binary ? true : nil
        item.patchTimestamp = patchT
        item.recalled = recalled ? true : nil
        item.priority = priority
        item.mentionPids = mentionPids
        item.mentionAll = mentionAll ? true : nil
        return item
    }

    /// The content a recalled message is replaced with.
    static let recalledPlaceholder = TypedMessage(type: MessageType.recalled.rawValue).encoded()
}

/// A stored conversation.
struct ConversationRecord: Sendable, Equatable {
    var id: String
    var name: String?
    var creator: String
    var transient: Bool
    var uniqueKey: String?
    var attr: JSONValue
    var muted: [String]
    var lm: Int64?
    var createdAt: Int64
    var updatedAt: Int64
    /// When a temporary conversation expires (ms); nil for the others.
    var expiresAt: Int64?
    /// Who may join by themselves (`StoreRules.mayJoin`).
    var joinPolicy: JoinPolicy = .open
    /// Set while a lock holds the conversation invite-only (an owner's, manager's or interceptor's `conv
    /// update` of `attr.joinPolicy` to `invite`): the reason given, empty when none; nil otherwise.
    var lockReason: String? = nil

    /// A 1:1 conversation: unique, with two members at creation (its join policy stays `invite`).
    var isOneToOne: Bool { uniqueKey.map { $0.split(separator: "\u{1F}", omittingEmptySubsequences: false).count == 2 } ?? false }

    /// The wire form; `members` is nil for chat rooms.
    func info(members: [String]?) -> ConversationInfo {
        var info = ConversationInfo(objectId: id)
        info.name = name
        info.c = creator
        info.m = transient ? nil : members
        info.tr = transient
        info.unique = uniqueKey != nil
        info.attr = attr
        info.mu = muted
        info.lm = lm
        info.createdAt = createdAt
        info.updatedAt = updatedAt
        if let expiresAt { info.ttl = Int(clamping: max(0, (expiresAt - Identifiers.nowMillis()) / 1000)) }
        return info
    }

    /// What a viewer sees of it in a query: members and mutes only for its members, no member list for
    /// chat rooms.
    func info(members: [String], viewer: String) -> ConversationInfo {
        guard !transient else { return info(members: nil) }
        guard members.contains(viewer) else {
            var outsider = info(members: nil)
            outsider.mu = nil
            return outsider
        }
        return info(members: members)
    }

    /// The key that makes a unique conversation unique: its sorted member set.
    static func uniqueKey(for members: [String]) -> String {
        Array(Set(members)).sorted().joined(separator: "\u{1F}")
    }

    /// The largest conversation name, in UTF-8 bytes.
    static let maxNameBytes = 1024
    /// The largest attribute object, as compact JSON.
    static let maxAttributeBytes = 64 * 1024

    /// Refuses names and attributes over the limits (4903), at creation and on every update alike.
    static func checkLimits(name: String?, attr: JSONValue?) throws {
        if let name, name.utf8.count > maxNameBytes {
            throw IMError(.invalidField, "name exceeds \(maxNameBytes) bytes")
        }
        if let attr, attr.jsonString().utf8.count > maxAttributeBytes {
            throw IMError(.invalidField, "attributes exceed \(maxAttributeBytes / 1024) KiB")
        }
        // The push templates members set (docs/PUSH.md, "Templates per conversation"): 4903 naming a bad key.
        if let templates = attr?[PushConversationTemplates.attributeName] { _ = try PushConversationTemplates(object: templates) }
    }
}

/// Who may join a conversation by themselves: anybody who knows its id (`open`), or only clients a member
/// adds (`invite`). See "Join policy" in docs/PROTOCOL.md.
enum JoinPolicy: String, Sendable, CaseIterable {
    case open, invite

    /// The custom attribute in which a creator asks for a policy at `conv start` (it stays in `attr`, so
    /// members see it, and `conv update` cannot change it).
    static let attributeKey = "joinPolicy"

    /// The policy a `conv start`'s attributes ask for, if any; 4903 for a value the server does not know,
    /// and for a chat room asked to be anything but open.
    static func requested(in attr: JSONValue?, transient: Bool) throws -> JoinPolicy? {
        guard let value = attr?.objectValue?[attributeKey] else { return nil }
        guard let text = value.stringValue, let policy = JoinPolicy(rawValue: text) else {
            if value.stringValue == "request" {
                throw IMError(.invalidField, "joinPolicy 'request' is not supported yet: use 'open' or 'invite'")
            }
            throw IMError(.invalidField, "joinPolicy must be 'open' or 'invite'")
        }
        if transient, policy != .open { throw IMError(.invalidField, "a chat room is always open: joinPolicy must be 'open'") }
        return policy
    }

    /// The policy in a stored row; a value this server does not know is treated as the stricter `invite`.
    static func stored(_ text: String?) -> JoinPolicy {
        text.map { JoinPolicy(rawValue: $0) ?? .invite } ?? .open
    }

    /// The longest lock reason kept (characters).
    static let maxLockReason = 500

    /// What a `conv update` whose result is `attr` does to the conversation's join policy: nil when it leaves
    /// `attr.joinPolicy` as it was; otherwise the new policy and lock reason (`reason`, or empty, for
    /// `invite`; nil for `open`). Switching between `open` and `invite` (a lock) is for the owner, managers
    /// and interceptors (`actor`: their role, `.manager` for an interceptor) of a group; anybody else, a 1:1,
    /// a temporary conversation, a chat room (always open), removing the attribute or another value: 4903.
    static func change(of record: ConversationRecord, to attr: JSONValue, by actor: MemberRole, reason: String?) throws
        -> (policy: JoinPolicy, lockReason: String?)?
    {
        let old = record.attr.objectValue?[attributeKey]
        let new = attr.objectValue?[attributeKey]
        guard old != new else { return nil }
        guard new != nil else { throw IMError(.invalidField, "joinPolicy cannot be removed: set it to 'open' or 'invite'") }
        guard let policy = try requested(in: attr, transient: record.transient) else { return nil }
        if record.expiresAt != nil || record.isOneToOne {
            throw IMError(
                .invalidField,
                "\(record.id) is a \(record.expiresAt != nil ? "temporary" : "1:1") conversation: its joinPolicy stays 'invite'")
        }
        guard actor >= .manager else {
            throw IMError(
                .invalidField,
                "joinPolicy of \(record.id) is changed only by its owner, its managers or an interceptor (a lock); members cannot")
        }
        if let reason, reason.count > maxLockReason {
            throw IMError(.invalidField, "the lock reason (detail) is limited to \(maxLockReason) characters")
        }
        return (policy, policy == .invite ? (reason ?? "") : nil)
    }
}

/// What `conv start` asks to create.
struct NewConversation: Sendable {
    var creator: String
    var members: [String]
    var name: String?
    var attr: JSONValue?
    var unique: Bool
    var transient: Bool
    /// Seconds a temporary conversation lives; nil for the others.
    var temporaryTTL: Int?
    var now: Int64
    /// The join policy the creator asked for (`JoinPolicy.requested`), if any.
    var requestedJoinPolicy: JoinPolicy? = nil

    /// The policy the conversation gets: chat rooms are open; otherwise what the creator asked for, or
    /// `invite` for temporary conversations and 1:1s (unique, two members with the creator), `open` for
    /// the others (groups, as LeanCloud has them).
    var joinPolicy: JoinPolicy {
        if transient { return .open }
        if let requestedJoinPolicy { return requestedJoinPolicy }
        if temporaryTTL != nil { return .invite }
        return unique && allMembers.count == 2 ? .invite : .open
    }

    /// The creator first, then the other members, each once.
    var allMembers: [String] {
        var all = [creator]
        for member in members where !all.contains(member) { all.append(member) }
        return all
    }

    /// The unique key, for a unique conversation that is neither a chat room nor temporary.
    var uniqueKey: String? { unique && !transient && temporaryTTL == nil ? ConversationRecord.uniqueKey(for: allMembers) : nil }

    /// A new id: `_tmp:` starts the ids of temporary conversations.
    func newID() -> String { temporaryTTL == nil ? Identifiers.conversationID() : "_tmp:" + Identifiers.conversationID() }

    var expiresAt: Int64? { temporaryTTL.map { now + Int64($0) * 1000 } }
}

/// A client's membership of a conversation that exists, with its delivery cursor and read mark.
struct Membership: Sendable {
    var cid: String
    var deliveredT: Int64
    var readT: Int64
}

/// A membership change asked for by `actor`: join, invite, quit or kick.
struct MembershipRequest: Sendable {
    enum Kind: Sendable { case add, remove }
    var kind: Kind
    var cid: String
    var actor: String
    var clientIDs: [String]
    var now: Int64
    /// The actor is a configured interceptor (the bot): it acts as a manager of every conversation.
    var actorIsTrusted = false
}

/// What a membership change did.
struct MembershipChange: Sendable {
    var record: ConversationRecord
    /// The clients added or removed (for a chat room, the actor).
    var changed: [String]
    /// The members after the change (empty for a chat room).
    var members: [String]
}

/// Identifies one member's delivery cursor.
struct CursorKey: Hashable, Sendable {
    var cid: String
    var clientID: String
}

/// What a member acknowledged in one conversation since the last transaction.
struct CursorMove: Sendable {
    /// Acknowledged message ids.
    var ids: Set<String> = []
    /// The end of the newest acknowledged timestamp range (LeanCloud's `ackMessage.tots`).
    var through: Int64?

    mutating func add(_ messageIDs: [String], through: Int64?) {
        ids.formUnion(messageIDs)
        if let through { self.through = max(self.through ?? through, through) }
    }
}

/// A message the sender of a `read` gets a read receipt for.
struct ReadReceipt: Sendable {
    var sender: String
    var id: String
}

/// Lists of client ids stored as JSON array text (a message's audience and mentions, a conversation's
/// mutes).
enum ClientIDList {
    static func text(_ ids: [String]) -> String {
        JSONValue.array(ids.map(JSONValue.string)).jsonString()
    }

    /// The ids in stored text; nil when there is no text or it is not a JSON array.
    static func parse(_ text: String?) -> [String]? {
        text.flatMap { JSONValue.parse($0)?.arrayValue?.compactMap(\.stringValue) }
    }
}

extension Sequence where Element: Sendable {
    /// The elements for which an asynchronous test holds, in order.
    func asyncFilter(_ isIncluded: (Element) async -> Bool) async -> [Element] {
        var kept: [Element] = []
        for element in self where await isIncluded(element) { kept.append(element) }
        return kept
    }
}
