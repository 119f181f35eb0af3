import Foundation
import IMCore
import Logging
import Synchronization

/// Counters of the interception role, for logs and benchmarks.
public struct InterceptionStats: Sendable, Equatable {
    public var requests = 0
    public var allowed = 0
    public var dropped = 0
    public var modified = 0
    public var timeouts = 0
    public var failures = 0
    /// Requests decided by the failure policy (timeouts, disconnects, bad answers, no interceptor online,
    /// declined reviews).
    public var policyApplied = 0
    /// Requests the interceptor answered with `none` (it could not review them in time).
    public var declined = 0
}

/// Sends hook requests to the connected interceptors and waits for their verdicts, with a deadline.
///
/// In a cluster, an interceptor is connected to one node. A node whose message needs a review by an
/// interceptor connected elsewhere announces the request (`Announcement.review`); the interceptor's node
/// forwards it under an id of its own and announces the answer back (`Announcement.verdict`). The deadline,
/// failure policy and counters stay with the node that asked, so they are the same wherever the
/// interceptor is.
final class InterceptorHub: Sendable {
    enum Subject: Sendable {
        case message(OutgoingMessage)
        case membership(cid: String, actor: String, members: [String], action: String)
        /// An edit of a stored message (kind `edit`, with the message's id in `mid`): reviewed like a send.
        case edit(MessageEdit)
    }

    /// What came back for one request.
    private enum Answer: Sendable {
        case verdict(Verdict)
        /// The interceptor answered something that is not a verdict.
        case invalid
        /// The interceptor answered `none`: it could not decide in time (overloaded).
        case declined
        /// No answer: not connected or disconnected.
        case missing
        /// No answer within the deadline.
        case timedOut
        /// The answer as it came, for a request whose answer is not a verdict (`offline`).
        case raw(Command)
    }

    private struct Pending {
        var continuation: CheckedContinuation<Answer, Never>
        /// The interceptor's connection here, or `remote` when the request went to another node.
        var connectionID: UInt64
        var timeout: Task<Void, Never>?
        /// The caller reads the answer itself (`askOffline`), and the interception counters are not touched.
        var raw = false
    }

    /// A request forwarded for another node to this node's interceptor connection.
    private struct Forward {
        var origin: String
        var originalID: String
        var connectionID: UInt64
        var expires: ContinuousClock.Instant
    }

    private struct State {
        var connections: [String: Connection] = [:]
        var pending: [String: Pending] = [:]
        var forwards: [String: Forward] = [:]
        var stats = InterceptionStats()
        var nextID: UInt64 = 0
        /// Interceptors that answered `unhooked` to an `offline` request, until when they are not asked again.
        var unhooked: [String: ContinuousClock.Instant] = [:]
    }

    private static let remote: UInt64 = 0

    let configuration: InterceptionConfiguration
    private let state = Mutex(State())
    private let logger: Logger
    private let metrics: ServerMetrics
    private let cluster: ClusterNode?

    init(configuration: InterceptionConfiguration, metrics: ServerMetrics, logger: Logger, cluster: ClusterNode? = nil) {
        self.configuration = configuration
        self.metrics = metrics
        self.logger = logger
        self.cluster = cluster
    }

    var isActive: Bool { !configuration.interceptors.isEmpty }
    var stats: InterceptionStats { state.withLock { $0.stats } }

    func secret(for clientID: String) -> String? {
        configuration.interceptors.first { $0.clientID == clientID }?.secret
    }

    func isInterceptor(_ clientID: String) -> Bool { secret(for: clientID) != nil }

    func inScope(_ cid: String) -> Bool { configuration.conversations?.contains(cid) ?? true }

    /// Whether an interceptor with this client id is logged in.
    func isAttached(_ clientID: String) -> Bool {
        state.withLock { $0.connections[clientID] != nil } || cluster?.isInterceptorOnline(clientID) == true
    }

    /// Records a logged-in interceptor connection (the newest login of an id replaces the older one).
    func attach(_ connection: Connection, as clientID: String) {
        state.withLock { state in
            state.connections[clientID] = connection
            // A new login may come with other plugins: ask it about offline receivers again.
            state.unhooked[clientID] = nil
        }
        logger.info("interceptor attached", metadata: ["client": "\(clientID)", "conn": "\(connection.id)"])
    }

    /// Forgets a connection; its unanswered requests are decided by the failure policy at once.
    func detach(_ connection: Connection) {
        let abandoned = state.withLock { state -> [Pending] in
            for (id, attached) in state.connections where attached === connection { state.connections[id] = nil }
            state.forwards = state.forwards.filter { $0.value.connectionID != connection.id }
            let ids = state.pending.filter { $0.value.connectionID == connection.id }.map(\.key)
            return ids.compactMap { state.pending.removeValue(forKey: $0) }
        }
        for pending in abandoned {
            pending.timeout?.cancel()
            pending.continuation.resume(returning: .missing)
        }
    }

