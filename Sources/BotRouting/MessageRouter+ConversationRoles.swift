import HookRuntime

extension MessageRouter {
    /// Records `user`'s role in `cid` (`Owner`, `Manager`; nil or `Member`: none) for commands limited to
    /// `owner` or `manager`; kept in the host's state, so it survives restarts.
    public func setConversationRole(_ role: String?, of user: String, in cid: String) {
        let key = ConversationRoles.key(cid, user)
        let now = plugins.clock.now()
        plugins.members.setRole(role.map(ConversationMembersRole.name) ?? "member", of: user, in: cid)
        if let role, role != "Member" {
            try? plugins.store.set(plugin: MuteList.namespace, key: key, value: .string(role), now: now)
        } else {
            try? plugins.store.delete(plugin: MuteList.namespace, key: key)
        }
    }
}
