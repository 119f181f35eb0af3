import CoreMetrics
import Foundation
import IMCore
import Logging
import PushProviders
import ServiceLifecycle
import Synchronization

/// Offline push (docs/PUSH.md, "Who gets a push", "What it says", "The queue"): after a stored message is
/// committed, each receiver with no session on this server and at least one device gets one notification
/// per device, queued in `push_queue`; workers send what is due through the configured providers.
final class PushDispatcher: Sendable {
    let configuration: PushConfiguration
    private let queue: any PushQueueStore
    private let devices: any PushDeviceStore
    private let store: any ServerStore
    private let registry: SessionRegistry
    private let providers: [String: any PushProvider]
    private let http: PushHTTPClient
    private let logger: Logger
    private let factory: any MetricsFactory
    private let sent = Mutex<[String: Counter]>([:])
    private let depth: Gauge
    /// Set when pushes were queued: the workers look at once instead of at their next poll.
    private let woken = Atomic<Bool>(false)
    /// Queueing tasks still running (a stop waits for them, so what was stored is queued).
    private let queueing = Mutex<(running: Int, waiters: [CheckedContinuation<Void, Never>])>((0, []))

    /// The dispatcher for `configuration.push`, or nil when no provider is configured. Pushes need a store
    /// with the queue (SQLite) and one node: in a cluster (PostgreSQL) none are sent yet, which is logged.
    static func make(
        _ configuration: ServerConfiguration, store: any ServerStore, registry: SessionRegistry, metrics: ServerMetrics,
        logger: Logger
    ) throws -> PushDispatcher? {
        guard configuration.push.isEnabled else { return nil }
        guard let queue = store as? any PushQueueStore, let devices = store as? any PushDeviceStore else {
            logger.warning("push providers are configured but this store keeps no push queue: no pushes are sent")
            return nil
        }
        let http = try PushHTTPClient(settings: configuration.push.http)
        var providers: [String: any PushProvider] = [:]
        do {
            for entry in configuration.push.providers {
                guard providers[entry.name] == nil else {
                    throw ServerConfigurationError("push provider '\(entry.name)' is configured more than once")
                }
                let provider: any PushProvider =
                    switch entry.kind {
                    case .apns(let settings): try APNsProvider(name: entry.name, settings: settings, http: http)
                    case .fcm(let settings): try FCMProvider(name: entry.name, settings: settings, http: http)
                    case .webPush(let settings): try WebPushProvider(name: entry.name, settings: settings, http: http)
                    case .unifiedPush(let settings): try UnifiedPushProvider(name: entry.name, settings: settings, http: http)
                    case .webhook(let settings): try WebhookProvider(name: entry.name, settings: settings, http: http)
                    }
                providers[entry.name] = provider
            }
        } catch {
            Task { try? await http.shutdown() }
            throw (error as? PushError).map { ServerConfigurationError("push: \($0)") } ?? error
        }
        return PushDispatcher(
            configuration: configuration.push, queue: queue, devices: devices, store: store, registry: registry,
            providers: providers, http: http, logger: logger, factory: metrics.factory)
    }

    private init(
        configuration: PushConfiguration, queue: any PushQueueStore, devices: any PushDeviceStore, store: any ServerStore,
        registry: SessionRegistry, providers: [String: any PushProvider], http: PushHTTPClient, logger: Logger,
        factory: any MetricsFactory
    ) {
        self.configuration = configuration
        self.queue = queue
        self.devices = devices
        self.store = store
        self.registry = registry
        self.providers = providers
        self.http = http
        self.logger = logger
        self.factory = factory
        depth = Gauge(label: "hookbot_push_queue_depth", factory: factory)
    }

    // MARK: Who gets a push

    /// Called by the message pipeline once `record` is committed (never for transient, cmd or refused
    /// messages, which are not stored; chat rooms are skipped here). Does not hold the pipeline up.
    func messageStored(_ record: MessageRecord, members: [String], room: Bool, pushData: String?) {
        guard !room, members.count > 1 else { return }
        queueing.withLock { $0.running += 1 }
        Task {
            defer { finishedQueueing() }
            // Presence is read here, off the pipeline's thread: a 10,000-member group costs it nothing.
            var offline = members.filter { $0 != record.from && registry.connections(of: $0).isEmpty }
            guard !offline.isEmpty else { return }
            do {
                // In a cluster, members with a session on another node (the presence table) are online too.
                let elsewhere = try await queue.connectedElsewhere(offline)
                offline.removeAll { elsewhere.contains($0) }
                guard !offline.isEmpty else { return }
                try await queuePushes(for: record, receivers: offline, pushData: pushData)
            } catch {
                logger.error("push: queueing failed", metadata: ["message": "\(record.id)", "error": "\(error)"])
            }
        }
    }

    private func finishedQueueing() {
        let waiters = queueing.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.running -= 1
            guard state.running == 0 else { return [] }
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns when every push of the messages stored so far is in the queue.
    func queued() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = queueing.withLock { state -> Bool in
                guard state.running > 0 else { return true }
                state.waiters.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }

    private func queuePushes(for record: MessageRecord, receivers: [String], pushData: String?) async throws {
        guard let conversation = try await store.conversation(record.cid), !conversation.transient else { return }
        let muted = Set(conversation.muted)
        let content = PushContent.make(
            for: record, pushData: pushData, conversationName: conversation.name, templates: configuration.templates
        ).stored
        let now = Identifiers.nowMillis()
        var items: [PushQueueItem] = []
        // One query for all of them, not one per receiver: a big group's message may have hundreds offline.
        for device in try await devices.pushDevices(ofEach: receivers.filter { !muted.contains($0) }) {
            guard providers[device.provider] != nil else { continue }
            items.append(
                PushQueueItem(
                    id: 0, clientID: device.clientID, provider: device.provider, token: device.token, keys: device.keys,
                    messageID: record.id, content: content, attempts: 0, createdAt: now, dueAt: now))
        }
        guard !items.isEmpty else { return }
        try await queue.enqueuePushes(items)
        woken.store(true, ordering: .releasing)
    }

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

    private func idle() async {
        let step = Duration.milliseconds(20)
        var waited = Duration.zero
        while waited < configuration.queue.pollInterval, !Task.isCancelled {
            if woken.exchange(false, ordering: .acquiring) { return }
            try? await Task.sleep(for: step)
            waited += step
        }
    }

    private func updateDepth() async {
        if let count = try? await queue.pushQueueDepth() { depth.record(count) }
    }

    private let shutDown = Atomic<Bool>(false)

    func shutdown() async {
        guard !shutDown.exchange(true, ordering: .acquiringAndReleasing) else { return }
        try? await http.shutdown()
    }

    deinit {
        // A server made and never run: the HTTP client must still be shut down (the task keeps it alive).
        if !shutDown.load(ordering: .acquiring) { Task { [http] in try? await http.shutdown() } }
    }

    private func count(_ provider: String, _ outcome: String) {
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
    private func send(_ item: PushQueueItem) async {
        let metadata: Logger.Metadata = ["client": "\(item.clientID)", "provider": "\(item.provider)", "message": "\(item.messageID)"]
        guard let provider = providers[item.provider], let content = PushContent(stored: item.content) else {
            logger.warning("push dropped: its provider is no longer configured", metadata: metadata)
            count(item.provider, "dropped")
            try? await queue.removePush(id: item.id)
            return
        }
        let outcome: PushOutcome
        do {
            let unread = try await store.unreadCounts(clientID: item.clientID).reduce(0) { $0 + $1.unread }
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
    private func record(_ outcome: PushOutcome, for item: PushQueueItem, metadata: Logger.Metadata) async {
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
