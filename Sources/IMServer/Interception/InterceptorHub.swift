import Foundation
import IMCore
import Logging
import NIOCore
import NIOPosix
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
        case membership(cid: String, actor: String, members: [String], action: HookRequest.MembershipAction)
        /// An edit of a stored message (kind `edit`, with the message's id in `mid`): reviewed like a send.
        case edit(MessageEdit)
    }

    /// What came back for one request.
    enum Answer: Sendable, CustomStringConvertible {
        case verdict(HookVerdict)
        /// The interceptor answered something that is not a verdict.
        case invalid
        /// No answer: not connected or disconnected.
        case missing
        /// No answer within the deadline.
        case timedOut

        var description: String {
            switch self {
            case .verdict(let verdict): "\(verdict)"
            case .invalid: "invalid"
            case .missing: "missing"
            case .timedOut: "timed out"
            }
        }
    }

    private struct Pending {
        /// Takes the answer (once): resumes a waiting task, or carries a review on (`review(_:then:)`).
        var resume: @Sendable (Answer) -> Void
        /// The interceptor's connection here, or `remote` when the request went to another node.
        var connectionID: UInt64
        /// When the failure policy decides it (`timedOut`), unless an answer came first.
        var expires: NIODeadline
        /// What was asked: a wire answer is read as the answer to this kind of request, and `offline`
        /// requests (`askOffline`) do not touch the interception counters.
        var kind: HookRequest.Kind
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
        /// The earliest deadline the expiry timer is set for; nil when none is set.
        var timerAt: NIODeadline?
    }

    private static let remote: UInt64 = 0

    /// An in-process interceptor's heads-up and the connection it came with. A class, not a tuple in the mutex: read
    /// as `withLock { $0?.call }`, a closure kept in a tuple inside the mutex's generic value was written back through
    /// a reabstraction thunk on each read, so every heads-up wrapped it once more and calling it went through one
    /// thunk per frame received before it (54 million thunk calls in 12,400 frames of w1a and w1b, 40 % of the
    /// process's CPU by the end of w1b).
    private final class HeadsUpTarget: Sendable {
        let connectionID: UInt64
        let call: ReviewHeadsUp

        init(connectionID: UInt64, call: @escaping ReviewHeadsUp) {
            self.connectionID = connectionID
            self.call = call
        }
    }

    let configuration: InterceptionConfiguration
    private let state = Mutex(State())
    /// The heads-up of the chain's first interceptor when it is attached in process with one (`expectReview`). Apart
    /// from `state`: it is read for each received frame that looks like a message.
    private let headsUp = Mutex<HeadsUpTarget?>(nil)
    private let logger: Logger
    private let metrics: ServerMetrics
    private let cluster: ClusterNode?
    /// Where the deadlines expire: one timer for the earliest pending request (rather than a sleeping task per
    /// request, which cost each review two more task runs and a timer of its own).
    private let timers: any EventLoop = MultiThreadedEventLoopGroup.singleton.any()

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
        if clientID == configuration.interceptors.first?.clientID {
            // The first in the chain is asked first: a heads-up to a later one would come a review too early.
            let target = connection.transport.headsUp.map { HeadsUpTarget(connectionID: connection.id, call: $0) }
            headsUp.withLock { $0 = target }
        }
        logger.info("interceptor attached", metadata: ["client": "\(clientID)", "conn": "\(connection.id)"])
    }

    /// Forgets a connection; its unanswered requests are decided by the failure policy at once.
    func detach(_ connection: Connection) {
        headsUp.withLock { if $0?.connectionID == connection.id { $0 = nil } }
        let abandoned = state.withLock { state -> [Pending] in
            for (id, attached) in state.connections where attached === connection { state.connections[id] = nil }
            state.forwards = state.forwards.filter { $0.value.connectionID != connection.id }
            let ids = state.pending.filter { $0.value.connectionID == connection.id }.map(\.key)
            return ids.compactMap { state.pending.removeValue(forKey: $0) }
        }
        for pending in abandoned { pending.resume(.missing) }
    }

    /// Tells the first interceptor, when it is attached in process with a heads-up, that a message for its review is
    /// probably on its way (a received frame looks like one: `WireFormat.probablySendsMessage`). Issue 30, round 9:
    /// the bot's Lua thread sleeps between reviews, and waking its idle CPU took about 28 µs of each review's hold;
    /// told when the frame arrives, it wakes while this thread decodes and handles the message.
    func expectReview() {
        headsUp.withLock { $0 }?.call()
    }

    /// Delivers an interceptor's `hook verdict` command; false when no request with that id is waiting on
    /// that connection.
    func resolve(_ command: Command, from connection: Connection) -> Bool {
        guard let id = command.id else { return false }
        return settle(id, from: connection, verdict: { HookVerdict(command: command, answering: $0) }, command: { command })
    }

    /// Delivers the answer to request `id` from `connection`: `verdict` reads it for the request waiting here,
    /// `command` is what is relayed when the request came from another node.
    private func settle(
        _ id: String, from connection: Connection, verdict: (HookRequest.Kind) -> HookVerdict?, command: () -> Command
    ) -> Bool {
        let (pending, forward) = state.withLock { state -> (Pending?, Forward?) in
            if let pending = state.pending[id], pending.connectionID == connection.id {
                return (state.pending.removeValue(forKey: id), nil)
            }
            guard let forward = state.forwards[id], forward.connectionID == connection.id else { return (nil, nil) }
            return (nil, state.forwards.removeValue(forKey: id))
        }
        if let forward, let cluster {
            var answer = command()
            answer.id = forward.originalID
            Task { await cluster.announce(.verdict(origin: forward.origin, answer: answer)) }
            return true
        }
        guard let pending else { return false }
        resume(pending, with: verdict(pending.kind))
        return true
    }

    /// Delivers an answer another node relayed for a request of this node.
    func resolveRelayed(_ command: Command) {
        guard let id = command.id else { return }
        let pending = state.withLock { state -> Pending? in
            guard state.pending[id]?.connectionID == Self.remote else { return nil }
            return state.pending.removeValue(forKey: id)
        }
        if let pending { resume(pending, with: HookVerdict(command: command, answering: pending.kind)) }
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
        if connection.review == nil {
            var forwarded = request
            forwarded.id = id
            connection.send(forwarded)
        } else if let typed = HookRequest(command: request) {
            send(typed, id: id, to: connection)
        } else {
            // Not a request an in-process interceptor can be asked: answered as invalid at once.
            _ = settle(id, from: connection, verdict: { _ in nil }, command: { Command(cmd: .hook, op: .verdict) })
        }
    }

    /// Asks `connection`'s interceptor: a direct call for one attached in process (no command is made),
    /// a `hook request` command otherwise.
    private func send(_ request: HookRequest, id: String, to connection: Connection) {
        guard let review = connection.review else { return connection.send(request.command(id: id)) }
        // The answer is settled, and the verdict applied, on the thread that gives it: for the in-process bot
        // its Lua thread, so no task waits for the answer and no pool thread is woken to carry it on
        // (issue 30). The deadline's timer is already set.
        review(request) { verdict in
            _ = self.settle(
                id, from: connection, verdict: { _ in verdict },
                command: { verdict?.command(id: id) ?? Command(cmd: .hook, op: .verdict) })
        }
    }

    /// An in-process interceptor that answers as an async call (`HookReviewer`), as one that answers by callback:
    /// the call starts on the asking thread and runs there until it first waits (the reviewer's hop to a thread of
    /// its own), instead of on a pool thread woken for it; its answer is carried on where the call returns.
    static func answerer(waitingFor review: @escaping HookReviewer) -> HookAnswerer {
        { request, answer in Task.immediate { answer(await review(request)) } }
    }

    private func resume(_ pending: Pending, with verdict: HookVerdict?) {
        pending.resume(verdict.map(Answer.verdict) ?? .invalid)
    }

    /// Runs the interceptor chain over a subject and returns the combined verdict.
    func review(_ subject: Subject) async -> Verdict {
        await withCheckedContinuation { continuation in review(subject) { continuation.resume(returning: $0) } }
    }

    /// Runs the interceptor chain over a subject and hands the combined verdict to `decided`, on the thread
    /// that delivered the last answer (or the timer's, at the deadline), with no task waiting in between: the
    /// message stage applies it from there (issue 30: one thread hand-off less per reviewed message).
    func review(_ subject: Subject, then decided: @escaping @Sendable (Verdict) -> Void) {
        askNext(0, Self.request(for: subject), body: nil, recipients: nil, then: decided)
    }

    /// Asks the chain's interceptor `index`, then the next with what the earlier ones changed.
    private func askNext(
        _ index: Int, _ original: HookRequest, body: String?, recipients: [String]?,
        then decided: @escaping @Sendable (Verdict) -> Void
    ) {
        guard index < configuration.interceptors.count else {
            return decided(body == nil && recipients == nil ? .allow : .modify(body: body, recipients: recipients))
        }
        let request = body.map { original.replacingContent(with: $0) } ?? original
        ask(configuration.interceptors[index].clientID, request) { verdict in
            switch verdict {
            case .allow:
                self.askNext(index + 1, original, body: body, recipients: recipients, then: decided)
            case .drop:
                decided(verdict)
            case .modify(let newBody, let newRecipients):
                self.askNext(
                    index + 1, original, body: newBody ?? body, recipients: newRecipients ?? recipients, then: decided)
            }
        }
    }

    private func ask(_ clientID: String, _ request: HookRequest, then asked: @escaping @Sendable (Verdict) -> Void) {
        metrics.interceptionRequests.increment()
        exchange(clientID, request, deadline: configuration.deadlineMillis) { answer in
            asked(self.verdict(for: answer, from: clientID, request))
        }
    }

    /// The verdict an interceptor's answer amounts to (the failure policy's when it gave none), counted.
    private func verdict(for answer: Answer, from clientID: String, _ request: HookRequest) -> Verdict {
        let verdict: Verdict
        switch answer {
        case .verdict(.declined): verdict = policyVerdict(.declined, clientID, request)
        case .verdict(let given): verdict = Verdict(given) ?? policyVerdict(.invalid, clientID, request)
        case .invalid: verdict = policyVerdict(.invalid, clientID, request)
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

    /// Sends an `offline` request to `clientID` and answers what came back (`missing` or `timedOut`: no answer
    /// within `deadlineMillis`, not connected). Not counted as an interception review; an `unhooked` answer is
    /// remembered (`offlineInterceptor`).
    func askOffline(_ clientID: String, _ request: HookRequest, deadlineMillis: Int) async -> Answer {
        let answer = await exchange(clientID, request, deadline: deadlineMillis)
        if case .verdict(.unhooked) = answer {
            state.withLock { $0.unhooked[clientID] = ContinuousClock.now + Self.unhookedFor }
        }
        return answer
    }

    /// One request to one interceptor (on this node or, in a cluster, another) and what came back. An
    /// `offline` request is not counted as a review.
    private func exchange(_ clientID: String, _ request: HookRequest, deadline: Int) async -> Answer {
        await withCheckedContinuation { continuation in
            exchange(clientID, request, deadline: deadline) { continuation.resume(returning: $0) }
        }
    }

    /// `exchange` handing the answer to `answered` on the thread that delivers it.
    private func exchange(
        _ clientID: String, _ request: HookRequest, deadline: Int, then answered: @escaping @Sendable (Answer) -> Void
    ) {
        let kind = request.kind
        let offline = kind == .offline
        let elsewhere = cluster.flatMap { $0.isInterceptorOnline(clientID) ? $0 : nil }
        let expires = NIODeadline.now() + .milliseconds(Int64(deadline))
        let registered = state.withLock { state -> (id: String, connection: Connection?, setTimer: Bool)? in
            if !offline { state.stats.requests += 1 }
            let connection = state.connections[clientID]
            guard connection != nil || elsewhere != nil else { return nil }
            state.nextID += 1
            let id = "h\(state.nextID)"
            state.pending[id] = Pending(
                resume: answered, connectionID: connection?.id ?? Self.remote, expires: expires, kind: kind)
            let setTimer = state.timerAt.map { expires < $0 } ?? true
            if setTimer { state.timerAt = expires }
            return (id, connection, setTimer)
        }
        guard let (id, connection, setTimer) = registered else {
            answered(.missing)
            return
        }
        if setTimer { expireRequests(at: expires) }
        if let connection {
            send(request, id: id, to: connection)
        } else if let elsewhere {
            let announcement = Announcement.review(interceptor: clientID, origin: elsewhere.id, request: request.command(id: id))
            // An `offline` request too large for a NOTIFY (hundreds of receivers): no answer can come, the
            // defaults go at once.
            guard !offline || announcement.payload() != nil else {
                state.withLock { $0.pending.removeValue(forKey: id) }?.resume(.missing)
                return
            }
            Task { await elsewhere.announce(announcement) }
        }
    }

    /// Sets the timer that decides the requests whose deadline has passed at `deadline`.
    private func expireRequests(at deadline: NIODeadline) {
        timers.scheduleTask(deadline: deadline) { [weak self] in self?.expireRequests() }
    }

    /// Decides the pending requests whose deadline has passed (`timedOut`), and sets the timer for the earliest
    /// one left. (Later requests have later deadlines, so under load the timer fires about once per deadline.)
    private func expireRequests() {
        let now = NIODeadline.now()
        let (expired, next) = state.withLock { state -> ([Pending], NIODeadline?) in
            if let set = state.timerAt, set <= now { state.timerAt = nil }
            let due = state.pending.filter { $0.value.expires <= now }
            for (id, pending) in due {
                state.pending[id] = nil
                if pending.kind != .offline { state.stats.timeouts += 1 }
            }
            guard let earliest = state.pending.values.lazy.map(\.expires).min(), state.timerAt.map({ earliest < $0 }) ?? true
            else { return (Array(due.values), nil) }
            state.timerAt = earliest
            return (Array(due.values), earliest)
        }
        if let next { expireRequests(at: next) }
        for pending in expired {
            if pending.kind != .offline { metrics.interceptionTimeouts.increment() }
            pending.resume(.timedOut)
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
    private func policyVerdict(_ cause: PolicyCause, _ clientID: String, _ request: HookRequest) -> Verdict {
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
                "kind": "\(request.kind.rawValue)", "cid": "\(request.cid)", "from": "\(request.from)",
                "policy_decisions_total": "\(total)",
            ])
        switch configuration.failurePolicy {
        case .failOpen: return .allow
        case .failClosed:
            return .drop(IMError(.messageRejectedByApp, "no verdict from the interceptor (fail-closed policy)"), silent: false)
        }
    }

    private static func request(for subject: Subject) -> HookRequest {
        switch subject {
        case .message(let message):
            .message(
                cid: message.cid, from: message.from, content: content(message.data, binary: message.binary), priority: message.priority,
                mentionPids: message.mentionPids)
        case .edit(let edit):
            .edit(
                cid: edit.cid, messageID: edit.messageID, from: edit.editor, content: content(edit.data, binary: edit.binary),
                mentionPids: edit.mentionPids)
        case .membership(let cid, let actor, let members, let action):
            .membership(cid: cid, actor: actor, members: members, action: action)
        }
    }

    /// Stored content as a request carries it (binary content is stored as base64).
    static func content(_ data: String, binary: Bool) -> HookRequest.Content {
        binary ? .binary(base64: data) : .text(data)
    }
}
