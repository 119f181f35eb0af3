import Foundation
import IMCore
import Logging
import PostgresNIO
import Synchronization

/// This server's membership of a cluster: several nodes on one PostgreSQL database.
///
/// - Announcements (`Announcement`) travel by `NOTIFY` on the cluster's channel; every node `LISTEN`s on a
///   connection of its own and hands them to `handle` one at a time, in the order PostgreSQL delivers
///   them (commit order). Stored messages are announced inside the transaction that stores them.
/// - Presence (which client ids, tags, chat rooms and interceptors each node serves) is a table, so
///   online status and chat-room counts are cluster-wide; a node heartbeats every `heartbeat`, and the
///   presence of a node silent for `nodeTimeout` (it died) is deleted by the others.
/// - If the listening connection fails, the node cannot know what it missed: it closes its clients'
///   sessions (they reconnect, here or elsewhere, and receive what they missed as offline messages) and
///   listens again.
final class ClusterNode: Sendable {
    /// This node's id, new at every start.
    let id: String
    let store: PostgresStore
    private let logger: Logger
    private let address: String
    private let tasks = Mutex<[Task<Void, Never>]>([])
    /// Interceptor client ids logged in anywhere in the cluster (refreshed with every heartbeat, and at once
    /// when one attaches here).
    private let interceptorsOnline = Mutex<Set<String>>([])
    private let listening = Atomic<Bool>(false)
    /// Connections closed recently, with when: heartbeats delete their presence again, in case a session
    /// closed while its presence was still being written.
    private let recentlyClosed = Mutex<[UInt64: ContinuousClock.Instant]>([:])
    /// Announcements waiting for the statement in flight to finish.
    private let outbox = Mutex<(payloads: [String], waiting: [CheckedContinuation<Void, Never>], sending: Bool)>(([], [], false))

    static let heartbeat: Duration = .seconds(2)
    static let nodeTimeout: Int64 = 15_000

    private let metrics: ServerMetrics

    init(store: PostgresStore, address: String, metrics: ServerMetrics, logger: Logger) {
        id = Identifiers.random(length: 12)
        self.store = store
        self.metrics = metrics
        self.address = address
        self.logger = logger
    }

    /// Whether the node is listening for announcements (readiness).
    var isListening: Bool { listening.load(ordering: .relaxed) }

    /// Registers the node, then listens and heartbeats until `stop`. Returns once listening.
    func start(handle: @escaping @Sendable (Announcement) async -> Void, lostAnnouncements: @escaping @Sendable () -> Void) async throws {
        let now = Identifiers.nowMillis()
        _ = try await store.execute(
            "INSERT INTO nodes (id, address, started_at, seen_at) VALUES (\(id), \(address), \(now), \(now))")
        let (ready, readyContinuation) = AsyncStream<Void>.makeStream()
        let listener = Task { [self] in
            var failures = 0
            while !Task.isCancelled {
                do {
                    try await listen(handle: handle) {
                        // Listening again: the next failure starts the backoff anew.
                        failures = 0
                        readyContinuation.yield()
                    }
                } catch {
                    if Task.isCancelled { break }
                    logger.error("cluster listener failed", metadata: ["node": "\(id)", "error": "\(String(reflecting: error))"])
                }
                guard !Task.isCancelled else { break }
                metrics.clusterListenerFailures.increment()
                metrics.clusterListening.record(0)
                if listening.exchange(false, ordering: .relaxed) { lostAnnouncements() }
                failures += 1
                try? await Task.sleep(for: .milliseconds(min(5_000, 100 * (1 << min(failures, 6)))))
            }
            readyContinuation.finish()
        }
        let heartbeat = Task { [self] in
            while !Task.isCancelled {
                do {
                    try await beat()
                } catch {
                    logger.warning("cluster heartbeat failed", metadata: ["node": "\(id)", "error": "\(String(reflecting: error))"])
                }
                try? await Task.sleep(for: Self.heartbeat)
            }
        }
        tasks.withLock { $0 = [listener, heartbeat] }
        for await _ in ready { return }
        throw IMError(.internalError, "cluster listener did not start")
    }

    private func listen(handle: @Sendable (Announcement) async -> Void, onReady: () -> Void) async throws {
        let connection = try await store.makeListenConnection(logger: logger)
        defer { Task { try? await connection.close() } }
        try await withTaskCancellationHandler {
            try await connection.listen(on: store.channel) { notifications in
                listening.store(true, ordering: .relaxed)
                metrics.clusterListening.record(1)
                onReady()
                for try await notification in notifications {
                    guard let announcement = Announcement(payload: notification.payload) else {
                        logger.warning("malformed cluster announcement", metadata: ["payload": "\(notification.payload.prefix(200))"])
                        continue
                    }
                    await handle(announcement)
                }
            }
        } onCancel: {
            Task { try? await connection.close() }
        }
    }

    /// Marks the node alive, forgets nodes that stopped beating, and refreshes the interceptors online.
    private func beat() async throws {
        let now = Identifiers.nowMillis()
        let cutoff = now - Self.nodeTimeout
        _ = try await store.execute("UPDATE nodes SET seen_at = \(now) WHERE id = \(id)")
        let dead = try await store.execute("DELETE FROM nodes WHERE seen_at < \(cutoff) RETURNING id")
        for try await (node) in dead.decode(String.self) {
            logger.notice("cluster node stopped beating; its presence is forgotten", metadata: ["node": "\(node)"])
        }
        _ = try await store.execute("DELETE FROM presence WHERE node NOT IN (SELECT id FROM nodes)")
        let closed = recentlyClosed.withLock { closed -> [Int64] in
            let horizon = ContinuousClock.now - .seconds(10)
            closed = closed.filter { $0.value > horizon }
            return closed.keys.map { Int64($0) }
        }
        if !closed.isEmpty {
            _ = try await store.execute("DELETE FROM presence WHERE node = \(id) AND connection = ANY(\(closed))")
        }
        try await refreshInterceptors()
    }