    /// Delivers an interceptor's answer; false when no request with that id is waiting on that connection.
    func resolve(_ command: Command, from connection: Connection) -> Bool {
        guard let id = command.id else { return false }
        let (pending, forward) = state.withLock { state -> (Pending?, Forward?) in
            if let pending = state.pending[id], pending.connectionID == connection.id {
                return (state.pending.removeValue(forKey: id), nil)
            }
            guard let forward = state.forwards[id], forward.connectionID == connection.id else { return (nil, nil) }
            return (nil, state.forwards.removeValue(forKey: id))
        }
        if let forward, let cluster {
            var answer = command
            answer.id = forward.originalID
            Task { await cluster.announce(.verdict(origin: forward.origin, answer: answer)) }
            return true
        }
        guard let pending else { return false }
        resume(pending, with: command)
        return true
    }

    /// Delivers an answer another node relayed for a request of this node.
    func resolveRelayed(_ command: Command) {
        guard let id = command.id else { return }
        let pending = state.withLock { state -> Pending? in
            guard state.pending[id]?.connectionID == Self.remote else { return nil }
            return state.pending.removeValue(forKey: id)
        }
        if let pending { resume(pending, with: command) }
    }

    /// Sends another node's request to this node's interceptor connection, if it is here.
    func forward(_ request: Command, to clientID: String, from origin: String) {
        guard let originalID = request.id else { return }
        let now = ContinuousClock.now
        let target = state.withLock { state -> (String, Connection)? in
            guard let connection = state.connections[clientID] else { return nil }
            // The asking node stops waiting at its deadline; an entry never answered goes after twice that.
            state.forwards = state.forwards.filter { $0.value.expires > now }
            state.nextID += 1
            let id = "f\(state.nextID)"
            // An `offline` request carries its own deadline (the push setting), longer than a review's.
            let deadline = max(configuration.deadlineMillis, request.attr?["deadline"]?.intValue ?? 0)
            state.forwards[id] = Forward(
                origin: origin, originalID: originalID, connectionID: connection.id,
                expires: now + .milliseconds(2 * deadline))
            return (id, connection)
        }
        guard let (id, connection) = target else { return }
        var forwarded = request
        forwarded.id = id
        send(forwarded, to: connection)
    }

    private func send(_ request: Command, to connection: Connection) {
        if let review = connection.review {
            Task { _ = self.resolve(await review(request), from: connection) }
        } else {
            connection.send(request)
        }
    }

    private func resume(_ pending: Pending, with command: Command) {
        pending.timeout?.cancel()
        if pending.raw { return pending.continuation.resume(returning: .raw(command)) }
        let answer: Answer = command.verdict == "none" ? .declined : Verdict(command).map(Answer.verdict) ?? .invalid
        pending.continuation.resume(returning: answer)
    }

    /// Runs the interceptor chain over a subject and returns the combined verdict.
    func review(_ subject: Subject) async -> Verdict {
        var body: String?
        var recipients: [String]?
        for interceptor in configuration.interceptors {
            var request = Self.request(for: subject)
            if let body { request.msg = body }
            let verdict = await ask(interceptor.clientID, request)
            switch verdict {
            case .allow:
                continue
            case .drop:
                return verdict
            case .modify(let newBody, let newRecipients):
                body = newBody ?? body
                recipients = newRecipients ?? recipients
            }
        }
        if body == nil, recipients == nil { return .allow }
        return .modify(body: body, recipients: recipients)
    }

    private func ask(_ clientID: String, _ request: Command) async -> Verdict {
        metrics.interceptionRequests.increment()
        let answer = await exchange(clientID, request, deadline: configuration.deadlineMillis, raw: false)
        let verdict: Verdict
        switch answer {
        case .verdict(let given): verdict = given
        case .invalid, .raw: verdict = policyVerdict(.invalid, clientID, request)
        case .declined: verdict = policyVerdict(.declined, clientID, request)
        case .missing: verdict = policyVerdict(.unavailable, clientID, request)
        case .timedOut: verdict = policyVerdict(.timeout, clientID, request)
        }
        state.withLock { state in
            switch verdict {
            case .allow: state.stats.allowed += 1
            case .drop: state.stats.dropped += 1
            case .modify: state.stats.modified += 1
            }
        }
        metrics.interceptionVerdict(verdict)
        return verdict
    }

    // MARK: Offline receivers (docs/PUSH.md, "on_offline")

    /// The interceptor to ask about a message's offline receivers in `cid`: the first configured one that is
    /// logged in (here or on another node) and has not answered `unhooked` lately; nil when there is none.
    func offlineInterceptor(for cid: String) -> String? {
        guard isActive, inScope(cid) else { return nil }
        let now = ContinuousClock.now
        return configuration.interceptors.first { interceptor in
            let skipped = state.withLock { state -> Bool in
                guard let until = state.unhooked[interceptor.clientID] else { return false }
                if until > now { return true }
                state.unhooked[interceptor.clientID] = nil
                return false
            }
            return !skipped && isAttached(interceptor.clientID)
        }?.clientID
    }

    /// How long an `unhooked` answer keeps the server from asking that interceptor again (a plugin that
    /// gains the hook by a reload is asked within this; a new login of the interceptor at once).
    static let unhookedFor: Duration = .seconds(60)

