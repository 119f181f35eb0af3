import Foundation
import IMCore

/// Everything the server keeps durably: conversations, members, messages, delivery cursors and read marks,
/// device tags, session tokens and signature nonces. Each call is one transaction.
///
/// Two implementations: `SQLiteStore` (an embedded file, one node; the default) and `PostgresStore` (one
/// database that several nodes share). Rules that decide what a change may do live beside this protocol
/// (`StoreRules`), so both apply the same checks with the same errors.
protocol ServerStore: MemberControlStore {
    /// Throws when the storage does not answer (readiness).
    func ping() async throws
    /// Closes the storage's connections.
    func shutdown() async
    /// The SQL dialect `conv query` compiles to.
    var queryDialect: ConversationQuery.Dialect { get }

    // MARK: Sessions

    /// Gives `tag` of `clientID` to `deviceID`; with `forced` false, refuses (returns nil) while another
    /// device holds it. Returns how many times the tag has been taken, so that across nodes the newest
    /// login of a tag wins.
    func claimTag(clientID: String, tag: String, deviceID: String, forced: Bool) async throws -> Int64?
    func issueToken(_ token: String, clientID: String, expiresAt: Int64, now: Int64) async throws
    func revokeToken(_ token: String) async throws
    func clientID(forToken token: String, now: Int64) async throws -> String?
    /// Records a signature nonce; true when it was already used within the window (a replay).
    func useNonce(scope: String, nonce: String, now: Int64, window: Int64, purge: Bool) async throws -> Bool

    // MARK: Conversations

    /// Creates a conversation, or returns the unique one with the same members; purges expired temporary
    /// conversations first when a temporary one is created.
    func createConversation(_ new: NewConversation) async throws -> (record: ConversationRecord, created: Bool)
    /// The conversation with this id; an expired temporary conversation no longer exists.
    func conversation(_ cid: String) async throws -> ConversationRecord?
    func members(of cid: String) async throws -> [String]
    func isMember(_ clientID: String, of cid: String) async throws -> Bool
    func memberCount(of cid: String) async throws -> Int
    func memberships(of clientID: String) async throws -> [Membership]
    /// Adds or removes members after `StoreRules.authorize` allows the actor, in one transaction.
    func changeMembers(_ request: MembershipRequest) async throws -> MembershipChange
    /// Applies a `conv update` patch; returns the members (to notify). A change of `attr.joinPolicy` (a lock)
    /// is for the owner, managers and interceptors (`trusted`, who need not be members), with `reason` kept
    /// as the lock's (`JoinPolicy.change`).
    func updateConversation(
        cid: String, by clientID: String, inRoom: Bool, patch: [String: JSONValue], now: Int64, trusted: Bool, reason: String?
    ) async throws -> [String]
    /// Each member's join time (ms) and how many of the conversation's newest `window` messages it sent.
    func memberActivity(of cid: String, window: Int) async throws -> [(clientID: String, joinedAt: Int64, sent: Int)]
    func setMuted(cid: String, clientID: String, muted: Bool) async throws
    /// Runs a compiled `conv query` as `viewer`, refusing unindexed queries over `scanLimit` conversations.
    func queryConversations(_ query: ConversationQuery, sort: String?, viewer: String, limit: Int, skip: Int, scanLimit: Int)
        async throws -> [ConversationInfo]
    /// The temporary conversations among `ids` that exist and `viewer` is a member of.
    func temporaryConversations(_ ids: [String], viewer: String) async throws -> [ConversationInfo]

    // MARK: Messages

