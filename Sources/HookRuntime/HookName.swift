/// The hooks a plugin may define: their Lua names, and which hook a conversation event calls.
enum HookName: Int, CaseIterable {
    case onLoad, onUnload, beforeSend, moderation, translate, onReceive, onCmd, onTransient
    case onMemberJoined, onMemberLeft, onInvited, onKicked, onConversationUpdated, onRecall
    case membership, onHttp, onEdit
    case onOffline
    case onAction

    var luaName: String {
        switch self {
        case .onLoad: return "on_load"
        case .onUnload: return "on_unload"
        case .beforeSend: return "before_send"
        case .moderation: return "moderation"
        case .translate: return "translate"
        case .onReceive: return "on_receive"
        case .onCmd: return "on_cmd"
        case .onTransient: return "on_transient"
        case .onMemberJoined: return "on_member_joined"
        case .onMemberLeft: return "on_member_left"
        case .onInvited: return "on_invited"
        case .onKicked: return "on_kicked"
        case .onConversationUpdated: return "on_conversation_updated"
        case .onRecall: return "on_recall"
        case .membership: return "membership"
        case .onHttp: return "on_http"
        case .onEdit: return "on_edit"
        case .onOffline: return "on_offline"
        case .onAction: return "on_action"
        }
    }

    static func forEvent(_ e: HookEvent) -> HookName {
        switch e {
        case .membersJoined: return .onMemberJoined
        case .membersLeft: return .onMemberLeft
        case .invited: return .onInvited
        case .kicked: return .onKicked
        case .conversationUpdated: return .onConversationUpdated
        case .recalled: return .onRecall
        case .edited: return .onEdit
        }
    }
}
