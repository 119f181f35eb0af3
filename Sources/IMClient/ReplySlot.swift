import IMCore
import Synchronization

/// Where the reply to one request arrives; it can be awaited once the request has been written.
final class ReplySlot: Sendable {
    private struct State {
        var result: Result<Command, IMError>?
        var waiter: CheckedContinuation<Result<Command, IMError>, Never>?
        var observer: (@Sendable (Result<Command, IMError>) -> Void)?
    }

    private let state = Mutex(State())

    func fulfill(_ result: Result<Command, IMError>) {
        typealias Waiter = CheckedContinuation<Result<Command, IMError>, Never>
        typealias Observer = @Sendable (Result<Command, IMError>) -> Void
        let (waiter, observer) = state.withLock { state -> (Waiter?, Observer?) in
            guard state.result == nil else { return (nil, nil) }
            state.result = result
            defer {
                state.waiter = nil
                state.observer = nil
            }
            return (state.waiter, state.observer)
        }
        waiter?.resume(returning: result)
        observer?(result)
    }

    /// Calls `observer` with the result once it is there (at once if it already is), without a task.
    func observe(_ observer: @escaping @Sendable (Result<Command, IMError>) -> Void) {
        let ready = state.withLock { state -> Result<Command, IMError>? in
            if let result = state.result { return result }
            state.observer = observer
            return nil
        }
        if let ready { observer(ready) }
    }

    nonisolated(nonsending) func value() async -> Result<Command, IMError> {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Result<Command, IMError>? in
                if let result = state.result { return result }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

/// A message that has been written to the server and whose ack may still be on its way. Messages
/// submitted one after another leave in that order, so a sender can keep many in flight.
public struct IMPendingMessage: Sendable {
    let client: IMClient
    let slot: ReplySlot
    let conversationId: String
    let content: IMMessageContent
    let body: String
    let options: IMSendOptions

    /// Waits for the server's ack and returns the stored (or transient) message.
    nonisolated(nonsending) public func message() async throws(IMError) -> IMMessage {
        let ack = try await slot.value().get()
        if let error = IMError(reply: ack) { throw error }
        guard let id = ack.uid, let timestamp = ack.t else { throw IMError(.unexpectedReply, "ack without uid or t") }
        var message = IMMessage(
            id: id, conversationId: conversationId, from: client.clientId, timestamp: timestamp,
            content: content, body: body, status: .sent)
        message.isTransient = options.transient
        message.receiptRequested = options.receipt
        message.priority = options.priority
        message.mentionPids = options.mentionPids
        message.mentionAll = options.mentionAll ? true : nil
        return message
    }

    /// Calls `handler` if the message fails (error ack, timeout, disconnect), without waiting for it:
    /// for senders that keep many messages in flight and only need to hear about failures.
    public func onFailure(_ handler: @escaping @Sendable (IMError) -> Void) {
        slot.observe { result in
            switch result {
            case .failure(let error): handler(error)
            case .success(let ack): if let error = IMError(reply: ack) { handler(error) }
            }
        }
    }
}
