import CoreMetrics
import Dispatch
import IMCore
import Synchronization

/// The server's metrics (see docs/CONSOLE.md, "Metrics"), recorded through swift-metrics into the
/// factory the server was given. Handles are made once and kept: recording is an atomic add, or a
/// lock-protected dictionary lookup for the counters labelled by command.
final class ServerMetrics: Sendable {
    private struct CommandKey: Hashable {
        var cmd: CommandType
        var op: OpType?
        var code: Int?
    }

    let factory: any MetricsFactory
    private let connectionGauges: [WireFormat: Meter]
    private let sessionGauges: [WireFormat: Meter]
    private let commandCounters = Mutex<[CommandKey: Counter]>([:])
    let messagesStored: Counter
    let messagesDelivered: Counter
    let messagesDeliveredOffline: Counter
    let deliveryLatency: Timer
    let commitLatency: Timer
    let commitBatchSize: Recorder
    let interceptionRequests: Counter
    private let interceptionVerdicts: [String: Counter]
    let interceptionTimeouts: Counter
    /// From a message's review request to its verdict's application.
    let interceptionHold: Timer
    private let policyDecisions = Mutex<[String: Counter]>([:])
    /// Connections the server closed to protect itself, by reason (see `ConnectionGuard`).
    private let connectionsRefused: [ConnectionGuard.Reason: Counter]
    /// In a cluster: announcements this node sent (events; messages are announced by their commit), those
    /// it received by kind, failures of its listening connection, and whether it listens (1) or not (0).
    let clusterAnnouncementsSent: Counter
    private let clusterAnnouncementsReceived: [String: Counter]
    let clusterListenerFailures: Counter
    let clusterListening: Gauge
    /// In a cluster: from a message's stored timestamp to its delivery by this node (wall clocks of two
    /// nodes; millisecond resolution).
    let clusterDeliveryLatency: Timer

    init(factory: any MetricsFactory) {
        self.factory = factory
        func byFormat(_ label: String) -> [WireFormat: Meter] {
            Dictionary(
                uniqueKeysWithValues: WireFormat.allCases.map { format in
                    (format, Meter(label: label, dimensions: [("format", format.metricName)], factory: factory))
                })
        }
        connectionGauges = byFormat("hookbot_connections")
        sessionGauges = byFormat("hookbot_sessions")
        messagesStored = Counter(label: "hookbot_messages_stored_total", factory: factory)
        messagesDelivered = Counter(label: "hookbot_messages_delivered_total", factory: factory)
        messagesDeliveredOffline = Counter(label: "hookbot_messages_offline_delivered_total", factory: factory)
        deliveryLatency = Timer(label: "hookbot_delivery_latency_seconds", factory: factory)
        commitLatency = Timer(label: "hookbot_commit_latency_seconds", factory: factory)
        commitBatchSize = Recorder(label: "hookbot_commit_batch_messages", factory: factory)
        interceptionRequests = Counter(label: "hookbot_interception_requests_total", factory: factory)
        interceptionHold = Timer(label: "hookbot_interception_hold_seconds", factory: factory)
        interceptionVerdicts = Dictionary(
            uniqueKeysWithValues: ["allow", "drop", "modify"].map { verdict in
                (verdict, Counter(label: "hookbot_interception_verdicts_total", dimensions: [("verdict", verdict)], factory: factory))
            })
        interceptionTimeouts = Counter(label: "hookbot_interception_timeouts_total", factory: factory)
        clusterAnnouncementsSent = Counter(label: "hookbot_cluster_announcements_sent_total", factory: factory)
        clusterAnnouncementsReceived = Dictionary(
            uniqueKeysWithValues: Announcement.kinds.map { kind in
                (kind, Counter(label: "hookbot_cluster_announcements_received_total", dimensions: [("kind", kind)], factory: factory))
            })
        clusterListenerFailures = Counter(label: "hookbot_cluster_listener_failures_total", factory: factory)
        clusterListening = Gauge(label: "hookbot_cluster_listening", factory: factory)
        clusterDeliveryLatency = Timer(label: "hookbot_cluster_delivery_latency_seconds", factory: factory)
        connectionsRefused = Dictionary(
            uniqueKeysWithValues: ConnectionGuard.Reason.allCases.map { reason in
                (reason, Counter(label: "hookbot_connections_refused_total", dimensions: [("reason", reason.rawValue)], factory: factory))
            })
    }

    /// Counts a connection the server closed to protect itself.
    func connectionRefused(_ reason: ConnectionGuard.Reason) { connectionsRefused[reason]?.increment() }

    func connectionOpened(_ format: WireFormat) { connectionGauges[format]?.increment() }
    func connectionClosed(_ format: WireFormat) { connectionGauges[format]?.decrement() }
    func sessionOpened(_ format: WireFormat) { sessionGauges[format]?.increment() }
    func sessionClosed(_ format: WireFormat) { sessionGauges[format]?.decrement() }

    /// Counts one handled command (`code` nil) or one refused with an error code.
    func command(_ cmd: CommandType, _ op: OpType?, code: Int? = nil) {
        let key = CommandKey(cmd: cmd, op: op, code: code)
        let counter = commandCounters.withLock { counters in
            if let counter = counters[key] { return counter }
            var dimensions = [("cmd", cmd.rawValue), ("op", op?.rawValue ?? "")]
            if let code { dimensions.append(("code", String(code))) }
            let counter = Counter(
                label: code == nil ? "hookbot_commands_total" : "hookbot_command_errors_total", dimensions: dimensions,
                factory: factory)
            counters[key] = counter
            return counter
        }
        counter.increment()
    }

    func announcementReceived(_ announcement: Announcement) {
        clusterAnnouncementsReceived[announcement.kind]?.increment()
    }

    func interceptionVerdict(_ verdict: Verdict) {
        let name =
            switch verdict {
            case .allow: "allow"
            case .drop: "drop"
            case .modify: "modify"
            }
        interceptionVerdicts[name]?.increment()
    }

    /// A request the failure policy decided, by cause (`timeout`, `unavailable`, `invalid`, `declined`).
    func policyDecision(cause: String, policy: String) {
        let counter = policyDecisions.withLock { counters in
            if let counter = counters[cause] { return counter }
            let counter = Counter(
                label: "hookbot_interception_policy_decisions_total", dimensions: [("cause", cause), ("policy", policy)],
                factory: factory)
            counters[cause] = counter
            return counter
        }
        counter.increment()
    }

    /// Nanoseconds on a monotonic clock, for latency measurements.
    @inline(__always) static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// Records the time since `start` (from `now()`).
    @inline(__always) static func record(_ timer: Timer, since start: UInt64) {
        timer.recordNanoseconds(Int64(clamping: now() &- start))
    }
}

extension WireFormat: CaseIterable {
    static let allCases: [WireFormat] = [.json, .protobuf, .protobufBase64, .local]

    /// The value of the `format` label.
    var metricName: String {
        switch self {
        case .json: "json"
        case .protobuf: "protobuf"
        case .protobufBase64: "protobuf_base64"
        case .local: "in_process"
        }
    }
}
