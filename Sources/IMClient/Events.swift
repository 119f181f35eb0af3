import Foundation
import IMCore
import Synchronization

/// The connection state of an `IMClient`.
public enum IMClientState: Sendable, Equatable {
    /// Not logged in: never opened, or closed by `close()`.
    case closed
    /// `open()` is in progress.
    case opening
    /// Logged in and connected.
    case opened
    /// The connection was lost; a reconnect is scheduled. Requests wait (see `IMClientOptions.sendTimeout`).
    case paused
    /// A reconnect attempt is in progress.
    case resuming
    /// Logged out by the server, for example because another device logged in with the same tag (4111).
    /// The client does not reconnect; `open()` logs in again.
    case kicked(IMError)
}

/// Something that happened to an `IMClient`: a connection change or a server event.
public enum IMEvent: Sendable {
    // MARK: Connection
    /// `open()` succeeded.
    case opened
    /// The connection was lost (the client reconnects by itself).
    case paused(IMError?)
    /// A reconnect attempt started (1 for the first attempt after a loss).
    case resuming(attempt: Int)
    /// A reconnect succeeded; waiting requests are being sent.
    case resumed
    /// `close()` finished, or the client gave up after a fatal login error (carried here).
    case closed(IMError?)
    /// The server logged this client out (4111: another device logged in with the same tag).
    case kickedOffline(IMError)

    // MARK: Messages
    /// A message arrived: typed (`content` is `.typed` or `.custom`), common (`.common`), transient
    /// (`isTransient`) or from the backlog (`isOffline`). Each message id is reported once.
    case message(IMMessage)
    /// A cmd message arrived.
    case cmd(IMCmdMessage)
    /// A recipient acknowledged a message sent with a receipt request.
    case delivered(IMReceipt)
    /// A recipient read a conversation up to `timestamp` (for messages sent with a receipt request).
    case read(IMReceipt)
    /// A message was recalled; the message carries its id, the recalled placeholder and `status == .recalled`.
    case recalled(IMMessage)
    /// A message was edited by its sender; the message carries its new content and `editedAt`.
    case edited(IMMessage)
    /// Unread counts of conversations, sent at login.
    case unread([IMUnreadCount])

    // MARK: Conversations
    /// Members joined a conversation this client is in (`by` added them, or they joined themselves);
    /// `founding` when they were added as the conversation was created (Hookbot: the event carries `cdate`).
    case membersJoined(conversationId: String, members: [String], by: String?, founding: Bool = false)
    /// Members left or were removed from a conversation this client is in.
    case membersLeft(conversationId: String, members: [String], by: String?)
    /// This client joined a conversation by itself (possibly from another device).
    case joined(conversationId: String, by: String?)
    /// This client was added to a conversation by `by`.
    case invited(conversationId: String, by: String?)
    /// This client was removed from a conversation by `by`.
    case kicked(conversationId: String, by: String?)
    /// This client quit a conversation (possibly from another device).
    case left(conversationId: String, by: String?)
    /// A conversation's name or attributes changed; `patch` has the changed keys (`name`, `attr.<path>`;
    /// a deleted key has the value `{"__op": "Delete"}`).
    case conversationUpdated(conversationId: String, patch: [String: JSONValue], by: String?, updatedAt: Int64?)

    // MARK: Mutes, block lists, roles
    /// This client was muted in a conversation (for `seconds`, nil: until unmuted; `all`: the whole conversation).
    case muted(conversationId: String, by: String?, seconds: Int?, all: Bool)
    /// This client may speak again.
    case unmuted(conversationId: String, by: String?, all: Bool)
    /// Members of a conversation this client is in were muted (`all`: the whole conversation, `members` empty).
    case membersMuted(conversationId: String, members: [String], by: String?, seconds: Int?, all: Bool)
    case membersUnmuted(conversationId: String, members: [String], by: String?, all: Bool)
    /// This client was blocked in a conversation (and removed from it if it was a member).
    case blocked(conversationId: String, by: String?)
    case unblocked(conversationId: String, by: String?)
    /// Clients were blocked in a conversation this client is in.
    case membersBlocked(conversationId: String, members: [String], by: String?)
    case membersUnblocked(conversationId: String, members: [String], by: String?)
    /// A member's role changed.
    case memberRoleChanged(conversationId: String, member: String, role: IMMemberRole, by: String?)

