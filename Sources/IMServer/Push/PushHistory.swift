import Foundation
import IMCore
import PushProviders
import Synchronization

/// The last pushes this server sent, retried or dropped, in memory, for the console's "Last pushes" panel
/// (docs/CONSOLE.md): the newest `capacity` attempts, and counts per provider and outcome since the start.
/// Recording costs a lock and an append; the notification's text is decoded only when read.
final class PushHistory: Sendable {
    /// Attempts kept (the oldest go first).
    static let capacity = 200

    private struct Recorded {
        var seq: Int
        var time: Int64
        var item: PushQueueItem
        var badge: Int?
        var outcome: String
        var reason: String?
    }

    private struct State {
        var entries: [Recorded] = []
        /// Index in `entries` of the oldest once full (a ring).
        var start = 0
        var seq = 0
        var counts: [String: [String: Int]] = [:]
        /// The badge each push in flight was sent with, by queue id, until its outcome is recorded.
        var badges: [Int64: Int] = [:]
    }

    private let state = Mutex(State())

    /// The badge `item` is being sent with (the receiver's unread count, or pushData's).
    func sending(_ item: PushQueueItem, badge: Int) {
        state.withLock { $0.badges[item.id] = badge }
    }

    /// A provider's answer for `item` (or `dropped` when its provider is no longer configured).
    func record(_ outcome: PushOutcome?, for item: PushQueueItem, now: Int64 = Identifiers.nowMillis()) {
        let (name, reason): (String, String?) =
            switch outcome {
            case .delivered: ("delivered", nil)
            case .deviceGone(let reason): ("device_gone", reason)
            case .retryLater(_, let reason): ("retry", reason)
            case .rejected(let status, let reason): ("rejected", "\(status) \(reason)")
            case nil: ("dropped", "provider not configured")
            }
        record(name, reason: reason, for: item, now: now)
    }

    func record(_ outcome: String, reason: String?, for item: PushQueueItem, now: Int64 = Identifiers.nowMillis()) {
        state.withLock { state in
            state.seq += 1
            let badge = state.badges.removeValue(forKey: item.id)
            let entry = Recorded(seq: state.seq, time: now, item: item, badge: badge, outcome: outcome, reason: reason)
            if state.entries.count < Self.capacity {
                state.entries.append(entry)
            } else {
                state.entries[state.start] = entry
                state.start = (state.start + 1) % Self.capacity
            }
            state.counts[item.provider, default: [:]][outcome, default: 0] += 1
        }
    }

    /// The push `item`'s last attempt, recorded as `retry`, is dropped instead: not sent within its max age.
    func expired(_ item: PushQueueItem) {
        state.withLock { state in
            guard let index = state.entries.lastIndex(where: { $0.item.id == item.id && $0.item.attempts == item.attempts }) else { return }
            let before = state.entries[index].outcome
            state.entries[index].outcome = "expired"
            state.counts[item.provider, default: [:]][before, default: 1] -= 1
            if state.counts[item.provider]?[before] == 0 { state.counts[item.provider]?[before] = nil }
            state.counts[item.provider, default: [:]]["expired", default: 0] += 1
        }
    }

    /// Entries with `seq > after`, of conversation `cid` when given, oldest first, at most `limit` (the newest
    /// ones when more match); `next` is the newest `seq` recorded (poll with `after = next`).
    func entries(after: Int, cid: String?, limit: Int) -> (entries: [PushHistoryEntry], next: Int) {
        let (recorded, next) = state.withLock { state -> ([Recorded], Int) in
            let ordered = Array(state.entries[state.start...] + state.entries[..<state.start])
            return (ordered.filter { $0.seq > after }, state.seq)
        }
        let entries = recorded.compactMap { entry -> PushHistoryEntry? in
            let content = PushContent(stored: entry.item.content)
            let conversation = content?.data["cid"]?.stringValue ?? ""
            if let cid, conversation != cid { return nil }
            return PushHistoryEntry(
                seq: entry.seq, time: entry.time, receiver: entry.item.clientID, provider: entry.item.provider,
                device: Self.shortened(entry.item.token), messageID: entry.item.messageID, cid: conversation, title: content?.title,
                body: content?.body, badge: entry.badge ?? content?.badge, outcome: entry.outcome, reason: entry.reason,
                attempts: entry.item.attempts + 1)
        }
        return (Array(entries.suffix(max(0, limit))), next)
    }

    /// Attempts per provider and outcome since the server started.
    var counts: [String: [String: Int]] { state.withLock { $0.counts } }

    /// A device token or endpoint as the console shows it: its last 12 characters (enough to tell devices apart,
    /// not enough to push to it).
    static func shortened(_ token: String) -> String {
        token.count <= 12 ? token : "…" + String(token.suffix(12))
    }
}

/// One push attempt, as `GET /api/pushes` shows it.
public struct PushHistoryEntry: Sendable, Equatable, Codable {
    /// Increases by one per attempt recorded.
    public var seq: Int
    /// When the outcome was known (ms since 1970).
    public var time: Int64
    /// The client id the push was for.
    public var receiver: String
    public var provider: String
    /// The end of the device's token (`PushHistory.shortened`).
    public var device: String
    public var messageID: String
    public var cid: String
    public var title: String?
    public var body: String?
    /// The badge sent; nil when none was sent (a push dropped before sending).
    public var badge: Int?
    /// `delivered`, `device_gone`, `retry`, `rejected`, `expired` or `dropped`.
    public var outcome: String
    /// What the provider said, for any outcome but `delivered`.
    public var reason: String?
    /// Which attempt this was (1 for the first).
    public var attempts: Int
}

extension IMServer {
    /// Whether push providers are configured (otherwise nothing is pushed or recorded).
    public var isPushEnabled: Bool { service.pushes != nil }

    /// The last pushes this server sent, retried or dropped (at most 200 attempts in memory): those with
    /// `seq > after`, of conversation `cid` if given, at most `limit`; `next` is the newest `seq`.
    public func recentPushes(after: Int = 0, cid: String? = nil, limit: Int = 200) -> (entries: [PushHistoryEntry], next: Int) {
        service.pushes?.history.entries(after: after, cid: cid, limit: limit) ?? ([], 0)
    }

    /// Push attempts since the start, per provider and outcome (`delivered`, `device_gone`, `retry`,
    /// `rejected`, `expired`, `dropped`), as `hookbot_push_sent_total` counts them.
    public var pushCounts: [String: [String: Int]] { service.pushes?.history.counts ?? [:] }
}
