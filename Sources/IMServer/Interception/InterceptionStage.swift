import IMCore

/// Puts messages through the interceptors before they reach the message pipeline.
///
/// Reviews run concurrently (so one slow verdict does not serialise the interceptor's work), and their
/// outcomes are applied in submission order per conversation: messages of a conversation are stored and
/// delivered in the order they were sent, while a slow review in one conversation holds up no other.
/// A conversation's entry lives only while it has reviews in flight.
actor InterceptionStage {
    private struct Tail {
        var token: UInt64
        var task: Task<Void, Never>
    }

    private let hub: InterceptorHub
    private let pipeline: MessagePipeline
    private let metrics: ServerMetrics
    /// Bounds the reviews in flight; `IMService` enters before `submit`, the stage leaves once decided.
    nonisolated let admission: ReviewAdmission
    private var tails: [String: Tail] = [:]
    private var nextToken: UInt64 = 0

    init(hub: InterceptorHub, pipeline: MessagePipeline, metrics: ServerMetrics, admission: ReviewAdmission) {
        self.hub = hub
        self.metrics = metrics
        self.pipeline = pipeline
        self.admission = admission
    }

    /// Conversations with reviews in flight (for tests).
    var conversationsInFlight: Int { tails.count }

    func submit(_ message: OutgoingMessage) {
        let hub = hub
        let review = Task { await hub.review(.message(message)) }
        let previous = tails[message.cid]?.task
        nextToken &+= 1
        let token = nextToken
        let task = Task {
            await previous?.value
            await self.apply(await review.value, to: message, token: token)
        }
        tails[message.cid] = Tail(token: token, task: task)
    }

    private func apply(_ verdict: Verdict, to message: OutgoingMessage, token: UInt64) async {
        defer {
            if tails[message.cid]?.token == token { tails[message.cid] = nil }
            admission.leave(message.sender.id)
        }
        switch verdict {
        case .allow:
            pipeline.enqueue(message)
        case .modify(let body, let recipients):
            var modified = message
            if let body {
                modified.data = body
                modified.binary = false
            }
            if let recipients { modified.recipients = recipients }
            pipeline.enqueue(modified)
        case .drop(let error, silent: false):
            metrics.command(.direct, nil, code: error.code)
            message.sender.send(IMService.errorReply(error, to: Command(cmd: .direct, i: message.serial)))
        case .drop(_, silent: true):
            var ack = Command(cmd: .ack, i: message.serial)
            ack.uid = Identifiers.messageID()
            ack.t = Identifiers.nowMillis()
            message.sender.send(ack)
        }
    }
}
