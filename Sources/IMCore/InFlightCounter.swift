import Synchronization

/// A count of pieces of work in flight that can be waited on: `waitUntilNone()` returns when the count is
/// zero, resumed by the `finished()` that brings it there (a signal, not a polling loop). Used for the
/// plugins' HTTP calls (HookRuntime's `waitForHTTPCalls`) and the push queueing a server's stop waits for.
public final class InFlightCounter: Sendable {
    private struct State {
        var count = 0
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())

    public init() {}

    /// The number in flight now.
    public var count: Int { state.withLock { $0.count } }

    /// One more piece of work has started.
    public func started() { state.withLock { $0.count += 1 } }

    /// One piece of work has finished; the last one resumes every waiter.
    public func finished() {
        let ready = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.count -= 1
            guard s.count == 0 else { return [] }
            defer { s.waiters = [] }
            return s.waiters
        }
        for waiter in ready { waiter.resume() }
    }

    /// Returns at once when nothing is in flight, else when the last piece in flight finishes.
    public func waitUntilNone() async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let idle = state.withLock { s -> Bool in
                if s.count == 0 { return true }
                s.waiters.append(waiter)
                return false
            }
            if idle { waiter.resume() }
        }
    }
}
