import Foundation
import NIOCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Wakes the Lua thread ahead of an in-process review (issue 30, round 9). The server gives a heads-up as a frame that
/// looks like a message arrives (`ReviewHeadsUp`), 20–30 µs before it asks for the review. Between reviews the Lua
/// thread sleeps, and on an idle machine waking its virtual CPU took about 28 µs of each review's hold. On a
/// heads-up, this queues a job on the Lua loop that stays on the thread, yielding the CPU while it waits, until the
/// review's job is queued (`reviewQueued`, from `ReviewStart`) or `budget` has passed. The review's job then runs in
/// the same turn of the loop, on a thread that is already awake.
///
/// Bounded: one job at a time (a heads-up while one is queued or waiting is ignored), at most `budget` of waiting per
/// heads-up, and after a wait that no review ended, heads-ups are ignored for `restAfterMiss` (a flood of frames that
/// look like messages and are not reviewed, transient messages say, keeps the thread waiting at most
/// `budget / (budget + restAfterMiss)` of the time). `HOOKBOT_WAKE_AHEAD=0` in the environment turns it off (to measure
/// without it, or where a CPU's idle time is worth more than a review's 20–30 µs).
final class LuaWakeAhead: Sendable {
    /// Whether heads-ups are taken.
    let enabled: Bool
    /// How long a heads-up keeps the Lua thread waiting at most.
    let budget: Duration
    /// How long heads-ups are ignored after a wait that no review ended.
    let restAfterMiss: Duration
    private let loop: any EventLoop
    private let phase = Atomic<UInt8>(Phase.idle)
    /// Until when (`NIODeadline`'s uptime nanoseconds) heads-ups are ignored.
    private let restingUntil = Atomic<UInt64>(0)
    private let waits = Atomic<Int>(0)
    private let reviewed = Atomic<Int>(0)
    private let missed = Atomic<Int>(0)
    private let ignored = Atomic<Int>(0)

    /// What the heads-ups came to, for tests and benchmarks.
    var counts: Counts {
        Counts(
            waits: waits.load(ordering: .relaxed), reviewed: reviewed.load(ordering: .relaxed), missed: missed.load(ordering: .relaxed),
            ignored: ignored.load(ordering: .relaxed))
    }

    struct Counts: Sendable, Equatable {
        /// Waiting jobs run (a job that found its review queued already counts in `reviewed` too).
        var waits = 0
        /// Ended by the review's job being queued.
        var reviewed = 0
        /// Ended by the budget.
        var missed = 0
        /// Heads-ups ignored (a job was queued or waiting, or after a miss).
        var ignored = 0
    }

    private enum Phase {
        static let idle: UInt8 = 0
        /// A job is queued or waiting.
        static let expecting: UInt8 = 1
        /// The review's job is queued: the waiting job returns.
        static let queued: UInt8 = 2
    }

    init(
        loop: any EventLoop, budget: Duration = .microseconds(100), restAfterMiss: Duration = .milliseconds(2),
        enabled: Bool = ProcessInfo.processInfo.environment["HOOKBOT_WAKE_AHEAD"] != "0"
    ) {
        self.enabled = enabled
        self.loop = loop
        self.budget = budget
        self.restAfterMiss = restAfterMiss
    }

    /// A review is probably on its way: keeps the Lua thread awake for it (on a server thread; returns at once).
    func headsUp() {
        guard enabled else { return }
        guard NIODeadline.now().uptimeNanoseconds >= restingUntil.load(ordering: .relaxed),
            phase.compareExchange(expected: Phase.idle, desired: Phase.expecting, ordering: .acquiringAndReleasing).exchanged
        else {
            ignored.add(1, ordering: .relaxed)
            return
        }
        loop.execute { self.waitForTheReview() }
    }

    /// A review's job is queued on the Lua loop (called right after it is): a waiting job returns, so that it runs.
    func reviewQueued() {
        guard phase.load(ordering: .relaxed) == Phase.expecting else { return }
        _ = phase.compareExchange(expected: Phase.expecting, desired: Phase.queued, ordering: .acquiringAndReleasing)
    }

    /// Runs on the Lua thread: returns once the review's job is queued, or after `budget`.
    private func waitForTheReview() {
        let limit = NIODeadline.now().uptimeNanoseconds &+ UInt64(TimeAmount(budget).nanoseconds)
        waits.add(1, ordering: .relaxed)
        while phase.load(ordering: .acquiring) != Phase.queued {
            guard NIODeadline.now().uptimeNanoseconds < limit else {
                // Rest before the next heads-up is taken (set before the phase lets one in).
                restingUntil.store(NIODeadline.now().uptimeNanoseconds &+ UInt64(TimeAmount(restAfterMiss).nanoseconds), ordering: .relaxed)
                if phase.compareExchange(expected: Phase.expecting, desired: Phase.idle, ordering: .acquiringAndReleasing).exchanged {
                    missed.add(1, ordering: .relaxed)
                    return
                }
                // The review's job was queued just now after all.
                restingUntil.store(0, ordering: .relaxed)
                break
            }
            // Gives the CPU to whatever else is ready on it (on a small machine, possibly the server thread that is
            // about to ask for the review), without sleeping: sleeping is what costs the wake-up.
            sched_yield()
        }
        reviewed.add(1, ordering: .relaxed)
        phase.store(Phase.idle, ordering: .releasing)
    }
}
