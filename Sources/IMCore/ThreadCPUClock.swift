#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The calling thread's CPU clock (`CLOCK_THREAD_CPUTIME_ID`): what work on one thread cost, which waiting for a core
/// does not inflate.
public enum ThreadCPUClock {
    /// The calling thread's CPU time so far, in nanoseconds.
    public static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }
}