    // MARK: Everything else
    /// A command from the server the SDK does not interpret (for example commands of later protocol versions).
    case unhandled(Command)
    /// A frame from the server that is not a known command (an unknown `cmd` or `op`), as received.
    case undecodable(String)
}

/// A queue of an `IMClient`'s events (`IMClient.eventQueue()`), read in batches: every event emitted after it
/// was made, in order, as `events()` gives them. A reader that waits in `next()` is resumed through Swift's
/// pool (as an `AsyncStream`'s reader is), then goes on in its own isolation; a reader on the client's
/// executor (the bot host, on its thread) can instead start its handling there from `onArrival` and read with
/// `take()`, without that hop. Buffers without limit, as `events()` does.
public final class IMEventQueue: Sendable {
    let inbox: LocalInbox<IMEvent>

    init(onFinish: @escaping @Sendable () -> Void) { inbox = LocalInbox(onFinish: onFinish) }

    /// The events emitted since the last call, in order, waiting for the next when there is none; nil once
    /// the queue has ended (`finish()`, the client went away, or the reading task was cancelled). Resumes
    /// on the caller's executor (`isolation`). One reader at a time.
    public func next(isolation: isolated (any Actor)? = #isolation) async -> [IMEvent]? {
        await inbox.next(isolation: isolation)
    }

    /// Ends the queue: the reader gets what is left, then nil.
    public func finish() { inbox.finish() }

    /// Calls `handler` on the emitting thread (inside the client's executor), right after events were queued while
    /// no reader waits in `next()`: for a reader on the client's executor that starts its own handling there
    /// (an isolated task is enqueued on the executor directly, where a waiting `next()` is resumed through
    /// Swift's global executor first), reading with `take()`.
    public func onArrival(_ handler: @escaping @Sendable () -> Void) { inbox.onArrival(handler) }

    /// The events queued now, without waiting: empty when there are none; nil once the queue has ended and
    /// everything was taken.
    public func take() -> [IMEvent]? { inbox.take() }
}

/// Fans events out to every subscriber. Each subscriber buffers without limit.
final class EventHub: Sendable {
    private enum Subscriber {
        case stream(AsyncStream<IMEvent>.Continuation)
        case queue(IMEventQueue)
    }

    private struct State {
        var subscribers: [Int: Subscriber] = [:]
        var next = 0
        var finished = false
    }

    private let state = Mutex(State())

    func subscribe() -> AsyncStream<IMEvent> {
        let (stream, continuation) = AsyncStream<IMEvent>.makeStream()
        guard let id = add(.stream(continuation)) else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in self?.remove(id) }
        return stream
    }

    func queue() -> IMEventQueue {
        let id = Mutex<Int?>(nil)
        let queue = IMEventQueue { [weak self] in
            if let id = id.withLock({ $0 }) { self?.remove(id) }
        }
        guard let added = add(.queue(queue)) else {
            queue.finish()
            return queue
        }
        id.withLock { $0 = added }
        // Finished (its reader cancelled) before it had an id to remove.
        if queue.inbox.isFinished { remove(added) }
        return queue
    }

    private func add(_ subscriber: Subscriber) -> Int? {
        state.withLock { state -> Int? in
            if state.finished { return nil }
            state.next += 1
            state.subscribers[state.next] = subscriber
            return state.next
        }
    }

    private func remove(_ id: Int) {
        _ = state.withLock { $0.subscribers.removeValue(forKey: id) }
    }

    func emit(_ event: IMEvent) {
        let subscribers = state.withLock { Array($0.subscribers.values) }
        for subscriber in subscribers {
            switch subscriber {
            case .stream(let continuation): continuation.yield(event)
            case .queue(let queue): queue.inbox.append(event)
            }
        }
    }

    /// Ends every subscription.
    func finish() {
        let subscribers = state.withLock { state in
            state.finished = true
            defer { state.subscribers.removeAll() }
            return Array(state.subscribers.values)
        }
        for subscriber in subscribers {
            switch subscriber {
            case .stream(let continuation): continuation.finish()
            case .queue(let queue): queue.finish()
            }
        }
    }
}
