import Foundation
import HookRuntime
import Synchronization

/// The traces of the last `capacity` messages a bot saw or reviewed (`MessageTrace`), newest last, for the
/// console's trace view and its recent verdicts. Older traces are forgotten; each trace caps its own size,
/// so the store holds at most `capacity` × `MessageTrace.maxSteps` steps.
///
/// A message the bot reviewed as the server's interceptor and then received keeps one trace: the review
/// waits (at most `capacity` of them, briefly) for the delivery with the same conversation, sender and
/// text, which then continues it under the message's id.
public final class MessageTraceStore: Sendable {
    /// Most traces kept; 0: tracing is off (`review` and `delivered` make no trace).
    public let capacity: Int

    private struct State {
        var traces: [MessageTrace] = []
        /// Index of the oldest trace in `traces` once it is full (a ring).
        var head = 0
        var next = 1
        /// Reviewed messages not yet delivered to the bot, by `key`, each with the number it was added under.
        var awaiting: [Key: (trace: MessageTrace, added: Int)] = [:]
        /// The keys in the order they were added, oldest from `awaitingHead` on. A delivery removes its key from
        /// `awaiting` only (finding it here was a linear search with a removal per message, in a list that is
        /// full as soon as the bot reviews messages it is not sent); an entry whose number no longer matches
        /// `awaiting` is stale and skipped, and stale entries are dropped once they outnumber the live ones.
        var awaitingOrder: [(key: Key, added: Int)] = []
        var awaitingHead = 0
        var added = 0
    }

    /// What a review and the delivery of the same message share: conversation, sender, type and text (no text
    /// and an empty one are the same). A struct, not a string joined from them for every message.
    private struct Key: Hashable {
        let cid: String
        let from: String
        let type: Int
        let text: String
    }

    private let state = Mutex(State())

    public init(capacity: Int = 500) {
        self.capacity = max(0, capacity)
    }

    /// The store of a bot host: `HOOKBOT_TRACES` traces if set (0 turns tracing off, as benchmarks compare),
    /// else 500.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> MessageTraceStore {
        MessageTraceStore(capacity: environment["HOOKBOT_TRACES"].flatMap { Int($0) }.map { min(max($0, 0), 100_000) } ?? 500)
    }

    /// Starts the trace of a message the server asked the bot to review (nil when tracing is off).
    public func review(_ message: HookMessage) -> MessageTrace? {
        capacity == 0 ? nil : keep(Self.trace(of: message))
    }

    /// Makes a reviewed message's trace the one its delivery continues (the message as delivered).
    public func awaitDelivery(_ trace: MessageTrace, as message: HookMessage) {
        guard capacity > 0 else { return }
        let key = Self.key(message)
        state.withLock {
            if let waiting = $0.awaiting[key] {
                // Waiting already: the newer review's trace takes the place, not a newer position.
                $0.awaiting[key] = (trace, waiting.added)
            } else {
                $0.added += 1
                $0.awaiting[key] = (trace, $0.added)
                $0.awaitingOrder.append((key, $0.added))
            }
            while $0.awaiting.count > capacity, $0.awaitingHead < $0.awaitingOrder.count {
                let oldest = $0.awaitingOrder[$0.awaitingHead]
                $0.awaitingHead += 1
                if $0.awaiting[oldest.key]?.added == oldest.added { $0.awaiting[oldest.key] = nil }
            }
            Self.compact(&$0)
        }
    }

    /// Drops the order's stale entries (delivered, or pushed out) once they are more than the live ones, so the
    /// order holds at most about twice `awaiting`'s count plus its capacity, in amortised constant time.
    private static func compact(_ state: inout State) {
        guard state.awaitingOrder.count > 2 * state.awaiting.count + 64 else { return }
        let awaiting = state.awaiting
        state.awaitingOrder = state.awaitingOrder[state.awaitingHead...].filter { awaiting[$0.key]?.added == $0.added }
        state.awaitingHead = 0
    }

    /// The trace a delivered message's routing adds to: its review's, or a new one (nil when tracing is off).
    public func delivered(_ message: HookMessage) -> MessageTrace? {
        guard capacity > 0 else { return nil }
        let key = Self.key(message)
        let reviewed: MessageTrace? = state.withLock { $0.awaiting.removeValue(forKey: key)?.trace }
        guard let reviewed else { return keep(Self.trace(of: message)) }
        reviewed.identify(messageID: message.id)
        reviewed.add(.delivered, .deliveredAs(message.id))
        return reviewed
    }

    /// The last `limit` traces, newest first; only blocked ones, or only those with a verdict, when asked;
    /// only a conversation's when `cid` is given.
    public func recent(limit: Int, blockedOnly: Bool = false, withVerdict: Bool = false, cid: String? = nil)
        -> [MessageTrace.Snapshot]
    {
        let all = state.withLock { $0.traces[$0.head...] + $0.traces[..<$0.head] }
        var found: [MessageTrace.Snapshot] = []
        for trace in all.reversed() {
            guard found.count < limit else { break }
            // Filtered by the heading: only the traces shown have their texts made.
            let heading = trace.heading
            if blockedOnly, !heading.blocked { continue }
            if withVerdict, !heading.hasVerdict { continue }
            if let cid, heading.cid != cid { continue }
            found.append(trace.snapshot)
        }
        return found
    }

    /// The trace of the message with this id, or else the trace with this number.
    public func trace(_ id: String) -> MessageTrace.Snapshot? {
        let all = state.withLock { $0.traces }
        if let byMessage = all.first(where: { $0.heading.messageId == id }) { return byMessage.snapshot }
        guard let number = Int(id) else { return nil }
        return all.first { $0.heading.id == number }?.snapshot
    }

    private func keep(_ trace: MessageTrace) -> MessageTrace {
        state.withLock {
            trace.number($0.next)
            $0.next += 1
            if $0.traces.count < capacity {
                $0.traces.append(trace)
            } else {
                $0.traces[$0.head] = trace
                $0.head = ($0.head + 1) % capacity
            }
        }
        return trace
    }

    private static func trace(of message: HookMessage) -> MessageTrace {
        MessageTrace(
            messageID: message.id, cid: message.cid, from: message.from, text: message.text ?? "(type \(message.type))")
    }

    private static func key(_ message: HookMessage) -> Key {
        Key(cid: message.cid, from: message.from, type: message.type, text: message.text ?? "")
    }
}
