/// The kind of a protocol command (`cmd`), named as in LeanCloud's realtime command model.
public enum CommandType: String, Sendable, Codable, CaseIterable {
    case session, conv, direct, ack, rcp, unread, logs, error, read, patch, echo, goaway
    /// Block lists of conversations (`block`, `unblock`, `query`), as LeanCloud's `blacklist` command.
    case blacklist
    /// Interceptor hook requests and verdicts (server ⇄ bot host).
    case hook
    /// Push devices of the logged-in client (`add`, `remove`, `query`; Hookbot's, docs/PUSH.md "Devices").
    case device
}

/// The operation of a command (`op`).
public enum OpType: String, Sendable, Codable, CaseIterable {
    // session
    case open, opened, close, closed
    // conversations
    case start, started, add, added, remove, removed, join, joined, quit, left, invited, kicked
    case membersJoined = "members-joined"
    case membersLeft = "members-left"
    case query, results, count, result, update, updated, mute, unmute, muted, unmuted
    /// `session query-result`: the answer to `session query` (which client ids are online).
    case queryResult = "query-result"
    /// `conv max-read`: receipt timestamps of a conversation (request and reply).
    case maxRead = "max-read"
    // patch (recall)
    case modify, modified
    // member mutes ("shut-up"): requests, replies, events
    case addShutup = "add-shutup"
    case removeShutup = "remove-shutup"
    case queryShutup = "query-shutup"
    case shutupAdded = "shutup-added"
    case shutupRemoved = "shutup-removed"
    case shutupResult = "shutup-result"
    case shutuped, unshutuped
    case membersShutuped = "members-shutuped"
    case membersUnshutuped = "members-unshutuped"
    // block lists (`blacklist` requests and replies; events are `conv` commands)
    case block, unblock, blocked, unblocked
    case membersBlocked = "members-blocked"
    case membersUnblocked = "members-unblocked"
    // member roles
    case memberInfoUpdate = "member-info-update"
    case memberInfoUpdated = "member-info-updated"
    case memberInfoChanged = "member-info-changed"
    // interceptor
    case request, verdict
}

/// One protocol command. Every field but `cmd` is optional; which ones a command uses depends on
/// `cmd` and `op` (see docs/PROTOCOL.md). The JSON codec writes only the fields that are set.
///
/// The wire mappings of these fields (JSON keys, protobuf fields) are described once, in
/// scripts/command-fields.json, and generated from there (`scripts/generate-commands.py`): a new field
/// is a declaration in `Fields` below, a line in that table and a run of the generator (which also writes
/// the field's property on `Command`). It is not `Codable`: JSON goes through `JSONCommandCodec`, protobuf
/// through `ProtobufCommandCodec`.
///
/// Its fields live in one shared, copy-on-write `Storage` (Command+Storage.swift), as swift-protobuf keeps
/// large messages: a copy of a command is one retain instead of a retain of each of its dozens of strings
/// and arrays, and the first change to a shared copy copies the fields once (docs/PERFORMANCE.md, "`Command`
/// with copy-on-write storage"). The properties, of the same names and types as the fields, are generated
/// into Command+Fields.generated.swift.
public struct Command: Sendable, Equatable {
    @usableFromInline var storage: Storage

    public init(cmd: CommandType, op: OpType? = nil, i: Int? = nil) {
        storage = Storage(Fields(cmd: cmd, op: op, i: i))
    }

    /// Two commands are equal when their fields are, whether or not they share their storage.
    public static func == (lhs: Command, rhs: Command) -> Bool {
        lhs.storage.fields == rhs.storage.fields
    }
}

extension Command {
    /// The fields of a command, what `Command` was before its storage was shared. Each has an accessor of the
    /// same name and type on `Command` (generated from scripts/command-fields.json).
    @usableFromInline struct Fields: Sendable, Equatable {
        public var cmd: CommandType
        public var op: OpType?
        /// Request serial, echoed in the single reply to a request.
        public var i: Int?
        public var peerId: String?
        public var appId: String?
        public var serverTs: Int64?

        // Errors and results.
        public var code: Int?
        public var reason: String?
        public var detail: String?
        public var appCode: Int?

        // Session.
        public var tag: String?
        public var deviceId: String?
        /// In `session open`: `true` asks for a non-forced reopen (fails with 4111 when another device holds the tag).
        /// In `direct`: receipt requested.
        public var r: Bool?
        /// Timestamp in ms: signature time (session, conv), server time (ack, rcp, read), paging bound (logs).
        public var t: Int64?
        public var n: String?
        public var s: String?
        public var st: String?
        public var stTtl: Int?
        public var ua: String?

