import Synchronization

/// Bounds the reviews in flight, per sending connection and overall, so that an interceptor that is busy
/// (not gone) is never outrun: a sender over its bound waits before its next message is even read, so the
/// queue in front of the interceptor stays short enough for every review to finish within the deadline,
/// instead of the failure policy deciding the overflow. The waiting holds back the sender's acks (and,
/// through TCP, its further frames), which is the backpressure.
final class ReviewAdmission: Sendable {
    private struct State {
        var inFlight: [UInt64: Int] = [:]
        var total = 0
        var peak = 0
        var waiting: [(connection: UInt64, continuation: CheckedContinuation<Void, Never>)] = []
    }

    let perSender: Int
    let overall: Int
    private let state = Mutex(State())

    init(perSender: Int, overall: Int) {
        self.perSender = perSender
        self.overall = overall
    }

    /// Waits until `connection` may have one more review in flight, and counts it.
    func enter(_ connection: UInt64) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let admitted = state.withLock { state -> Bool in
                guard state.waiting.isEmpty, Self.admits(state, connection, perSender, overall) else {
                    state.waiting.append((connection, continuation))
                    return false
                }
                state.inFlight[connection, default: 0] += 1
                state.total += 1
                state.peak = max(state.peak, state.total)
                return true
            }
            if admitted { continuation.resume() }
        }
    }

    /// A review of `connection`'s finished; admits whoever may go now, oldest first.
    func leave(_ connection: UInt64) {
        let resumed = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.inFlight[connection, default: 1] -= 1
            if state.inFlight[connection] == 0 { state.inFlight[connection] = nil }
            state.total -= 1
            var resumed: [CheckedContinuation<Void, Never>] = []
            var index = 0
            while index < state.waiting.count {
                let waiter = state.waiting[index]
                if Self.admits(state, waiter.connection, perSender, overall) {
                    state.inFlight[waiter.connection, default: 0] += 1
                    state.total += 1
                    state.peak = max(state.peak, state.total)
                    resumed.append(waiter.continuation)
                    state.waiting.remove(at: index)
                } else {
                    if state.total >= overall { break }
                    index += 1
                }
            }
            return resumed
        }
        for continuation in resumed { continuation.resume() }
    }

    /// Reviews in flight overall, and the most there have been at once.
    var inFlight: (now: Int, peak: Int) { state.withLock { ($0.total, $0.peak) } }

    private static func admits(_ state: State, _ connection: UInt64, _ perSender: Int, _ overall: Int) -> Bool {
        state.total < overall && state.inFlight[connection, default: 0] < perSender
    }
}
