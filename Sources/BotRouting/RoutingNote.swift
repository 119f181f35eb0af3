import HookRuntime
import IMCore

/// What the routing core did, as it happens: a running bot counts and logs these, `hookbot test`
/// records them for a scenario's expectations.
public enum RoutingNote: Sendable {
    /// What came in, before any plugin ran.
    public enum Arrival: Sendable { case message, transient, command, event }

    /// What review or moderation decided about an incoming message.
    public enum Verdict: Sendable, Equatable {
        case allow
        /// Moderation replaced the text.
        case replace(String)
        /// Moderation blocked it (`reason`, `code` and `silent` as the plugin gave them).
        case block(reason: String?, code: Int?, silent: Bool, by: String?)
        /// `before_send` dropped it (interceptor review).
        case drop(reason: String?, by: String?)
        /// `before_send` changed it (interceptor review).
        case modify
        /// The sender is muted in the conversation until then (seconds since 1970).
        case muted(until: Double)
    }

    case arrived(Arrival)
    case verdict(Verdict)
    /// A review could not finish in time: the server's failure policy decides.
    case undecided
    /// Not answered: it is the bot's own message, or it carries `hops` bot replies already.
    case ignored(hops: Int)
    /// The message `on_receive` gets (after moderation and translation).
    case delivered(HookMessage)
    case translated(String)
    /// One of the bot's own messages (its text, or a cmd message's action) was not sent: `by` is the
    /// plugin whose `before_send` or moderation stopped it, `"rate limit"`, or `"sends per event"`.
    case notSent(cid: String, text: String, by: String, reason: String?, plugin: String)
    case sent(cid: String, transient: Bool)
    case hookErrors([HookError])
    case actionFailed(action: String, cid: String, plugin: String, error: String)
}
