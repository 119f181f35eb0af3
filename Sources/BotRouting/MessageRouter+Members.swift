import Foundation
import HookRuntime
import IMCore

/// The members of the bot's conversations as the host knows them (`ConversationMembers`): what
/// `ctx.conv(cid).member(uid)` and `ctx.conv(cid).locked()` answer. The routing core keeps them current
/// from the events it routes (joins, departures, updates of the join policy) and the messages it receives;
/// a host adds what the server reports when it lists a conversation (`learn(_:)`).
extension MessageRouter {
    /// Records what an event changes, before its hooks run (so `on_member_joined` finds the new member).
    func track(_ event: HookEvent) {
        let members = plugins.members
        switch event {
        case .membersJoined(let cid, let users, _, let founding):
            members.joined(users, in: cid, at: plugins.clock.now(), founding: founding)
        case .membersLeft(let cid, let users, _):
            if users.contains(settings.botID) { members.forget(cid) } else { members.left(users, from: cid) }
        case .kicked(let cid, _):
            members.forget(cid)
        case .conversationUpdated(let cid, let attrs, _):
            // A lock is a change of the join policy: `attr.joinPolicy` in the patch.
            if let policy = (attrs["attr." + Self.joinPolicyKey] ?? attrs[Self.joinPolicyKey])?.stringValue {
                members.setLocked(policy == "invite", cid)
            }
        case .invited, .recalled, .edited:
            break
        }
    }

    static let joinPolicyKey = "joinPolicy"

    /// Replaces what is known of a conversation with what the server answered for it (`conv query` with
    /// the member-info flag): every member's join time, role and sent-message count, founders, and
    /// whether it is invite-only.
    public func learn(_ conversation: ConversationInfo) {
        guard conversation.tr != true else { return }
        let info = conversation.memberInfo?.objectValue ?? [:]
        var known: [String: MemberInfo] = [:]
        let creator = conversation.c
        for member in conversation.m ?? [] {
            let fields = info[member]?.objectValue ?? [:]
            let joinedAt = (fields["joinedAt"]?.doubleValue).map { $0 / 1000 } ?? plugins.clock.now()
            let role = fields["role"]?.stringValue.map(ConversationMembersRole.name) ?? (member == creator ? "owner" : "member")
            known[member] = MemberInfo(
                joinedAt: joinedAt, role: role, messages: fields["sent"]?.intValue ?? 0,
                founder: fields["founder"]?.boolValue == true)
        }
        let locked = conversation.attr?.objectValue?[Self.joinPolicyKey]?.stringValue == "invite"
        plugins.members.replace(conversation.objectId, members: known, locked: locked)
        // A unique conversation of the bot and one member is their 1:1 conversation (`ctx.dm`).
        if conversation.unique == true, let members = conversation.m, members.count == 2, members.contains(settings.botID),
            let other = members.first(where: { $0 != settings.botID })
        {
            plugins.members.setDirect(conversation.objectId, with: other)
        }
    }

    /// Forgets a conversation the bot is no longer in.
    public func forgetMembers(of cid: String) { plugins.members.forget(cid) }
}

/// The role names plugins see (`owner`, `manager`, `member`) for the server's (`Owner`, `Manager`, `Member`).
enum ConversationMembersRole {
    static func name(_ serverRole: String) -> String {
        switch serverRole.lowercased() {
        case "owner": "owner"
        case "manager": "manager"
        default: "member"
        }
    }
}
