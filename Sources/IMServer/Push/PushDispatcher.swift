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
    let queue: any PushQueueStore
    let devices: any PushDeviceStore
    let store: any ServerStore
    let registry: SessionRegistry
    /// Asked about each message's offline receivers when an interceptor is logged in (`on_offline`).
    let interceptors: InterceptorHub?
    let providers: [String: any PushProvider]
    let http: PushHTTPClient
    let logger: Logger
    let factory: any MetricsFactory
    let sent = Mutex<[String: Counter]>([:])
    let depth: Gauge
    /// The last pushes sent or dropped, for the console (PushHistory.swift).
    let history = PushHistory()
    /// Set when pushes were queued: the workers look at once instead of at their next poll.
    let woken = Atomic<Bool>(false)
    /// Queueing tasks still running (a stop waits for them, so what was stored is queued).
    let queueing = InFlightCounter()

    /// The dispatcher for `configuration.push`, or nil when no provider is configured. Pushes need a store
    /// with the queue (SQLite) and one node: in a cluster (PostgreSQL) none are sent yet, which is logged.
    static func make(
        _ configuration: ServerConfiguration, store: any ServerStore, registry: SessionRegistry, metrics: ServerMetrics,
        logger: Logger, interceptors: InterceptorHub? = nil
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
            interceptors: interceptors, providers: providers, http: http, logger: logger, factory: metrics.factory)
    }

    private init(
        configuration: PushConfiguration, queue: any PushQueueStore, devices: any PushDeviceStore, store: any ServerStore,
        registry: SessionRegistry, interceptors: InterceptorHub?, providers: [String: any PushProvider], http: PushHTTPClient,
        logger: Logger, factory: any MetricsFactory
    ) {
        self.configuration = configuration
        self.queue = queue
        self.devices = devices
        self.store = store
        self.registry = registry
        self.interceptors = interceptors
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
        queueing.started()
        Task {
            defer { queueing.finished() }
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

    /// Returns when every push of the messages stored so far is in the queue.
    func queued() async { await queueing.waitUntilNone() }

    private func queuePushes(for record: MessageRecord, receivers: [String], pushData: String?) async throws {
        guard let conversation = try await store.conversation(record.cid), !conversation.transient else { return }
        // The conversation's templates ([push.conversations], its pushTemplates attribute); nil: no push for it.
        guard let templates = configuration.templates(for: record.cid, attributes: conversation.attr) else { return }
        let muted = Set(conversation.muted)
        let content = PushContent.make(
            for: record, pushData: pushData, conversationName: conversation.name, templates: templates)
        let stored = content.stored
        let now = Identifiers.nowMillis()
        // With an interceptor to ask (`on_offline`), the defaults are queued first, held until its deadline:
        // a crash or no answer sends them then.
        let hold = (queue as? any PushHoldStore).flatMap { hold in
            interceptors?.offlineInterceptor(for: record.cid).map { (store: hold, interceptor: $0) }
        }
        let deadline = max(1, configuration.offlineHookDeadlineMillis)
        let due = hold == nil ? now : now + Int64(deadline)
        var items: [PushQueueItem] = []
        // One query for all of them, not one per receiver: a big group's message may have hundreds offline.
        for registered in try await devices.pushDevices(ofEach: receivers.filter { !muted.contains($0) }) {
            guard providers[registered.provider] != nil else { continue }
            items.append(
                PushQueueItem(
                    id: 0, clientID: registered.clientID, device: registered.device,
                    messageID: record.id, content: stored, attempts: 0, createdAt: now, dueAt: due))
        }
        guard !items.isEmpty else { return }
        try await queue.enqueuePushes(items)
        if let hold, let interceptors {
            var seen = Set<String>()
            let offline = OfflineHook.Held(
                record: record, receivers: items.map(\.clientID).filter { seen.insert($0).inserted }, content: content,
                heldDue: due, deadline: deadline, maxCharacters: templates.maxBodyCharacters)
            await askOffline(interceptors, hold.interceptor, store: hold.store, offline)
        }
        woken.store(true, ordering: .releasing)
    }

    /// Set once the HTTP client is shut down.
    let shutDown = Atomic<Bool>(false)

    deinit {
        // A server made and never run: the HTTP client must still be shut down (the task keeps it alive).
        if !shutDown.load(ordering: .acquiring) { Task { [http] in try? await http.shutdown() } }
    }
}