    /// How the message pipeline commits a batch (see `MessageBatch`).
    var batchWriter: BatchWriter { get }
    func message(_ id: String) async throws -> MessageRecord?
    /// `limit` messages strictly between `afterT` and `beforeT` visible to `viewer`, in ascending order:
    /// the newest ones, or with `oldestFirst` the oldest ones.
    func history(cid: String, limit: Int, beforeT: Int64?, afterT: Int64?, viewer: String, oldestFirst: Bool) async throws
        -> [MessageRecord]
    /// Per conversation of the client, the stored messages after its delivery cursor that others sent
    /// (at most `limit` each, and whether there are more).
    func backlog(clientID: String, limit: Int) async throws -> [(records: [MessageRecord], hasMore: Bool)]
    /// Unread counts per conversation after the member's read marks.
    func unreadCounts(clientID: String) async throws -> [UnreadInfo]
    /// Recalls a message (`StoreRules.checkRecall`); returns it and the members to tell.
    func recall(cid: String, messageID: String, by clientID: String, now: Int64, window: Int64) async throws
        -> (record: MessageRecord, conversation: ConversationRecord, members: [String])
    /// Replaces a message's content (`StoreRules.checkEdit`); returns it and the members to tell.
    func edit(_ edit: MessageEdit) async throws -> (record: MessageRecord, conversation: ConversationRecord, members: [String])
    /// Moves the read mark (and the delivery cursor) of a member; returns the new mark and the newest
    /// receipt-asking message of each sender it covers.
    func markRead(cid: String, clientID: String, messageID: String?, t: Int64?) async throws -> (readT: Int64, receipts: [ReadReceipt])
    /// The newest read mark and delivery cursor of the other members (`conv max-read`).
    func receiptTimestamps(cid: String, clientID: String) async throws -> (readT: Int64, deliveredT: Int64)
    /// Ids of the receipt-asking messages others sent in a timestamp range (LeanCloud range acks).
    func receiptMessageIDs(cid: String, from: Int64, to: Int64, excluding clientID: String) async throws -> [String]
    /// Each other member's delivery cursor and read mark (`conv max-read` with `queryAllMembers`); members
    /// only (4317).
    func memberReceiptTimestamps(cid: String, clientID: String) async throws -> [MaxReadTuple]
    /// The messages recalled or edited after `after` (their `patch_t`) in the conversations `clientID` is
    /// a member of and may see, oldest patch first, at most `limit`.
    func patchedMessages(clientID: String, after: Int64, limit: Int) async throws -> [MessageRecord]
}

extension ServerStore {
    /// A `conv update` by a client that is not an interceptor, without a lock reason.
    func updateConversation(cid: String, by clientID: String, inRoom: Bool, patch: [String: JSONValue], now: Int64) async throws
        -> [String]
    {
        try await updateConversation(cid: cid, by: clientID, inRoom: inRoom, patch: patch, now: now, trusted: false, reason: nil)
    }
}

/// A group commit: the messages to store and the cursor moves to write, in one transaction.
struct MessageBatch: Sendable {
    var messages: [OutgoingMessage]
    var moves: [CursorKey: CursorMove]
    /// Newest timestamps of recently active conversations, as this node last committed them (a hint the
    /// single-node store may use instead of reading them; a shared database allocates them itself).
    var knownTimestamps: [String: Int64]
    var now: Int64
    /// The client ids in a chat room on this node (chat rooms have no stored members).
    var roomMembers: @Sendable (String) -> [String]
}

/// What became of each message of a batch.
enum BatchOutcome: Sendable {
    /// Stored; `members` receive it, or, for a chat room (`room`), the connections in the room.
    case stored(MessageRecord, members: [String], room: Bool)
    case duplicate(MessageRecord)
    case failed(IMError)
}

/// The outcome of each message, in order, and the conversations' new newest timestamps.
struct BatchResult: Sendable {
    var outcomes: [BatchOutcome]
    var timestamps: [String: Int64]
}

/// A store that commits on the calling thread (SQLite).
struct BlockingBatchWriter: Sendable {
    /// Commits a batch. `inline`: on an event loop (`MessagePipeline.commitInline`), where slow upkeep (a WAL checkpoint)
    /// is left for `upkeep` on the pipeline's writer thread.
    let write: @Sendable (MessageBatch, _ inline: Bool) throws -> BatchResult
    /// Whether an inline commit left upkeep.
    let upkeepDue: @Sendable () -> Bool
    /// Runs the upkeep left, if any (on the writer thread, before its next batch).
    let upkeep: @Sendable () -> Void
}

/// How a store commits batches: on the pipeline's own thread (SQLite: a blocking commit on a thread that
/// does nothing else) or suspending (PostgreSQL: the driver is asynchronous).
enum BatchWriter: Sendable {
    case blocking(BlockingBatchWriter)
    case suspending(@Sendable (MessageBatch) async throws -> BatchResult)
}