        // Messages.
        public var cid: String?
        public var msg: String?
        public var id: String?
        public var fromPeerId: String?
        public var timestamp: Int64?
        public var transient: Bool?
        public var offline: Bool?
        public var hasMore: Bool?
        /// Client-side de-duplication token: resending with the same token returns the first ack.
        public var dt: String?
        /// Message priority in group conversations: `high`, `normal` or `low`.
        public var priority: String?
        public var mentionPids: [String]?
        public var mentionAll: Bool?
        /// Cmd messages: the action and its extension fields.
        public var action: String?
        public var ext: [String: JSONValue]?

        // Acks and receipts.
        public var uid: String?
        public var mid: String?
        public var ids: [String]?
        public var read: Bool?
        public var from: String?

        // Conversations.
        public var m: [String]?
        public var unique: Bool?
        public var name: String?
        public var attr: JSONValue?
        public var `where`: JSONValue?
        public var limit: Int?
        public var skip: Int?
        public var sort: String?
        public var c: String?
        public var initBy: String?
        public var results: [ConversationInfo]?
        public var count: Int?
        public var lm: Int64?
        public var mu: [String]?
        public var cdate: Int64?
        public var udate: Int64?

        // History.
        public var tt: Int64?
        public var tmid: String?
        public var logs: [LogItem]?
        public var reversed: Bool?

        // Unread counts and patches.
        public var convs: [UnreadInfo]?
        public var patches: [PatchItem]?

        // Interceptor verdicts.
        public var verdict: String?
        public var silent: Bool?
        public var kind: String?

        // Temporary conversations and partial results.
        /// In `conv start`: create a temporary conversation (id prefix `_tmp:`, expires after `tempConvTTL` s).
        public var tempConv: Bool?
        /// Seconds a temporary conversation lives (in `conv start` and its reply).
        public var tempConvTTL: Int?
        /// In `conv query`: the temporary conversations to return.
        public var tempConvIds: [String]?
        /// In `conv added` / `conv removed`: the ids the change applies to (now members, or no longer members).
        public var allowedPids: [String]?
        /// In `conv added` / `conv removed`: the ids the change failed for, grouped by reason.
        public var failedPids: [FailedPids]?

        // Online status and receipt timestamps.
        /// In `session query`: the client ids to look up (at most 20).
        public var sessionPeerIds: [String]?
        /// In `session query-result`: those of them that are online.
        public var onlineSessionPeerIds: [String]?
        /// In `conv max-read`: the newest read mark of the other members (ms).
        public var maxReadTimestamp: Int64?
        /// In `conv max-read`: the newest delivery acknowledgement of the other members (ms).
        public var maxAckTimestamp: Int64?

        // Member mutes, block lists and roles.
        /// Paging cursor of `conv query-shutup` and `blacklist query` (request and reply).
        public var next: String?
        /// In `blacklist` commands: the conversation.
        public var srcCid: String?
        /// In `blacklist block` / `unblock`: the client ids to block or unblock.
        public var toPids: [String]?
        /// In the reply to `blacklist query`: the blocked client ids.
        public var blockedPids: [String]?
        /// In `conv add-shutup`: seconds until the mute ends by itself (Hookbot's extension; absent: until lifted).
        public var duration: Int?
        /// In `conv add-shutup` / `remove-shutup` / `query-shutup` and their events: the whole conversation
        /// is muted (Hookbot's extension: owner, managers and members unmuted by name may still speak).
        public var all: Bool?
        /// In `conv member-info-update` and `member-info-changed`: the member whose role changes.
        public var targetClientId: String?
        /// In `conv member-info-update` and `member-info-changed`: the new role (`Manager` or `Member`).
        public var role: String?

        // Binary messages and edits.
        /// In `direct`: a binary message's bytes as base64, in place of `msg` (protobuf: `binaryMsg` bytes).
        public var binaryMsg: String?
        /// In `direct` (offline delivery of an edited message): when it was last edited (ms).
        public var patchTimestamp: Int64?

        // What LeanCloud's SDKs send besides (see docs/PROTOCOL.md).
        /// In `conv query`: LeanCloud's bit flags; 1 = compact (results without `m`), 2 = with last messages.
        public var flag: Int?
        /// In `direct`: a will message, held and delivered when the sender's connection drops unexpectedly.
        public var will: Bool?
        /// In `logs`: the bound `t` is included (a closed interval at that end).
        public var tIncluded: Bool?
        /// In `logs`: the bound `tt` is included.
        public var ttIncluded: Bool?
        /// In `logs`: only messages whose `_lctype` is this.
        public var lctype: Int?
        /// In `conv max-read`: answer each member's timestamps in `maxReadTuples`.
        public var queryAllMembers: Bool?
        /// In the reply to `conv max-read` with `queryAllMembers`: each member's delivery and read marks.
        public var maxReadTuples: [MaxReadTuple]?
        /// In `session open`: the newest patch time the client has seen; patches after it are pushed.
        public var lastPatchTime: Int64?

