import Synchronization

/// What the host knows of one member of a conversation (`ctx.conv(cid).member(uid)`).
public struct MemberInfo: Sendable, Equatable {
    /// When the member joined, in seconds since 1970 (the server's join time, or when the host saw the join).
    public var joinedAt: Double
    /// `owner`, `manager` or `member`.
    public var role: String
    /// Messages the member sent in the conversation: those the server counted when the host listed the
    /// conversation, plus those delivered to the host since.
    public var messages: Int
    /// Added when the conversation was created (`conv start`), not a later joiner.
    public var founder: Bool

    public init(joinedAt: Double, role: String = "member", messages: Int = 0, founder: Bool = false) {
        self.joinedAt = joinedAt
        self.role = role
        self.messages = messages
        self.founder = founder
    }
}

/// The members of the conversations a bot is in, with their join times, roles and message counts, and
/// whether each conversation is locked (invite-only by a lock): kept in the host's memory so that a hook
/// reads them without waiting (`ctx.conv(cid).member(uid)`, `ctx.conv(cid).locked()`). The host fills it
/// from the server when it lists its conversations and keeps it current from membership events, role
/// changes, conversation updates and the messages it receives (the routing core does the latter).
public final class ConversationMembers: Sendable {
    private struct Conversation {
        var members: [String: MemberInfo] = [:]
        var locked = false
    }

    private let conversations = Mutex<[String: Conversation]>([:])
    /// The bot's 1:1 (unique) conversations, by the other member: a cache of what the server keeps
    /// (opening a unique conversation again finds the same one), so it is capped, not complete.
    private let directs = Mutex<[String: String]>([:])
    /// How many 1:1 conversations are remembered (about 100 bytes each); past it, one is forgotten per
    /// new one and found again on the server when needed.
    public static let directCap = 50_000

    public init() {}

    /// When each conversation the bot only reviews (as the server's interceptor) was last asked for.
    private let asked = Mutex<[String: Double]>([:])

    /// Whether the host should ask the server for `cid`'s members now (a member it reviews is unknown):
    /// at most once per `every` seconds per conversation, for at most `directCap` conversations at once.
    public func claimQuery(of cid: String, now: Double, every: Double) -> Bool {
        asked.withLock { all in
            if let last = all[cid], now - last < every { return false }
            if all[cid] == nil, all.count >= Self.directCap { all = all.filter { now - $0.value < every } }
            all[cid] = now
            return true
        }
    }

    /// The bot's 1:1 conversation with `user`, when the host knows it.
    public func direct(with user: String) -> String? {
        directs.withLock { $0[user] }
    }

    /// Records that `cid` is the bot's 1:1 conversation with `user`.
    public func setDirect(_ cid: String, with user: String) {
        directs.withLock { all in
            if all[user] == nil, all.count >= Self.directCap, let any = all.keys.first { all[any] = nil }
            all[user] = cid
        }
    }

    /// The member `user` of `cid`, nil when the host does not know it as a member.
    public func member(_ user: String, of cid: String) -> MemberInfo? {
        conversations.withLock { $0[cid]?.members[user] }
    }

    /// The known members of `cid`.
    public func members(of cid: String) -> [String: MemberInfo] {
        conversations.withLock { $0[cid]?.members ?? [:] }
    }

    /// Whether `cid` is locked (a lock switched it to invite-only), as the host knows.
    public func isLocked(_ cid: String) -> Bool {
        conversations.withLock { $0[cid]?.locked ?? false }
    }

    /// Replaces what is known of `cid` (after the host listed it on the server).
    public func replace(_ cid: String, members: [String: MemberInfo], locked: Bool) {
        conversations.withLock { $0[cid] = Conversation(members: members, locked: locked) }
    }

    /// Records members who joined at `time`; founders were added when the conversation was created. A
    /// member already known keeps its role and count.
    public func joined(_ users: [String], in cid: String, at time: Double, founding: Bool) {
        conversations.withLock { all in
            var conversation = all[cid] ?? Conversation()
            for user in users where conversation.members[user] == nil {
                conversation.members[user] = MemberInfo(joinedAt: time, founder: founding)
            }
            all[cid] = conversation
        }
    }

    /// Forgets members who left or were removed.
    public func left(_ users: [String], from cid: String) {
        conversations.withLock { all in
            for user in users { all[cid]?.members[user] = nil }
        }
    }

    /// Forgets a conversation (the bot left it), and it as a 1:1 conversation.
    public func forget(_ cid: String) {
        conversations.withLock { _ = $0.removeValue(forKey: cid) }
        directs.withLock { all in
            for (user, direct) in all where direct == cid { all[user] = nil }
        }
    }

    /// Counts a message `user` sent in `cid` (only for a known member).
    public func counted(_ user: String, in cid: String) {
        conversations.withLock { all in
            if all[cid]?.members[user] != nil { all[cid]?.members[user]?.messages += 1 }
        }
    }

    /// Sets a known member's role (`owner`, `manager`, `member`).
    public func setRole(_ role: String, of user: String, in cid: String) {
        conversations.withLock { all in
            if all[cid]?.members[user] != nil { all[cid]?.members[user]?.role = role }
        }
    }

    /// Records that `cid` was locked or unlocked.
    public func setLocked(_ locked: Bool, _ cid: String) {
        conversations.withLock { all in
            var conversation = all[cid] ?? Conversation()
            conversation.locked = locked
            all[cid] = conversation
        }
    }
}