/// The checks both stores apply inside their transactions, so they refuse the same things with the same
/// errors.
enum StoreRules {
    /// The conversation, or error 4401.
    static func existing(_ record: ConversationRecord?, _ cid: String) throws -> ConversationRecord {
        guard let record else { throw IMError(.invalidMessagingTarget, "conversation \(cid) does not exist") }
        return record
    }

    /// Whether `request.actor` may make the change (join itself, invite, quit, kick).
    static func authorize(
        _ request: MembershipRequest, record: ConversationRecord, actorIsMember: Bool, controls: MemberControls = .none
    ) throws {
        let selfChange = request.clientIDs == [request.actor]
        switch request.kind {
        case .add:
            if let blocked = request.clientIDs.first(where: controls.isBlocked) {
                throw IMError(.conversationBlacklisted, "\(blocked) is blocked in \(request.cid)")
            }
            if record.transient {
                guard selfChange else { throw IMError(.conversationNotAllowed, "chat rooms can only be joined by the client itself") }
            } else if !selfChange, !actorIsMember {
                throw IMError(.conversationMembershipRequired, "only members may add others to \(request.cid)")
            } else if selfChange, !mayJoin(record, isMember: actorIsMember) {
                if let lock = record.lockReason {
                    throw IMError(
                        .conversationNotAllowed,
                        "\(request.cid) is locked (invite-only for now\(lock.isEmpty ? "" : ": \(lock)")): a member must add \(request.actor)"
                    )
                }
                throw IMError(
                    .conversationNotAllowed,
                    "\(request.cid) is invite-only (join policy '\(record.joinPolicy.rawValue)'): a member must add \(request.actor)")
            }
        case .remove:
            if record.transient {
                guard selfChange else { throw IMError(.conversationNotAllowed, "chat rooms have no members to remove") }
            } else if !actorIsMember, !request.actorIsTrusted {
                throw IMError(.conversationMembershipRequired, "only members may remove members of \(request.cid)")
            } else if !selfChange {
                // Any member removes members; managers and the owner only by someone above them.
                let actorRole = request.actorIsTrusted ? .manager : controls.role(of: request.actor, in: record)
                for target in request.clientIDs where target != request.actor {
                    let role = controls.role(of: target, in: record)
                    if role > .member, role >= actorRole {
                        throw IMError(
                            .conversationNotAllowed,
                            "\(request.actor) (\(actorRole.rawValue)) may not remove \(target) (\(role.rawValue)) from \(request.cid)")
                    }
                }
            }
        }
    }

    /// Whether a client may join the conversation by itself (`conv join`, `conv add` of itself): chat rooms
    /// and `open` conversations let anybody in, `invite` ones only their members. The one place the join
    /// policy is decided, for joins and for anything that must answer "could this client join?".
    static func mayJoin(_ record: ConversationRecord, isMember: Bool, isBlocked: Bool = false) -> Bool {
        !isBlocked && (record.transient || isMember || record.joinPolicy == .open)
    }

    /// Whether `clientID` may update the conversation (a member, or in the chat room; an interceptor,
    /// `trusted`, always).
    static func authorizeUpdate(record: ConversationRecord, members: [String], clientID: String, inRoom: Bool, trusted: Bool = false) throws
    {
        if !trusted, record.transient ? !inRoom : !members.contains(clientID) {
            throw IMError(
                .conversationUpdateRejected, "\(clientID) is not \(record.transient ? "in the chat room" : "a member of") \(record.id)")
        }
    }

    /// The message to recall, when `clientID` may recall it now.
    static func checkRecall(_ record: MessageRecord?, cid: String, messageID: String, by clientID: String, now: Int64, window: Int64)
        throws -> MessageRecord
    {
        guard let record, record.cid == cid else { throw IMError(.messageNotFound, "message \(messageID) is not in \(cid)") }
        guard record.from == clientID else { throw IMError(.messageOwnershipRequired, "only the sender may recall a message") }
        guard now - record.t <= window else {
            throw IMError(.messageRecallDisabled, "the recall window of \(window / 1000) s has passed")
        }
        return record
    }
}
