import Foundation
import IMClient
import IMServer
import Synchronization

// What the workloads measure with: the latency listener, the reply waiter, the CPU and transaction meter.

extension Bench {
    /// Reads `events` for messages whose text is a message number `k`: records each one's latency since
    /// `sentAt[k]`, counts `remaining` down and says so on `finished` when it reaches 0.
    static func latencyListener(
        _ events: AsyncStream<IMEvent>, clock: ContinuousClock, sentAt: Locked<[Int: ContinuousClock.Instant]>,
        latencies: Locked<[Double]>, remaining: Locked<Int>, finished: AsyncStream<Void>.Continuation
    ) -> Task<Void, Never> {
        Task {
            for await event in events {
                guard case .message(let message) = event, let k = Int(message.content.text ?? "") else { continue }
                let now = clock.now
                if let start = sentAt.withLock({ $0[k] }) { latencies.withLock { $0.append((now - start).milliseconds) } }
                if remaining.withLock({
                    $0 -= 1
                    return $0
                }) == 0 {
                    finished.yield()
                }
            }
        }
    }
}

extension Bench {
    /// Sends the texts "0" to "`messages` - 1" to `conversation` from 8 concurrent lanes, noting each one's send
    /// time in `sentAt` (what `latencyListener` measures from).
    static func send(
        _ messages: Int, to conversation: IMConversation, clock: ContinuousClock, sentAt: Locked<[Int: ContinuousClock.Instant]>
    ) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for lane in 0..<8 {
                group.addTask {
                    for k in stride(from: lane, to: messages, by: 8) {
                        sentAt.withLock { $0[k] = clock.now }
                        _ = try await conversation.send(.text("\(k)"))
                    }
                }
            }
            try await group.waitForAll()
        }
    }
}

/// Lets a sender wait until the reply or delivery numbered `k` has arrived.
final class ReplyWaiter: Sendable {
    private struct State {
        var arrived: Set<Int> = []
        var waiting: [Int: CheckedContinuation<Bool, Never>] = [:]
        var abandoned = false
    }

    private let state = Mutex(State())

    func arrived(_ k: Int) {
        let waiter = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            if let waiter = state.waiting.removeValue(forKey: k) { return waiter }
            state.arrived.insert(k)
            return nil
        }
        waiter?.resume(returning: true)
    }

    /// Waits for `k`; throws once the waiter has been abandoned (`abandon`), so a benchmark never hangs.
    func wait(for k: Int) async throws {
        let arrived = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let ready = state.withLock { state -> Bool? in
                if state.abandoned { return false }
                if state.arrived.remove(k) != nil { return true }
                state.waiting[k] = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
        if !arrived { throw BenchError(message: "reply \(k) never arrived (the workload timed out)") }
    }

    /// Fails every wait, now and later.
    func abandon() {
        let waiting = state.withLock { state in
            state.abandoned = true
            defer { state.waiting.removeAll() }
            return Array(state.waiting.values)
        }
        for waiter in waiting { waiter.resume(returning: false) }
    }

    /// Abandons the waiter if the workload has not finished within `limit`; cancel the task when done.
    func watchdog(_ limit: Duration = .seconds(300)) -> Task<Void, Never> {
        Task {
            try? await Task.sleep(for: limit)
            if !Task.isCancelled { self.abandon() }
        }
    }
}

