import IMCore
import NIOCore
import Synchronization

/// Values handed from one thread to a reading task: everything that arrived since its last look, in order,
/// as one batch. What an in-process server sent on a link (so acks of messages that arrived together leave
/// as one `ack`, with no task of their own), and a client's events for an `IMEventQueue`. Writers append
/// from whatever thread they are on; the reader, when it waits, is resumed once per burst (a continuation is
/// resumed through Swift's global executor, then the reader goes on in its isolation), or, instead of a reader,
/// each burst is a job on a NIO loop (`deliver(on:_:ended:)`), or the appender calls `onArrival` and the reader
/// takes what is there (`take()`). Unbounded as the `AsyncStream` it replaces: the server bounds what it sends a
/// connection (its outbound limits), not this queue.
final class LocalInbox<Element: Sendable>: Sendable {
    private struct State {
        var items: [Element] = []
        var reader: CheckedContinuation<[Element]?, Never>?
        var finished = false
        var onFinish: (@Sendable () -> Void)?
        /// Instead of a reader: where each burst is handed on (`deliver(on:_:ended:)`).
        var pusher: Pusher?
        var scheduled = false
        var endDelivered = false
        /// Told, on the appending thread, that values were queued while no reader waits (`onArrival`).
        var onArrival: (@Sendable () -> Void)?

        /// The pusher's loop when a push has to be scheduled now (one at a time).
        mutating func schedulePush() -> (any EventLoop)? {
            guard let pusher, !scheduled, !endDelivered else { return nil }
            scheduled = true
            return pusher.loop
        }
    }

    private struct Pusher {
        let loop: any EventLoop
        let handle: @Sendable ([Element]) -> Void
        let ended: @Sendable () -> Void
    }

    private let state = Mutex(State())
    /// Finishes with the inbox (`ended()` waits for it).
    private let end = AsyncStream<Never>.makeStream()

    init(onFinish: (@Sendable () -> Void)? = nil) {
        state.withLock { $0.onFinish = onFinish }
    }

    var isFinished: Bool { state.withLock { $0.finished } }

    /// Appends a value (ignored after `finish`).
    func append(_ item: Element) {
        var push: (any EventLoop)?
        var arrival: (@Sendable () -> Void)?
        let reader = state.withLock { state -> CheckedContinuation<[Element]?, Never>? in
            guard !state.finished else { return nil }
            guard let reader = state.reader else {
                state.items.append(item)
                push = state.schedulePush()
                arrival = state.onArrival
                return nil
            }
            state.reader = nil
            return reader
        }
        reader?.resume(returning: [item])
        push?.execute { self.push() }
        arrival?()
    }

    /// Calls `handler` on the appending thread right after values were queued while no reader waits in `next()`:
    /// for a reader that starts its handling there and reads with `take()`.
    func onArrival(_ handler: @escaping @Sendable () -> Void) {
        state.withLock { $0.onArrival = handler }
    }

    /// What is queued now, without waiting: empty when nothing is; nil once finished and everything was taken.
    func take() -> [Element]? {
        state.withLock { state in
            if state.items.isEmpty { return state.finished ? nil : [] }
            defer { state.items = [] }
            return state.items
        }
    }

    /// Hands every burst to `handle` as a job on `loop`, and then, once finished, calls `ended` there, instead of a
    /// reader waiting in `next()`: a writer on another thread wakes the loop's thread directly, where a resumed
    /// continuation would first wake one of Swift's pool threads that then hops to the loop (measured: a
    /// continuation resumes through the global executor even when made in the reader's isolation).
    func deliver(
        on loop: any EventLoop, _ handle: @escaping @Sendable ([Element]) -> Void, ended: @escaping @Sendable () -> Void
    ) {
        let push = state.withLock { state -> (any EventLoop)? in
            state.pusher = Pusher(loop: loop, handle: handle, ended: ended)
            return state.schedulePush()
        }
        push?.execute { self.push() }
    }

    /// On the pusher's loop: what arrived since the last push, then the end once finished and empty.
    private func push() {
        let (items, pusher, end) = state.withLock { state -> ([Element], Pusher?, Bool) in
            state.scheduled = false
            defer { state.items = [] }
            let end = state.finished && !state.endDelivered
            if end { state.endDelivered = true }
            return (state.items, state.pusher, end)
        }
        guard let pusher else { return }
        if !items.isEmpty { pusher.handle(items) }
        if end { pusher.ended() }
    }

    /// No more values: the reader gets what is left, then nil.
    func finish() {
        let (reader, onFinish, push) = state.withLock { state in
            let onFinish = state.finished ? nil : state.onFinish
            state.finished = true
            state.onFinish = nil
            defer { state.reader = nil }
            return (state.reader, onFinish, state.schedulePush())
        }
        reader?.resume(returning: nil)
        push?.execute { self.push() }
        end.continuation.finish()
        onFinish?()
    }

    /// Everything appended since the last call, waiting for the next value when there is none; nil once the
    /// inbox has finished and everything was taken, or when the reading task is cancelled (which finishes
    /// it). Resumes on the caller's executor (`isolation`). One reader at a time.
    func next(isolation: isolated (any Actor)? = #isolation) async -> [Element]? {
        // The continuation is made and resumed in the caller's isolation, named explicitly: a
        // `nonisolated(nonsending)` function's operation closure for `withTaskCancellationHandler` runs on
        // Swift's pool (measured: one more thread woken per batch, as with an `AsyncStream`).
        await withTaskCancellationHandler {
            await withCheckedContinuation(isolation: isolation) { continuation in
                let ready = state.withLock { state -> [Element]?? in
                    if !state.items.isEmpty {
                        defer { state.items = [] }
                        return .some(state.items)
                    }
                    if state.finished { return .some(nil) }
                    state.reader = continuation
                    return .none
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            finish()
        }
    }

    /// Returns once the inbox has finished (one caller: the link's `closeAndWait`).
    func ended() async {
        for await _ in end.stream {}
    }
}
