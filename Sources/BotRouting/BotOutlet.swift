import HookRuntime
import IMCore

/// Where a bot's actions leave the routing core: the IM client of a running bot, or the recorder of
/// `hookbot test`. The core has already applied every rule (reach, screening of the bot's own messages,
/// rate limits, hop marker, mutes) before it calls the outlet.
public protocol BotOutlet: Sendable {
    /// Sends one of the bot's messages: screened by `before_send` and moderation, within the rate limits,
    /// with its hop count in `attrs["hookbot.hop"]`.
    nonisolated(nonsending) func send(_ message: HookMessage, transient: Bool, mentions: [String], replyTo: String?, plugin: String)
        async throws
    /// Carries out any other action: cmd messages, recalls, kicks, adds, attribute updates, and the mutes,
    /// warnings and log lines the core has handled already (for hosts that record or count them).
    nonisolated(nonsending) func perform(_ action: HookAction) async throws
    /// The id of the bot's 1:1 (unique) conversation with `user`, opened when there is none (`ctx.dm`).
    nonisolated(nonsending) func directConversation(with user: String) async throws -> String
}

/// Thrown by outlets that cannot open conversations.
public struct DirectMessagesUnsupported: Error, CustomStringConvertible {
    public init() {}
    public var description: String { "this host cannot open 1:1 conversations" }
}

extension BotOutlet {
    /// Outlets that cannot open conversations refuse `ctx.dm`.
    public nonisolated(nonsending) func directConversation(with user: String) async throws -> String {
        throw DirectMessagesUnsupported()
    }
}
