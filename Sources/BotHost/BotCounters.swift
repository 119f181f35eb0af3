import BotRouting
import Synchronization

/// Counters of a running bot host.
public struct BotStats: Sendable, Equatable, Encodable {
    public var messages = 0
    public var blocked = 0
    public var commands = 0
    public var transients = 0
    public var events = 0
    public var sent = 0
    public var dropped = 0
    public var rateLimited = 0
    public var verdicts = 0
    /// Interception requests answered with `none` because the review could not finish in time.
    public var undecided = 0
    public var actionErrors = 0
}

/// A bot's counters, updated from what its routing core reports and read by its admin API.
final class BotCounters: Sendable {
    private let stats = Mutex(BotStats())

    var snapshot: BotStats { stats.withLock { $0 } }

    func update(_ change: (inout BotStats) -> Void) { stats.withLock { change(&$0) } }

    /// Counts one thing the routing core did.
    func count(_ note: RoutingNote) {
        // Only the notes that are counted take the lock (most notes of a message are not).
        let counter: WritableKeyPath<BotStats, Int>
        switch note {
        case .arrived(.message): counter = \.messages
        case .arrived(.transient): counter = \.transients
        case .arrived(.command): counter = \.commands
        case .arrived(.event): counter = \.events
        case .verdict(.block), .verdict(.drop): counter = \.blocked
        case .undecided: counter = \.undecided
        case .notSent(_, _, "rate limit", _, _), .notSent(_, _, "sends per event", _, _): counter = \.rateLimited
        case .notSent: counter = \.dropped
        case .sent: counter = \.sent
        case .actionFailed: counter = \.actionErrors
        default: return
        }
        stats.withLock { $0[keyPath: counter] += 1 }
    }
}
