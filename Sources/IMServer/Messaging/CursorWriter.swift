import GRDB

/// Coalesces delivery-cursor moves (from client acks) and writes them in batched transactions. A cursor
/// moves to the timestamp of the newest acknowledged *stored* message, read from the database, so acks
/// of transient or cmd messages (or forged timestamps) never skip stored messages.
actor CursorWriter {
    private let db: DatabasePool
    private var pending: [CursorKey: Set<String>] = [:]
    private var flushing: Task<Void, Never>?

    init(db: DatabasePool) { self.db = db }

    func advance(_ key: CursorKey, acknowledging messageIDs: [String]) {
        guard !messageIDs.isEmpty else { return }
        pending[key, default: []].formUnion(messageIDs)
        if flushing == nil { flushing = Task { await self.drain() } }
    }

    /// Returns once every cursor move recorded so far is written.
    func flush() async {
        while let task = flushing { await task.value }
    }

    private func drain() async {
        while !pending.isEmpty {
            let batch = pending
            pending.removeAll()
            try? await db.write { db in try MessageStore.advanceCursors(db, batch) }
        }
        flushing = nil
    }
}
