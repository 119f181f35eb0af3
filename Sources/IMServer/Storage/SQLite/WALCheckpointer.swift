import GRDB
import GRDBSQLite
import Synchronization

/// Keeps the server's SQLite WAL checkpoints off the event loops. SQLite's automatic checkpoint runs inside the
/// commit that crossed its threshold, and with its `fsync`s it takes a millisecond or more (1.3 ms at
/// `synchronous = NORMAL` on this machine). Since an idle pipeline's batch is committed by the event loop that enqueued
/// it (`MessagePipeline.commitInline`), that commit could be an event loop's, holding every connection of the loop (or
/// the bot) meanwhile.
///
/// The writer connection's WAL hook replaces the automatic checkpoint (SQLite's is a WAL hook too) and does what it
/// did, a `PASSIVE` checkpoint once the WAL holds `threshold` frames, except in a commit made `deferring`: there it
/// only notes the checkpoint as due, and the pipeline's writer thread runs it (`runDue`) before its next batch, with
/// messages arriving meanwhile queued for the writer thread as they were before inline commits. Past `limit` frames
/// any commit checkpoints in place, so the WAL stays bounded.
///
/// Written here because GRDB leaves checkpoints to SQLite's automatic one. (A checkpoint on a connection and queue of
/// its own, beside the commits, was tried and not kept: PERFORMANCE.md, "Commits on the thread that enqueued the
/// message".)
final class WALCheckpointer: Sendable {
    let limit: Int32
    private let deferring = Atomic<Bool>(false)
    private let due = Atomic<Bool>(false)
    private let inCommit = Atomic<Int>(0)
    private let deferred = Atomic<Int>(0)
    private let pastLimit = Atomic<Int>(0)

    /// Installs the checkpointer on `pool`'s writer connection (SQLite's default threshold, 1,000 frames).
    init(pool: DatabasePool, threshold: Int32 = 1000, limit: Int32 = 10_000) throws {
        self.limit = max(limit, threshold)
        // Retained once per store (a few dozen bytes): the writer connection may outlive this object, and its hook must
        // never read freed memory; it holds this object weakly.
        let context = Unmanaged.passRetained(CheckpointHook(threshold: threshold, checkpointer: self)).toOpaque()
        try pool.barrierWriteWithoutTransaction { db in
            _ = sqlite3_wal_hook(db.sqliteConnection, walHook, context)
        }
    }

    /// Checkpoints run so far: in commits that do not defer (the automatic checkpoint's way), by `runDue` for deferring
    /// ones, and in deferring commits that reached `limit`.
    var checkpoints: (inCommit: Int, deferred: Int, pastLimit: Int) {
        (inCommit.load(ordering: .relaxed), deferred.load(ordering: .relaxed), pastLimit.load(ordering: .relaxed))
    }

    /// Whether a commit made `deferring` left a checkpoint for `runDue`.
    var isDue: Bool { due.load(ordering: .acquiring) }

    /// Runs `commit` (on the writer connection) with a checkpoint it would run left for `runDue`. Commits are serial (one
    /// writer connection), so one flag serves.
    func deferring<T>(_ commit: () throws -> T) rethrows -> T {
        deferring.store(true, ordering: .releasing)
        defer { deferring.store(false, ordering: .releasing) }
        return try commit()
    }

    /// Runs the checkpoint a deferring commit left, if any.
    func runDue(_ pool: DatabasePool) {
        guard due.exchange(false, ordering: .acquiringAndReleasing) else { return }
        // A checkpoint that fails (the file gone at shutdown) leaves the WAL as it is: a later commit checkpoints.
        _ = try? pool.writeWithoutTransaction { db in try db.checkpoint(.passive) }
        deferred.add(1, ordering: .relaxed)
    }

    /// In the hook: whether this commit checkpoints now (else it is noted as due).
    fileprivate func checkpointsNow(frames: Int32) -> Bool {
        if !deferring.load(ordering: .acquiring) {
            inCommit.add(1, ordering: .relaxed)
            return true
        }
        if frames >= limit {
            pastLimit.add(1, ordering: .relaxed)
            return true
        }
        due.store(true, ordering: .releasing)
        return false
    }
}

/// What the WAL hook reads on the committing thread.
private final class CheckpointHook: Sendable {
    let threshold: Int32
    weak let checkpointer: WALCheckpointer?

    init(threshold: Int32, checkpointer: WALCheckpointer) {
        self.threshold = threshold
        self.checkpointer = checkpointer
    }
}

/// The writer connection's WAL hook: called after each commit with the number of frames in the WAL.
private let walHook: @convention(c) (UnsafeMutableRawPointer?, OpaquePointer?, UnsafePointer<CChar>?, Int32) -> Int32 = {
    context, db, name, frames in
    guard let context else { return SQLITE_OK }
    let hook = Unmanaged<CheckpointHook>.fromOpaque(context).takeUnretainedValue()
    guard frames >= hook.threshold else { return SQLITE_OK }
    // Without a checkpointer (gone with its store), what SQLite's automatic checkpoint does.
    if hook.checkpointer?.checkpointsNow(frames: frames) ?? true {
        _ = sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
    }
    return SQLITE_OK
}
