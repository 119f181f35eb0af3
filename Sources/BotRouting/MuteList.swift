import Foundation
import HookRuntime
import Synchronization

/// The users a bot's plugins muted (`ctx.mute`), per conversation: while an interceptor bot reviews
/// messages, a muted user's messages are dropped before delivery.
///
/// Kept in the plugin state store under the host's own namespace (`hookbot.host`, which no plugin can
/// load under), so mutes survive restarts, and in memory, so checking one costs no database read.
public final class MuteList: Sendable {
    /// The state namespace of the host itself.
    public static let namespace = "hookbot.host"
    /// How long the mirror keeps a mute made without a duration (the server lifts it when asked).
    public static let untilLifted = 365 * 86_400

    private let store: HookStateStore
    private let clock: HookClock
    private let until = Mutex<[String: Double]>([:])

    public init(store: HookStateStore, clock: HookClock) {
        self.store = store
        self.clock = clock
    }

    /// Reads the stored mutes that have not expired into memory (at start).
    public func load() {
        let now = clock.now()
        let keys = (try? store.keys(plugin: Self.namespace, prefix: "mute:", now: now)) ?? []
        var loaded: [String: Double] = [:]
        for key in keys {
            if let end = (try? store.get(plugin: Self.namespace, key: key, now: now))??.doubleValue, end > now {
                loaded[key] = end
            }
        }
        until.withLock { $0 = loaded }
    }

    /// Mutes `user` in `cid` for `seconds` from now (0 lifts a mute); stored before it takes effect.
    public func mute(_ user: String, in cid: String, for seconds: Int) throws {
        let now = clock.now()
        let key = Self.key(user, in: cid)
        try store.set(
            plugin: Self.namespace, key: key, value: .double(now + Double(seconds)), ttl: Double(max(seconds, 1)),
            now: now)
        until.withLock { $0[key] = seconds > 0 ? now + Double(seconds) : nil }
    }

    /// When `user`'s mute in `cid` ends (seconds since 1970), or nil when they are not muted.
    public func mutedUntil(_ user: String, in cid: String) -> Double? {
        let now = clock.now()
        let key = Self.key(user, in: cid)
        return until.withLock { mutes -> Double? in
            guard let end = mutes[key] else { return nil }
            if end <= now { mutes[key] = nil }
            return end > now ? end : nil
        }
    }

    private static func key(_ user: String, in cid: String) -> String { "mute:\(cid):\(user)" }
}