/// CPU and storage cost of a measured phase, per 1,000 stored messages.
struct Efficiency: Encodable {
    /// Messages the server stored during the phase (user messages and bot replies).
    var storedMessages: Int
    /// CPU seconds of this process (server, in-process bot and the benchmark's clients) per 1,000.
    var cpuSecondsPer1000Messages: Double
    /// CPU seconds of the separate bot process per 1,000 (`--remote-bot` only).
    var botCPUSecondsPer1000Messages: Double?
    /// Transactions committed by the message pipeline per 1,000 (group commit shows as < 1,000); in a
    /// cluster, all nodes' together.
    var transactionsPer1000Messages: Double
    /// On PostgreSQL: every transaction the nodes ran per 1,000 (the pipeline's, presence, announcements,
    /// interception relays, logins…).
    var databaseTransactionsPer1000Messages: Double?
    /// On SQLite: CPU microseconds of the message pipeline's commits (all nodes') per stored message: the writer
    /// thread's (the batches' commits and their hand-off to the event loops) and those of batches committed inline on
    /// an event loop, apart from the clients sharing this process.
    var writerCPUMicrosPerMessage: Double?
    /// On SQLite: of `transactionsPer1000Messages`, those committed on the event loop that enqueued their message
    /// (the writer thread was idle) instead of on the writer thread.
    var inlineTransactionsPer1000Messages: Double?
    /// On SQLite: writes to WAL files per 1,000, every SQLite file of this process included (the WAL writes of a
    /// transaction go in one call: `WALWrites`; without it, two per page written). Nil with `HOOKBOT_WAL_WRITES=0`.
    var walWritesPer1000Messages: Double?
}

/// Measures `Efficiency` between its creation and `finish()`.
struct Meter {
    let servers: [IMServer]
    let bot: BenchHub?
    let cpu = ProcessCPU.current()
    let botCPU: Double?
    let storage: (transactions: Int, messages: Int)
    let inlineTransactions: Int
    let databaseTransactions: Int?
    let writerCPU: Double?
    let walWrites = WALWrites.counts.issued

    init(servers: [IMServer], bot: BenchHub?) {
        self.servers = servers
        self.bot = bot
        botCPU = bot?.botCPUSeconds
        storage = Self.storageStats(servers)
        inlineTransactions = Self.inlineTransactions(servers)
        databaseTransactions = Self.databaseTransactions(servers)
        writerCPU = Self.writerCPU(servers)
    }

    private static func writerCPU(_ servers: [IMServer]) -> Double? {
        let seconds = servers.compactMap(\.writerCPUSeconds)
        return seconds.count == servers.count ? seconds.reduce(0, +) : nil
    }

    private static func databaseTransactions(_ servers: [IMServer]) -> Int? {
        let counts = servers.compactMap(\.databaseTransactionCount)
        return counts.isEmpty ? nil : counts.reduce(0, +)
    }

    private static func inlineTransactions(_ servers: [IMServer]) -> Int {
        servers.map(\.inlineTransactions).reduce(0, +)
    }

    private static func storageStats(_ servers: [IMServer]) -> (transactions: Int, messages: Int) {
        servers.map(\.storageStats).reduce((0, 0)) { ($0.0 + $1.transactions, $0.1 + $1.messages) }
    }

    func finish() -> Efficiency {
        let now = Self.storageStats(servers)
        let cpuNow = ProcessCPU.current()
        let botNow = bot?.botCPUSeconds
        let stored = max(now.messages - storage.messages, 1)
        let per1000 = { (value: Double) in (value / Double(stored) * 1000 * 1000).rounded() / 1000 }
        var databaseTransactions: Double?
        if let before = self.databaseTransactions, let after = Self.databaseTransactions(servers) {
            databaseTransactions = per1000(Double(after - before))
        }
        return Efficiency(
            storedMessages: stored,
            cpuSecondsPer1000Messages: per1000(cpuNow - cpu),
            botCPUSecondsPer1000Messages: botCPU.flatMap { start in botNow.map { per1000($0 - start) } },
            transactionsPer1000Messages: per1000(Double(now.transactions - storage.transactions)),
            databaseTransactionsPer1000Messages: databaseTransactions,
            writerCPUMicrosPerMessage: writerCPU.flatMap { start in
                Self.writerCPU(servers).map { (($0 - start) / Double(stored) * 1e6 * 10).rounded() / 10 }
            },
            inlineTransactionsPer1000Messages: writerCPU == nil
                ? nil : per1000(Double(Self.inlineTransactions(servers) - inlineTransactions)),
            walWritesPer1000Messages: writerCPU == nil || !WALWrites.isInstalled
                ? nil : per1000(Double(WALWrites.counts.issued - walWrites)))
    }
}

/// A value shared between tasks.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    init(_ value: Value) { mutex = Mutex(value) }

    func withLock<T>(_ body: (inout Value) -> T) -> T { mutex.withLock { body(&$0) } }
}
