import Logging
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Gives glibc malloc's free pages back to the system after many sessions opened or closed (docs/PERFORMANCE.md, "Round
/// 13"). A session's setup (the HTTP upgrade, the login's commands and queries) frees blocks among the session's
/// long-lived ones, and malloc keeps such pages resident: with 15,000 idle sessions about 115 MB of 320 MB resident was
/// free, in some 30,000 chunks of two arenas (`malloc_info`), 7–8 KB a session. `malloc_trim(0)` returns the whole free
/// pages inside the heap. It takes about 0.1 ms when there is little to return and up to 9 ms when it returns 50 MB,
/// holding each arena's lock meanwhile, so it runs once a churn has calmed, on a pool thread, not on every login.
/// Written by hand: no library does this for glibc's allocator, and other allocators return memory themselves.
final class MemoryTrim: Sendable {
    /// Sessions opened or closed since the last look.
    private let churn = Atomic<Int>(0)
    /// How many trims ran (tests).
    private let trims = Atomic<Int>(0)
    let threshold: Int

    init(threshold: Int) { self.threshold = threshold }

    func noteSession() { churn.add(1, ordering: .relaxed) }

    var count: Int { trims.load(ordering: .relaxed) }

    /// Whether to trim now, given the churn `pending` since the last trim and `recent`, its part in the last interval:
    /// once `threshold` sessions came or went, when the last interval saw less than a tenth of that (the storm is
    /// over), or at the latest after `patience` intervals of churn that does not calm.
    static func due(pending: Int, recent: Int, waited: Int, threshold: Int, patience: Int = 30) -> Bool {
        threshold > 0 && pending >= threshold && (recent * 10 < threshold || waited >= patience)
    }

    /// Looks every `interval` until the server shuts down.
    func run(every interval: Duration, logger: Logger) async {
        try? await cancelWhenGracefulShutdown {
            var pending = 0
            var waited = 0
            while !Task.isCancelled {
                try await Task.sleep(for: interval)
                let recent = self.churn.exchange(0, ordering: .relaxed)
                pending += recent
                waited = pending >= self.threshold ? waited + 1 : 0
                guard Self.due(pending: pending, recent: recent, waited: waited, threshold: self.threshold) else { continue }
                pending = 0
                waited = 0
                let started = ContinuousClock.now
                Self.trim()
                self.trims.add(1, ordering: .relaxed)
                logger.debug("memory trimmed", metadata: ["took": "\(ContinuousClock.now - started)"])
            }
        }
    }

    /// Calls glibc's `malloc_trim(0)`, looked up at run time: the Glibc module does not export `malloc.h`, and another C
    /// library (musl) has no such function, where this does nothing.
    static func trim() {
        #if canImport(Glibc)
            typealias Trim = @convention(c) (Int) -> Int32
            guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return }
            _ = unsafeBitCast(symbol, to: Trim.self)(0)
        #endif
    }
}

/// `MemoryTrim.run` as a service of the server's group.
struct MemoryTrimService: Service {
    let trim: MemoryTrim
    let logger: Logger

    func run() async throws { await trim.run(every: .seconds(1), logger: logger) }
}
