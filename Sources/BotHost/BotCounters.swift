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
        stats.withLock { stats in
            switch note {
            case .arrived(.message): stats.messages += 1
            case .arrived(.transient): stats.transients += 1
            case .arrived(.command): stats.commands += 1
            case .arrived(.event): stats.events += 1
            case .verdict(.block), .verdict(.drop): stats.blocked += 1
            case .undecided: stats.undecided += 1
            case .notSent(_, _, "rate limit", _, _), .notSent(_, _, "sends per event", _, _): stats.rateLimited += 1
            case .notSent: stats.dropped += 1
            case .sent: stats.sent += 1
            case .actionFailed: stats.actionErrors += 1
            default: break
            }
        }
    }
}
