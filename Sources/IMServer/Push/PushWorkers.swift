import CoreMetrics
import Foundation
import IMCore
import Logging
import PushProviders
import ServiceLifecycle
import Synchronization

/// The push workers (docs/PUSH.md, "The queue"): claim due pushes, send them, act on the answers.
extension PushDispatcher {
    // MARK: The queue

    /// What a worker task hands back to the loop.
    fileprivate enum WorkerEvent: Sendable {
        /// A push was tried: what the provider answered, and how long it took.
        case tried(PushQueueItem, PushOutcome, Duration)
        /// A push whose provider is no longer configured.
        case dropped(PushQueueItem)
        /// Time to look at the queue again (the poll interval passed, pushes were queued, or a rate-limited
        /// provider may send again).
        case tick
    }

    /// The workers: at most `workers` pushes in flight. The loop claims due pushes while slots are free (per
    /// provider: at most its share of the slots when several providers are configured, and what its `rate`
    /// allows in the next quarter second), reads the badges of a claimed batch in one query, sends each in a
    /// task of its own, and acts on the answers as they come: a slow or hanging provider holds only its own
    /// slots. Sent and dropped pushes are removed in batches, with the next claim. Returns when cancelled.
    func run() async {
        do { try await queue.releasePushHolds() } catch { logger.error("push: releasing holds failed", metadata: ["error": "\(error)"]) }
        await updateDepth()
        let workers = max(1, configuration.queue.workers)
        let rates = PushRates(configuration.providers)
        // One provider may take every slot when it is alone; with several, each keeps a quarter free for the others.
        let share = providers.count > 1 ? max(1, workers - workers / 4) : workers
        var state = WorkerState()
        await withTaskGroup(of: WorkerEvent.self) { group in
            while !Task.isCancelled {
                let free = workers - state.inFlightTotal
                // Claim when a good part of the slots is free (not one push at a time), or when nothing is in flight.
                if state.mayHaveMore, free > 0, free >= max(1, workers / 4) || state.inFlightTotal == 0 {
                    let now = Identifiers.nowMillis()
                    var limits: [String: Int] = [:]
                    var constrained = false
                    for name in providers.keys {
                        let room = min(free, share - state.inFlight[name, default: 0])
                        let allowed = rates.allowance(name, upTo: room)
                        if allowed < free { constrained = true }
                        if allowed > 0 { limits[name] = allowed }
                    }
                    var claimed: [PushQueueItem] = []
                    do {
                        claimed = try await queue.claimPushes(
                            now: now, limits: limits, holdUntil: now + configuration.queue.claimTimeout.milliseconds,
                            removing: state.finished)
                        state.finished = []
                    } catch {
                        logger.error("push: reading the queue failed", metadata: ["error": "\(error)"])
                    }
                    let asked = limits.values.reduce(0, +)
                    // Nothing more is due until a tick, a wake-up, or (when a provider was held back) a slot frees.
                    state.mayHaveMore = asked > 0 && claimed.count == asked
                    state.constrained = constrained
                    if !claimed.isEmpty {
                        let badges = await self.badges(for: claimed)
                        for item in claimed {
                            state.inFlightTotal += 1
                            state.inFlight[item.provider, default: 0] += 1
                            group.addTask { await self.attempt(item, badges: badges, rates: rates) }
                        }
                    }
                }
                if !state.ticking, !state.mayHaveMore {
                    state.ticking = true
                    let wait = state.constrained ? rates.nextWait(configuration.queue.pollInterval) : configuration.queue.pollInterval
                    group.addTask { await self.idle(wait) }
                }
                guard let event = await group.next() else { continue }
                await handle(event, state: &state)
                // Sent pushes go with the next claim, or sooner: when nothing else is in flight, when 256 wait,
                // or 50 ms after the first (a crash before then sends those again: at least once).
                if !state.finished.isEmpty,
                    state.inFlightTotal == 0 || state.finished.count >= 256 || ContinuousClock.now - state.finishedSince > .milliseconds(50)
                {
                    do {
                        try await queue.removePushes(ids: state.finished)
                        state.finished = []
                    } catch {
                        logger.error("push: removing sent pushes failed", metadata: ["error": "\(error)"])
                    }
                }
            }
            // Stopping: the sends still running are cut short (they answer retryLater and are rescheduled); what
            // they and the loop learnt is recorded in a task the shutdown does not cancel.
            var rest: [WorkerEvent] = []
            while let event = await group.next() { rest.append(event) }
            let finished = state.finished
            await Task {
                var state = WorkerState()
                state.finished = finished
                for event in rest { await self.handle(event, state: &state) }
                try? await self.queue.removePushes(ids: state.finished)
            }.value
        }
        await updateDepth()
    }

    /// What the loop keeps between steps.
    fileprivate struct WorkerState {
        var inFlightTotal = 0
        var inFlight: [String: Int] = [:]
        /// Sent or dropped pushes not removed yet (removed with the next claim; they stay held meanwhile).
        var finished: [Int64] = [] {
            didSet { if oldValue.isEmpty, !finished.isEmpty { finishedSince = .now } }
        }
        var finishedSince = ContinuousClock.now
        var mayHaveMore = true
        var constrained = false
        var ticking = false
        var depthUpdated = ContinuousClock.now
        /// `hookbot_push_latency_seconds{provider}`: how long each provider took to answer.
        var latency: [String: CoreMetrics.Timer] = [:]
    }

