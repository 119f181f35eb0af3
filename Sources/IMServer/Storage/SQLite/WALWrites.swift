import CWALWrites
import Foundation

/// SQLite's WAL writes collected into one call per transaction (`Sources/CWALWrites/wal_writes.c`): the process's
/// default VFS wraps SQLite's own, so every connection opened after `install()` uses it. `HOOKBOT_WAL_WRITES=0` in the
/// environment leaves SQLite's VFS as it is (to measure without it).
public enum WALWrites {
    /// Makes the collecting VFS the default, once per process (unless the environment turns it off).
    static func install() {
        _ = installed
    }

    private static let installed: Bool = {
        guard ProcessInfo.processInfo.environment["HOOKBOT_WAL_WRITES"] != "0" else { return false }
        return hookbot_wal_writes_register(1) == 0
    }()

    /// Whether the collecting VFS is the default.
    public static var isInstalled: Bool { installed }

    /// WAL writes collected into larger ones, writes made to WAL files, and collected writes still waiting at a
    /// commit's barrier (the safety net; none as SQLite writes a WAL), since the process started.
    public static var counts: (coalesced: Int, issued: Int, late: Int) {
        var coalesced: Int64 = 0
        var issued: Int64 = 0
        var late: Int64 = 0
        hookbot_wal_writes_counts(&coalesced, &issued, &late)
        return (Int(coalesced), Int(issued), Int(late))
    }
}
