import IMCore

/// Puts messages through the interceptors before they reach the message pipeline.
///
/// Reviews of successive messages run concurrently (so one slow verdict does not serialise the
/// interceptor's work), but their outcomes are applied strictly in submission order, so messages of a
/// conversation are stored and delivered in the order they were sent.
actor InterceptionStage {
    private let hub: InterceptorHub
    private let pipeline: MessagePipeline
    private var tail: Task<Void, Never>?

    init(hub: InterceptorHub, pipeline: MessagePipeline) {
        self.hub = hub
        self.pipeline = pipeline
    }

    func submit(_ message: OutgoingMessage) {
        let hub = hub
        let review = Task { await hub.review(.message(message)) }
        let previous = tail
        tail = Task {
            await previous?.value
            await self.apply(await review.value, to: message)
        }
    }

    private func apply(_ verdict: Verdict, to message: OutgoingMessage) async {
        switch verdict {
        case .allow:
            await pipeline.enqueue(message)
        case .modify(let body, let recipients):
            var modified = message
            if let body { modified.data = body }
            if let recipients { modified.recipients = recipients }
            await pipeline.enqueue(modified)
        case .drop(let error, silent: false):
            message.sender.send(IMService.errorReply(error, to: Command(cmd: .direct, i: message.serial)))
        case .drop(_, silent: true):
            var ack = Command(cmd: .ack, i: message.serial)
            ack.uid = Identifiers.messageID()
            ack.t = Identifiers.nowMillis()
            message.sender.send(ack)
        }
    }
}
