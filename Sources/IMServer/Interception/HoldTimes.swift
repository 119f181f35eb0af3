import Synchronization

/// How long interception held each of the last messages: from the review's request to its verdict's application
/// (the time a message spends in review that it would not spend without an interceptor). Kept for the last
/// `capacity` messages only, in a ring, so a busy server keeps a fixed amount; `hookbot bench`'s w2 reads it, and
/// the `hookbot_interception_hold_seconds` timer has the same values for operators.
final class HoldTimes: Sendable {
    static let capacity = 8_192

    private struct Ring {
        var nanoseconds = [UInt64](repeating: 0, count: HoldTimes.capacity)
        var next = 0
        var count = 0
    }

    private let ring = Mutex(Ring())

    func record(nanoseconds: UInt64) {
        ring.withLock { ring in
            ring.nanoseconds[ring.next] = nanoseconds
            ring.next = (ring.next + 1) % Self.capacity
            ring.count = min(ring.count + 1, Self.capacity)
        }
    }

    /// The hold times recorded since the last call (the newest `capacity` of them), oldest first, in
    /// milliseconds; forgets them.
    func take() -> [Double] {
        ring.withLock { ring in
            let start = (ring.next - ring.count + Self.capacity) % Self.capacity
            let taken = (0..<ring.count).map { Double(ring.nanoseconds[(start + $0) % Self.capacity]) / 1_000_000 }
            ring.count = 0
            return taken
        }
    }
}