    /// Sends an `offline` request to `clientID` and answers what came back, or nil (no answer within
    /// `deadlineMillis`, not connected). Not counted as an interception review; an `unhooked` answer is
    /// remembered (`offlineInterceptor`).
    func askOffline(_ clientID: String, _ request: Command, deadlineMillis: Int) async -> Command? {
        guard case .raw(let answer) = await exchange(clientID, request, deadline: deadlineMillis, raw: true) else { return nil }
        if answer.verdict == "unhooked" {
            state.withLock { $0.unhooked[clientID] = ContinuousClock.now + Self.unhookedFor }
        }
        return answer
    }

    /// One request to one interceptor (on this node or, in a cluster, another) and what came back.
    private func exchange(_ clientID: String, _ request: Command, deadline: Int, raw: Bool) async -> Answer {
        await withCheckedContinuation { continuation in
            let elsewhere = cluster.flatMap { $0.isInterceptorOnline(clientID) ? $0 : nil }
            let registered = state.withLock { state -> (String, Connection?)? in
                if !raw { state.stats.requests += 1 }
                let connection = state.connections[clientID]
                guard connection != nil || elsewhere != nil else { return nil }
                state.nextID += 1
                let id = "h\(state.nextID)"
                state.pending[id] = Pending(
                    continuation: continuation, connectionID: connection?.id ?? Self.remote, timeout: nil, raw: raw)
                return (id, connection)
            }
            guard let (id, connection) = registered else {
                continuation.resume(returning: .missing)
                return
            }
            let timeout = Task {
                try? await Task.sleep(for: .milliseconds(deadline))
                guard !Task.isCancelled else { return }
                let expired = self.state.withLock { state -> Pending? in
                    guard let pending = state.pending.removeValue(forKey: id) else { return nil }
                    if !raw { state.stats.timeouts += 1 }
                    return pending
                }
                if expired != nil, !raw { self.metrics.interceptionTimeouts.increment() }
                expired?.continuation.resume(returning: .timedOut)
            }
            state.withLock { $0.pending[id]?.timeout = timeout }
            var request = request
            request.id = id
            if let connection {
                send(request, to: connection)
            } else if let elsewhere {
                let announcement = Announcement.review(interceptor: clientID, origin: elsewhere.id, request: request)
                // An `offline` request too large for a NOTIFY (hundreds of receivers): no answer can come, the
                // defaults go at once.
                guard !raw || announcement.payload() != nil else {
                    timeout.cancel()
                    state.withLock { $0.pending.removeValue(forKey: id) }?.continuation.resume(returning: .missing)
                    return
                }
                Task { await elsewhere.announce(announcement) }
            }
        }
    }

    /// Why the failure policy decided a request.
    private enum PolicyCause: String {
        case timeout = "no verdict within the deadline"
        case unavailable = "interceptor not connected"
        case invalid = "invalid verdict"
        case declined = "interceptor could not review in time"

        var metricName: String {
            switch self {
            case .timeout: "timeout"
            case .unavailable: "unavailable"
            case .invalid: "invalid"
            case .declined: "declined"
            }
        }
    }

    /// Applies the failure policy, counts it and logs it: every message the policy decides is visible.
    private func policyVerdict(_ cause: PolicyCause, _ clientID: String, _ request: Command) -> Verdict {
        let total = state.withLock { state in
            state.stats.policyApplied += 1
            if cause == .invalid { state.stats.failures += 1 }
            if cause == .declined { state.stats.declined += 1 }
            return state.stats.policyApplied
        }
        metrics.policyDecision(cause: cause.metricName, policy: configuration.failurePolicy.rawValue)
        logger.warning(
            "interception failure policy applied",
            metadata: [
                "policy": "\(configuration.failurePolicy.rawValue)", "cause": "\(cause.rawValue)", "interceptor": "\(clientID)",
                "kind": "\(request.kind ?? "")", "cid": "\(request.cid ?? "")", "from": "\(request.fromPeerId ?? request.initBy ?? "")",
                "policy_decisions_total": "\(total)",
            ])
        switch configuration.failurePolicy {
        case .failOpen: return .allow
        case .failClosed:
            return .drop(IMError(.messageRejectedByApp, "no verdict from the interceptor (fail-closed policy)"), silent: false)
        }
    }

    private static func request(for subject: Subject) -> Command {
        var request = Command(cmd: .hook, op: .request)
        switch subject {
        case .message(let message):
            request.kind = "message"
            request.cid = message.cid
            request.fromPeerId = message.from
            if message.binary { request.binaryMsg = message.data } else { request.msg = message.data }
            request.priority = message.priority
            request.mentionPids = message.mentionPids
        case .edit(let edit):
            request.kind = "edit"
            request.cid = edit.cid
            request.mid = edit.messageID
            request.fromPeerId = edit.editor
            if edit.binary { request.binaryMsg = edit.data } else { request.msg = edit.data }
            request.mentionPids = edit.mentionPids
        case .membership(let cid, let actor, let members, let action):
            request.kind = "membership"
            request.cid = cid
            request.initBy = actor
            request.m = members
            request.action = action
        }
        return request
    }
}
