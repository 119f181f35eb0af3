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
        /// Reviewed messages not yet delivered to the bot, by `key`.
        var awaiting: [String: MessageTrace] = [:]
        var awaitingOrder: [String] = []
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
            if $0.awaiting.updateValue(trace, forKey: key) == nil { $0.awaitingOrder.append(key) }
            while $0.awaitingOrder.count > capacity {
                $0.awaiting[$0.awaitingOrder.removeFirst()] = nil
            }
        }
    }

    /// The trace a delivered message's routing adds to: its review's, or a new one (nil when tracing is off).
    public func delivered(_ message: HookMessage) -> MessageTrace? {
        guard capacity > 0 else { return nil }
        let key = Self.key(message)
        let reviewed: MessageTrace? = state.withLock {
            guard let trace = $0.awaiting.removeValue(forKey: key) else { return nil }
            if let index = $0.awaitingOrder.firstIndex(of: key) { $0.awaitingOrder.remove(at: index) }
            return trace
        }
        guard let reviewed else { return keep(Self.trace(of: message)) }
        reviewed.identify(messageID: message.id)
        reviewed.add(.delivered, "delivered as \(message.id)")
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
            let snapshot = trace.snapshot
            if blockedOnly, !snapshot.blocked { continue }
            if withVerdict, snapshot.verdict == nil { continue }
            if let cid, snapshot.cid != cid { continue }
            found.append(snapshot)
        }
        return found
    }

    /// The trace of the message with this id, or else the trace with this number.
    public func trace(_ id: String) -> MessageTrace.Snapshot? {
        let all = state.withLock { $0.traces }
        if let byMessage = all.lazy.map(\.snapshot).first(where: { $0.messageId == id }) { return byMessage }
        guard let number = Int(id) else { return nil }
        return all.lazy.map(\.snapshot).first { $0.id == number }
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

    private static func key(_ message: HookMessage) -> String {
        "\(message.cid)\u{0}\(message.from)\u{0}\(message.type)\u{0}\(message.text ?? "")"
    }
}
