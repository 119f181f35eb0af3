import Synchronization

/// Remembers which delivered messages asked for a receipt, and who sent them.
final class ReceiptTracker: Sendable {
    struct Entry: Sendable {
        var sender: String
        var cid: String
    }

    private struct Table {
        var entries: [String: Entry] = [:]
        var order: [String] = []
        var head = 0
    }

    private let capacity: Int
    private let table = Mutex(Table())

    init(capacity: Int = 100_000) { self.capacity = capacity }

    func track(messageID: String, sender: String, cid: String) {
        table.withLock { t in
            guard t.entries[messageID] == nil else { return }
            t.entries[messageID] = Entry(sender: sender, cid: cid)
            t.order.append(messageID)
            if t.entries.count > capacity {
                t.entries[t.order[t.head]] = nil
                t.head += 1
            }
            if t.head > capacity {
                t.order.removeFirst(t.head)
                t.head = 0
            }
        }
    }

    func entry(for messageID: String) -> Entry? {
        table.withLock { $0.entries[messageID] }
    }
}