    fileprivate func handle(_ event: WorkerEvent, state: inout WorkerState) async {
        switch event {
        case .tick:
            state.ticking = false
            state.mayHaveMore = true
            if ContinuousClock.now - state.depthUpdated > .seconds(1) {
                await updateDepth()
                state.depthUpdated = .now
            }
        case .dropped(let item):
            state.inFlightTotal -= 1
            state.inFlight[item.provider, default: 1] -= 1
            logger.warning(
                "push dropped: its provider is no longer configured",
                metadata: ["client": "\(item.clientID)", "provider": "\(item.provider)", "message": "\(item.messageID)"])
            count(item.provider, "dropped")
            history.record(nil, for: item)
            state.finished.append(item.id)
        case .tried(let item, let outcome, let elapsed):
            state.inFlightTotal -= 1
            state.inFlight[item.provider, default: 1] -= 1
            // A provider held back at the last claim may take this slot.
            if state.constrained { state.mayHaveMore = true }
            if elapsed > .zero {
                let timer =
                    state.latency[item.provider]
                    ?? CoreMetrics.Timer(
                        label: "hookbot_push_latency_seconds", dimensions: [("provider", item.provider)], factory: factory)
                state.latency[item.provider] = timer
                timer.recordNanoseconds(elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
            }
            if await record(outcome, for: item) { state.finished.append(item.id) }
        }
    }

    /// Waits `wait`, or less when pushes are queued meanwhile.
    fileprivate func idle(_ wait: Duration) async -> WorkerEvent {
        let step = Duration.milliseconds(10)
        var waited = Duration.zero
        while waited < wait, !Task.isCancelled {
            if woken.exchange(false, ordering: .acquiring) { return .tick }
            try? await Task.sleep(for: min(step, wait - waited))
            waited += step
        }
        return .tick
    }

    fileprivate func updateDepth() async {
        if let count = try? await queue.pushQueueDepth() { depth.record(count) }
    }

    func shutdown() async {
        guard !shutDown.exchange(true, ordering: .acquiringAndReleasing) else { return }
        try? await http.shutdown()
    }

    fileprivate func count(_ provider: String, _ outcome: String) {
        let counter = sent.withLock { counters in
            let key = provider + "\u{0}" + outcome
            if let counter = counters[key] { return counter }
            let counter = Counter(
                label: "hookbot_push_sent_total", dimensions: [("provider", provider), ("outcome", outcome)], factory: factory)
            counters[key] = counter
            return counter
        }
        counter.increment()
    }

    /// The badges of a claimed batch: the unread count of each receiver whose push has no badge of its own,
    /// one query for all of them (nil when it failed: those pushes are retried).
    fileprivate func badges(for items: [PushQueueItem]) async -> [String: Int]? {
        let receivers = Set(items.filter { PushContent(stored: $0.content)?.badge == nil }.map(\.clientID))
        guard !receivers.isEmpty else { return [:] }
        do {
            return try await queue.unreadTotals(of: Array(receivers))
        } catch {
            logger.error("push: reading badges failed", metadata: ["error": "\(error)"])
            return nil
        }
    }

    /// Sends one push (after its provider's rate allows it) and answers what the provider said.
    fileprivate func attempt(_ item: PushQueueItem, badges: [String: Int]?, rates: PushRates) async -> WorkerEvent {
        guard let provider = providers[item.provider], let content = PushContent(stored: item.content) else { return .dropped(item) }
        guard let badges else { return .tried(item, .retryLater(after: nil, reason: "the badge could not be read"), .zero) }
        await rates.wait(item.provider)
        let started = ContinuousClock.now
        let outcome: PushOutcome
        do {
            let unread = badges[item.clientID] ?? 0
            history.sending(item, badge: content.badge ?? unread)
            outcome = try await provider.send(content.notification(unread: unread), to: item.device)
        } catch let error as PushError {
            outcome = .rejected(status: error.code, reason: error.reason)
        } catch {
            outcome = .retryLater(after: nil, reason: "\(error)")
        }
        return .tried(item, outcome, ContinuousClock.now - started)
    }

    /// Acts on a provider's answer: reschedules the push or removes a gone device. Answers true when the push
    /// is done with (sent or dropped): the loop removes those in batches.
    fileprivate func record(_ outcome: PushOutcome, for item: PushQueueItem) async -> Bool {
        let metadata: Logger.Metadata = ["client": "\(item.clientID)", "provider": "\(item.provider)", "message": "\(item.messageID)"]
        history.record(outcome, for: item)
        do {
            switch outcome {
            case .delivered:
                count(item.provider, "delivered")
                return true
            case .deviceGone(let reason):
                count(item.provider, "device_gone")
                logger.info("push device gone; removed", metadata: metadata.merging(["reason": "\(reason)"]) { $1 })
                _ = try await devices.removePushDevices(of: item.clientID, provider: item.provider, token: item.token, deviceID: nil)
                _ = try await queue.removePushes(provider: item.provider, token: item.token)
                return false
            case .rejected(let status, let reason):
                count(item.provider, "rejected")
                logger.warning("push rejected", metadata: metadata.merging(["status": "\(status)", "reason": "\(reason)"]) { $1 })
                return true
            case .retryLater(let after, let reason):
                let attempts = item.attempts + 1
                let now = Identifiers.nowMillis()
                let due = now + retryDelay(attempts: attempts, after: after).milliseconds
                if due - item.createdAt > configuration.queue.maxAge.milliseconds {
                    count(item.provider, "expired")
                    history.expired(item)
                    logger.warning(
                        "push dropped: not sent within its max age",
                        metadata: metadata.merging(["attempts": "\(attempts)", "reason": "\(reason)"]) { $1 })
                    return true
                }
                count(item.provider, "retry")
                logger.info("push to retry", metadata: metadata.merging(["attempts": "\(attempts)", "reason": "\(reason)"]) { $1 })
                try await queue.reschedulePush(id: item.id, attempts: attempts, dueAt: due, heldUntil: item.heldUntil)
                return false
            }
        } catch {
            logger.error("push: updating the queue failed", metadata: metadata.merging(["error": "\(error)"]) { $1 })
            return false
        }
    }

    /// The delay before attempt `attempts + 1`: `retryDelay` doubled per attempt, a random half to whole of
    /// it (jitter), at least the provider's Retry-After, at most `maxRetryDelay`.
    func retryDelay(attempts: Int, after: Duration?) -> Duration {
        let base = configuration.queue.retryDelay.milliseconds
        let cap = configuration.queue.maxRetryDelay.milliseconds
        let doubled = attempts >= 40 ? cap : min(cap, base << Int64(max(0, attempts - 1)))
        let jittered = doubled / 2 + Int64.random(in: 0...max(0, doubled - doubled / 2))
        return .milliseconds(min(cap, max(jittered, after?.milliseconds ?? 0)))
    }
}

/// `[push.<name>] rate`: notifications per second a provider may send, as evenly spaced slots (no burst).
final class PushRates: Sendable {
    private let rates: [String: Double]
    /// The next free slot of each rate-limited provider.
    private let next = Mutex<[String: ContinuousClock.Instant]>([:])