        // Push devices (docs/PUSH.md, "Devices").
        /// In `session open`: the device's push token (LeanCloud's field: an APNs token from the iOS SDK, else FCM).
        public var deviceToken: String?
        /// In `device add` / `remove` and their replies: one device (`provider`, `token`, `deviceId`, `keys`).
        public var device: JSONValue?
        /// In the reply to `device query`: the client's devices.
        public var devices: JSONValue?
        /// In a `direct` message: LeanCloud's `pushData`, what offline receivers' notification says (a JSON object's
        /// text, or plain text); see docs/PUSH.md "What it says".
        public var pushData: String?

        @usableFromInline init(cmd: CommandType, op: OpType?, i: Int?) {
            self.cmd = cmd
            self.op = op
            self.i = i
        }
    }
}

/// A conversation as returned by `conv query` and carried in conversation events.
public struct ConversationInfo: Sendable, Codable, Equatable {
    public var objectId: String
    public var name: String?
    /// Members; absent for chat rooms.
    public var m: [String]?
    /// Creator.
    public var c: String?
    /// Chat room (transient conversation).
    public var tr: Bool?
    public var unique: Bool?
    public var attr: JSONValue?
    /// Members who muted the conversation.
    public var mu: [String]?
    /// Time of the last message (ms).
    public var lm: Int64?
    /// Seconds a temporary conversation has left.
    public var ttl: Int?
    public var createdAt: Int64?
    public var updatedAt: Int64?
    /// Hookbot's, answered to members when `conv query` has flag bit 4: each member's join time (ms), role,
    /// count of messages sent and whether it founded the conversation, by client id:
    /// `{"Tom": {"joinedAt": 1764…, "role": "Owner", "sent": 12, "founder": true}}`.
    public var memberInfo: JSONValue?

    public init(objectId: String) { self.objectId = objectId }
}

/// One member's receipt marks in a `conv max-read` reply with `queryAllMembers`.
public struct MaxReadTuple: Sendable, Codable, Equatable {
    public var pid: String
    public var maxAckTimestamp: Int64?
    public var maxReadTimestamp: Int64?

    public init(pid: String, maxAckTimestamp: Int64? = nil, maxReadTimestamp: Int64? = nil) {
        self.pid = pid
        self.maxAckTimestamp = maxAckTimestamp
        self.maxReadTimestamp = maxReadTimestamp
    }
}

/// Client ids a membership change failed for, with why.
public struct FailedPids: Sendable, Codable, Equatable {
    public var pids: [String]
    public var code: Int
    public var reason: String
    public var detail: String?

    public init(pids: [String], error: IMError) {
        self.pids = pids
        code = error.code
        reason = error.reason
        detail = error.detail
    }
}

/// One stored message in a `logs` reply.
public struct LogItem: Sendable, Codable, Equatable {
    public var msgId: String
    public var from: String
    public var data: String
    public var timestamp: Int64
    public var ackAt: Int64?
    public var readAt: Int64?
    public var recalled: Bool?
    public var priority: String?
    public var mentionPids: [String]?
    public var mentionAll: Bool?
    /// `data` is a binary message's bytes as base64.
    public var bin: Bool?
    /// When the message was last edited (or recalled), ms.
    public var patchTimestamp: Int64?

    public init(msgId: String, from: String, data: String, timestamp: Int64) {
        self.msgId = msgId
        self.from = from
        self.data = data
        self.timestamp = timestamp
    }
}

/// Unread state of one conversation for the logged-in member.
public struct UnreadInfo: Sendable, Codable, Equatable {
    public var cid: String
    public var unread: Int
    public var mid: String?
    public var timestamp: Int64?
    public var from: String?
    public var data: String?
    /// Whether an unread message mentions the member.
    public var mentioned: Bool?
    /// The newest message's bytes as base64 when it is a binary message (then `data` is absent).
    public var binaryMsg: String?
    /// When the newest message was last edited, ms.
    public var patchTimestamp: Int64?

    public init(cid: String, unread: Int) {
        self.cid = cid
        self.unread = unread
    }
}

/// A change to a stored message: a recall (`recall: true`) or an edit (new `data` or `binaryMsg`).
public struct PatchItem: Sendable, Codable, Equatable {
    public var cid: String
    public var mid: String
    public var timestamp: Int64
    public var recall: Bool?
    public var data: String?
    public var from: String?
    public var patchTimestamp: Int64?
    /// An edit's new content when it is binary: bytes as base64.
    public var binaryMsg: String?
    public var mentionPids: [String]?
    public var mentionAll: Bool?
    /// Why the server changed the message (absent: its sender did).
    public var patchCode: Int?
    public var patchReason: String?

    public init(cid: String, mid: String, timestamp: Int64) {
        self.cid = cid
        self.mid = mid
        self.timestamp = timestamp
    }
}
