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

    /// The workers: claim what is due (at most `workers` at once), send it, repeat; idle, look again after
    /// `pollInterval` or as soon as pushes are queued. Returns when the task is cancelled.
    func run() async {
        do { try await queue.releasePushHolds() } catch { logger.error("push: releasing holds failed", metadata: ["error": "\(error)"]) }
        await updateDepth()
        while !Task.isCancelled {
            let batch: [PushQueueItem]
            do {
                let now = Identifiers.nowMillis()
                batch = try await queue.claimPushes(
                    now: now, limit: max(1, configuration.queue.workers), holdUntil: now + configuration.queue.claimTimeout.milliseconds)
            } catch {
                logger.error("push: reading the queue failed", metadata: ["error": "\(error)"])
                batch = []
            }
            if batch.isEmpty {
                await idle()
                continue
            }
            await withTaskGroup(of: Void.self) { group in
                for item in batch { group.addTask { await self.send(item) } }
            }
            await updateDepth()
        }
    }

    fileprivate func idle() async {
        let step = Duration.milliseconds(20)
        var waited = Duration.zero
        while waited < configuration.queue.pollInterval, !Task.isCancelled {
            if woken.exchange(false, ordering: .acquiring) { return }
            try? await Task.sleep(for: step)
            waited += step
        }
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

    /// Sends one push and acts on the provider's answer.
    fileprivate func send(_ item: PushQueueItem) async {
        let metadata: Logger.Metadata = ["client": "\(item.clientID)", "provider": "\(item.provider)", "message": "\(item.messageID)"]
        guard let provider = providers[item.provider], let content = PushContent(stored: item.content) else {
            logger.warning("push dropped: its provider is no longer configured", metadata: metadata)
            count(item.provider, "dropped")
            history.record(nil, for: item)
            try? await queue.removePush(id: item.id)
            return
        }
        let outcome: PushOutcome
        do {
            let unread = try await store.unreadCounts(clientID: item.clientID).reduce(0) { $0 + $1.unread }
            history.sending(item, badge: content.badge ?? unread)
            outcome = try await provider.send(content.notification(unread: unread), to: item.device)
        } catch let error as PushError {
            outcome = .rejected(status: error.code, reason: error.reason)
        } catch {
            outcome = .retryLater(after: nil, reason: "\(error)")
        }
        // Not cancelled with the workers at shutdown: a send cut short is rescheduled, not left held.
        await Task { await self.record(outcome, for: item, metadata: metadata) }.value
    }

    /// Acts on a provider's answer: removes, reschedules or drops the push, removes a gone device.
    fileprivate func record(_ outcome: PushOutcome, for item: PushQueueItem, metadata: Logger.Metadata) async {
        history.record(outcome, for: item)
        do {
            switch outcome {
            case .delivered:
                count(item.provider, "delivered")
                try await queue.removePush(id: item.id)
            case .deviceGone(let reason):
                count(item.provider, "device_gone")
                logger.info("push device gone; removed", metadata: metadata.merging(["reason": "\(reason)"]) { $1 })
                _ = try await devices.removePushDevices(of: item.clientID, provider: item.provider, token: item.token, deviceID: nil)
                _ = try await queue.removePushes(provider: item.provider, token: item.token)
            case .rejected(let status, let reason):
                count(item.provider, "rejected")
                logger.warning("push rejected", metadata: metadata.merging(["status": "\(status)", "reason": "\(reason)"]) { $1 })
                try await queue.removePush(id: item.id)
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
                    try await queue.removePush(id: item.id)
                } else {
                    count(item.provider, "retry")
                    logger.info("push to retry", metadata: metadata.merging(["attempts": "\(attempts)", "reason": "\(reason)"]) { $1 })
                    try await queue.reschedulePush(id: item.id, attempts: attempts, dueAt: due)
                }
            }
        } catch {
            logger.error("push: updating the queue failed", metadata: metadata.merging(["error": "\(error)"]) { $1 })
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
