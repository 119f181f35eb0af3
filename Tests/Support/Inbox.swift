import Synchronization

/// Things received (commands, events) that tests take out in order of arrival, waiting with a timeout
/// for one that matches. Shared by the raw protocol clients and the SDK event log.
public final class Inbox<Element: Sendable>: Sendable {
    private struct Waiter {
        var id: Int
        var match: @Sendable (Element) -> Bool
        var continuation: CheckedContinuation<Element?, Never>
    }

    private struct State {
        var items: [Element] = []
        var waiters: [Waiter] = []
        var closed = false
        var nextID = 0
    }

    private let state = Mutex(State())

    public init() {}

    /// Hands `element` to the oldest waiter it matches, or keeps it.
    public func append(_ element: Element) {
        let waiter = state.withLock { state -> CheckedContinuation<Element?, Never>? in
            if let index = state.waiters.firstIndex(where: { $0.match(element) }) {
                return state.waiters.remove(at: index).continuation
            }
            state.items.append(element)
            return nil
        }
        waiter?.resume(returning: element)
    }

    /// No more elements will come: waiters get nothing, later waits return what is kept.
    public func close() {
        let waiters = state.withLock { state in
            state.closed = true
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters { waiter.continuation.resume(returning: nil) }
    }

    public var isClosed: Bool { state.withLock { $0.closed } }

    /// Takes the first kept or arriving element that matches, waiting up to `timeout`; nil on timeout
    /// or when the inbox is closed.
    public func take(timeout: Duration, where match: @escaping @Sendable (Element) -> Bool) async -> Element? {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        return await withTaskGroup(of: Element?.self) { group in
            group.addTask {
                await withCheckedContinuation { (continuation: CheckedContinuation<Element?, Never>) in
                    let immediate = self.state.withLock { state -> Element?? in
                        if let index = state.items.firstIndex(where: match) { return .some(state.items.remove(at: index)) }
                        if state.closed { return .some(nil) }
                        state.waiters.append(Waiter(id: id, match: match, continuation: continuation))
                        return .none
                    }
                    if let immediate { continuation.resume(returning: immediate) }
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                let waiter = self.state.withLock { state -> CheckedContinuation<Element?, Never>? in
                    guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                    return state.waiters.remove(at: index).continuation
                }
                waiter?.resume(returning: nil)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    /// Kept elements matching `match`, left in place.
    public func kept(where match: (Element) -> Bool = { _ in true }) -> [Element] {
        state.withLock { $0.items.filter(match) }
    }

    /// Removes and returns every kept element.
    public func drain() -> [Element] {
        state.withLock { state in
            defer { state.items.removeAll() }
            return state.items
        }
    }
}