    init(_ providers: [PushProviderConfiguration]) {
        var rates: [String: Double] = [:]
        for provider in providers { if let rate = provider.rate, rate > 0 { rates[provider.name] = rate } }
        self.rates = rates
    }

    private func interval(_ rate: Double) -> Duration { .nanoseconds(Int64(1e9 / rate)) }

    /// How many of `room` pushes the provider may start within the next quarter second.
    func allowance(_ provider: String, upTo room: Int) -> Int {
        guard room > 0 else { return 0 }
        guard let rate = rates[provider] else { return room }
        let now = ContinuousClock.now
        let slot = next.withLock { $0[provider] } ?? now
        let window = (now + .milliseconds(250)) - max(slot, now)
        let count = Int((Double(window.components.seconds) + Double(window.components.attoseconds) / 1e18) * rate)
        return max(0, min(room, count))
    }

    /// How long until a rate-limited provider has a slot again (at most `cap`).
    func nextWait(_ cap: Duration) -> Duration {
        let now = ContinuousClock.now
        let soonest = next.withLock { $0.values.min() }
        guard let soonest else { return cap }
        return max(.milliseconds(5), min(cap, soonest - .milliseconds(200) - now))
    }

    /// Waits for the provider's next slot (at once when it has no rate).
    func wait(_ provider: String) async {
        guard let rate = rates[provider] else { return }
        let step = interval(rate)
        let now = ContinuousClock.now
        let slot = next.withLock { next -> ContinuousClock.Instant in
            let slot = max(next[provider] ?? now, now)
            next[provider] = slot + step
            return slot
        }
        if slot > now { try? await Task.sleep(until: slot, clock: .continuous) }
    }
}

extension PushConfiguration {
    /// The endpoint policy of the configured Web Push or UnifiedPush provider named `provider` (what `device add`
    /// checks a subscription's endpoint with), else the default: public https hosts only.
    func endpointPolicy(for provider: String) -> PushEndpointPolicy {
        for entry in providers where entry.name == provider {
            switch entry.kind {
            case .webPush(let settings): return settings.endpointPolicy
            case .unifiedPush(let settings): return settings.endpointPolicy
            default: return .publicHTTPS
            }
        }
        return .publicHTTPS
    }
}

extension Duration {
    /// Whole milliseconds.
    fileprivate var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}

/// Runs the push workers until the server shuts down.
struct PushService: Service {
    let dispatcher: PushDispatcher

    func run() async throws {
        await cancelWhenGracefulShutdown { await dispatcher.run() }
        await dispatcher.shutdown()
    }
}

extension IMServer {
    /// The push workers, when providers are configured.
    var pushServices: [any Service] {
        service.pushes.map { [PushService(dispatcher: $0)] } ?? []
    }
}
