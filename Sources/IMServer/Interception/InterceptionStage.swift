import IMCore
import Synchronization

/// Puts messages through the interceptors before they reach the message pipeline.
///
/// Reviews run concurrently (so one slow verdict does not serialise the interceptor's work), and their
/// outcomes are applied in submission order per conversation: messages of a conversation are stored and
/// delivered in the order they were sent, while a slow review in one conversation holds up no other.
/// A conversation's entry lives only while it has reviews in flight.
///
/// `submit` runs on the caller's task and starts one task per message, the review; whichever review
/// finishes lets its conversation's decided head of line through, on its own task (a lock, not an actor:
/// no hop per stage, and no second task per message waiting for the one before it).
final class InterceptionStage: Sendable {
    /// A message under review, and its verdict once given.
    private struct Pending {
        var token: UInt64
        var message: OutgoingMessage
        var verdict: Verdict?
        /// When the review was asked (`ServerMetrics.now()`): how long interception held the message is measured
        /// from here to its verdict's application.
        var submitted: UInt64
    }

    /// One conversation's messages under review, in submission order.
    private struct Lane {
        var pending: [Pending] = []
        /// A task is applying this lane's decided head of line: others only record their verdicts.
        var applying = false
    }

    private struct State {
        var lanes: [String: Lane] = [:]
        var nextToken: UInt64 = 0
    }

    private let hub: InterceptorHub
    private let pipeline: MessagePipeline
    private let metrics: ServerMetrics
    /// Bounds the reviews in flight; `IMService` enters before `submit`, the stage leaves once decided.
    let admission: ReviewAdmission
    private let state = Mutex(State())
    /// How long the last messages were held by interception (see `HoldTimes`).
    let holds = HoldTimes()

    init(hub: InterceptorHub, pipeline: MessagePipeline, metrics: ServerMetrics, admission: ReviewAdmission) {
        self.hub = hub
        self.metrics = metrics
        self.pipeline = pipeline
        self.admission = admission
    }

    /// Starts reviewing `message`; its verdict is applied after those of the conversation's earlier messages.
    func submit(_ message: OutgoingMessage) {
        let submitted = ServerMetrics.now()
        let token = state.withLock { state -> UInt64 in
            state.nextToken &+= 1
            state.lanes[message.cid, default: Lane()].pending.append(
                Pending(token: state.nextToken, message: message, submitted: submitted))
            return state.nextToken
        }
        // Asked from here (the event loop or task that received the message); the verdict is applied where
        // the last answer arrives, with no task per review waiting for it (issue 30).
        hub.review(.message(message)) { verdict in self.decided(token, in: message.cid, verdict) }
    }

    /// Records a verdict; unless another task is at it, applies the conversation's decided head of line.
    private func decided(_ token: UInt64, in cid: String, _ verdict: Verdict) {
        var ready = state.withLock { state -> [(Pending, Verdict)] in
            guard let index = state.lanes[cid]?.pending.firstIndex(where: { $0.token == token }) else { return [] }
            state.lanes[cid]?.pending[index].verdict = verdict
            return Self.takeDecided(cid, &state, claiming: true)
        }
        while !ready.isEmpty {
            for (pending, verdict) in ready {
                // Recorded as the verdict is applied, before its effects (a refusal, a delivery) can be seen.
                let held = ServerMetrics.now() &- pending.submitted
                metrics.interceptionHold.recordNanoseconds(Int64(clamping: held))
                holds.record(nanoseconds: held)
                apply(verdict, to: pending.message)
            }
            ready = state.withLock { Self.takeDecided(cid, &$0, claiming: false) }
        }
    }

    /// The lane's decided messages from its head. A caller that gets some applies them and asks again
    /// (`claiming` false) until it gets none, which ends its turn; while it applies, other callers get none.
    private static func takeDecided(_ cid: String, _ state: inout State, claiming: Bool) -> [(Pending, Verdict)] {
        // The lane is changed where it is kept: a copy taken out of the dictionary and stored back copied its
        // array of pending messages on every verdict (issue 30: this runs on the interceptor's thread before the
        // hold ends).
        guard let index = state.lanes.index(forKey: cid), !(claiming && state.lanes.values[index].applying) else { return [] }
        let count = state.lanes.values[index].pending.prefix { $0.verdict != nil }.count
        let taken = state.lanes.values[index].pending.prefix(count).map { ($0, $0.verdict!) }
        state.lanes.values[index].pending.removeFirst(count)
        state.lanes.values[index].applying = !taken.isEmpty
        if taken.isEmpty && state.lanes.values[index].pending.isEmpty { state.lanes.remove(at: index) }
        return taken
    }

    private func apply(_ verdict: Verdict, to message: OutgoingMessage) {
        defer { admission.leave(message.sender.id) }
        switch verdict {
        case .allow:
            pipeline.enqueue(message)
        case .modify(let body, let recipients):
            var modified = message
            if let body {
                modified.data = body
                modified.binary = false
            }
            if let recipients { modified.recipients = recipients }
            pipeline.enqueue(modified)
        case .drop(let error, silent: false):
            metrics.command(.direct, nil, code: error.code)
            message.sender.send(IMService.errorReply(error, to: Command(cmd: .direct, i: message.serial)))
        case .drop(_, silent: true):
            var ack = Command(cmd: .ack, i: message.serial)
            ack.uid = Identifiers.messageID()
            ack.t = Identifiers.nowMillis()
            message.sender.send(ack)
        }
    }
}
