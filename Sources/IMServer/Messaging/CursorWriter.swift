import GRDB

/// Coalesces delivery-cursor moves (from client acks) and writes them in batched transactions.
actor CursorWriter {
    private let db: DatabasePool
    private var pending: [CursorKey: Int64] = [:]
    private var flushing: Task<Void, Never>?

    init(db: DatabasePool) { self.db = db }

    func advance(_ key: CursorKey, to t: Int64) {
        pending[key] = max(pending[key] ?? .min, t)
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