    private func refreshInterceptors() async throws {
        let rows = try await store.execute("SELECT DISTINCT client_id FROM presence WHERE interceptor")
        var online = Set<String>()
        for try await clientID in rows.decode(String.self) { online.insert(clientID) }
        interceptorsOnline.withLock { $0 = online }
    }

    /// Stops listening and heartbeating, and removes the node and its presence.
    func stop() async {
        for task in tasks.withLock({ $0 }) { task.cancel() }
        listening.store(false, ordering: .relaxed)
        do {
            _ = try await store.execute("DELETE FROM presence WHERE node = \(id)")
            _ = try await store.execute("DELETE FROM nodes WHERE id = \(id)")
        } catch {
            logger.warning("cluster node could not deregister", metadata: ["node": "\(id)", "error": "\(String(reflecting: error))"])
        }
    }

    /// Sends an announcement to every node (this one included).
    /// Returns once it is sent; announcements are sent in the order they were made. Those made while a
    /// statement is in flight go out together in the next one (group commit, as for messages), so under
    /// load announcing costs a fraction of a transaction each.
    func announce(_ announcement: Announcement) async {
        guard let payload = announcement.payload() else {
            logger.error("cluster announcement too large to send", metadata: ["node": "\(id)"])
            return
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let start = outbox.withLock { outbox -> Bool in
                metrics.clusterAnnouncementsSent.increment()
                outbox.payloads.append(payload)
                outbox.waiting.append(continuation)
                defer { outbox.sending = true }
                return !outbox.sending
            }
            if start { Task { await sendAnnouncements() } }
        }
    }

    private func sendAnnouncements() async {
        while true {
            let next = outbox.withLock { outbox -> (payloads: [String], waiting: [CheckedContinuation<Void, Never>])? in
                guard !outbox.payloads.isEmpty else {
                    outbox.sending = false
                    return nil
                }
                defer {
                    outbox.payloads.removeAll()
                    outbox.waiting.removeAll()
                }
                return (outbox.payloads, outbox.waiting)
            }
            guard let (payloads, waiting) = next else { return }
            do {
                // Ordered: notifications of one transaction are delivered in the order they were sent.
                _ = try await store.execute(
                    """
                    SELECT pg_notify(\(store.channel), p.payload)
                    FROM (SELECT payload FROM unnest(\(payloads)::text[]) WITH ORDINALITY AS u (payload, ord) ORDER BY ord) AS p
                    """)
            } catch {
                logger.error(
                    "cluster announcements failed",
                    metadata: ["node": "\(id)", "count": "\(payloads.count)", "error": "\(String(reflecting: error))"])
            }
            for continuation in waiting { continuation.resume() }
        }
    }

    // MARK: Presence

    func sessionOpened(_ connection: UInt64, clientID: String, tag: String?, interceptor: Bool) async {
        await presence(
            "INSERT INTO presence (node, connection, client_id, tag, interceptor) VALUES (\(id), \(Int64(connection)), \(clientID), \(tag), \(interceptor)) ON CONFLICT (node, connection) DO UPDATE SET client_id = EXCLUDED.client_id, tag = EXCLUDED.tag, room = NULL, interceptor = EXCLUDED.interceptor"
        )
        if interceptor { interceptorsOnline.withLock { _ = $0.insert(clientID) } }
    }

    func sessionClosed(_ connection: UInt64) async {
        recentlyClosed.withLock { $0[connection] = .now }
        await presence("DELETE FROM presence WHERE node = \(id) AND connection = \(Int64(connection))")
    }

    /// Records the chat room a connection is in (nil: none).
    func room(_ connection: UInt64, is room: String?) async {
        await presence("UPDATE presence SET room = \(room) WHERE node = \(id) AND connection = \(Int64(connection))")
    }

    private func presence(_ query: PostgresQuery) async {
        do {
            _ = try await store.execute(query)
        } catch {
            logger.error("presence update failed", metadata: ["node": "\(id)", "error": "\(String(reflecting: error))"])
        }
    }

    /// Distinct clients in a chat room, on every live node.
    func roomOccupancy(_ cid: String) async throws -> Int {
        let rows = try await store.client.query(
            "SELECT COUNT(DISTINCT client_id) FROM presence WHERE room = \(cid) AND node IN (SELECT id FROM nodes WHERE seen_at >= \(Identifiers.nowMillis() - Self.nodeTimeout))",
            logger: logger)
        for try await count in rows.decode(Int64.self) { return Int(count) }
        return 0
    }

    /// Which of these client ids are logged in on some live node.
    func online(_ clientIDs: [String]) async throws -> Set<String> {
        let rows = try await store.client.query(
            "SELECT DISTINCT client_id FROM presence WHERE client_id = ANY(\(clientIDs)) AND node IN (SELECT id FROM nodes WHERE seen_at >= \(Identifiers.nowMillis() - Self.nodeTimeout))",
            logger: logger)
        var online = Set<String>()
        for try await clientID in rows.decode(String.self) { online.insert(clientID) }
        return online
    }

    /// Whether an interceptor with this id is logged in on some node (as of the last heartbeat).
    func isInterceptorOnline(_ clientID: String) -> Bool { interceptorsOnline.withLock { $0.contains(clientID) } }
}
