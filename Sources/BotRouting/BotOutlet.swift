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
}
