import Synchronization

/// The conversations a bot's plugins may act in besides the one of the event being handled: those the bot
/// is a member of, kept by its host. An action aimed at any other conversation fails in the plugin that
/// asked for it. Without a reach (tests, `hookbot test`) plugins may act anywhere.
public final class ConversationReach: Sendable {
    private let conversations = Mutex<Set<String>>([])

    public init() {}

    /// Replaces the whole set (after the host listed the bot's conversations).
    public func replace(with cids: Set<String>) { conversations.withLock { $0 = cids } }
    public func insert(_ cid: String) { conversations.withLock { _ = $0.insert(cid) } }
    public func remove(_ cid: String) { conversations.withLock { _ = $0.remove(cid) } }
    public func contains(_ cid: String) -> Bool { conversations.withLock { $0.contains(cid) } }
}
