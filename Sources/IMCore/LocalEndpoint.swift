/// A server in the same process that clients can attach to without a socket: commands cross as values,
/// with no encoding, no frames and no system calls. The server treats such a connection like any other
/// (same login, authorization, ordering and storage); only the transport differs.
public protocol LocalEndpoint: Sendable {
    /// Opens a connection. The server calls `receive` with every command it sends on the connection, in
    /// order, and `closed` once when the connection has ended (after its last `receive`).
    /// When the connection logs in as an interceptor, the server asks `review` for each verdict (a
    /// `HookRequest` in, a `HookVerdict` out, as values) instead of sending `hook request` commands through
    /// `receive`; deadline, failure policy and ordering are the same as for a WebSocket interceptor.
    /// Returns nil when the server is not running.
    func connectLocally(
        receive: @escaping @Sendable (Command) -> Void, closed: @escaping @Sendable () -> Void,
        review: HookReviewer?
    ) -> LocalConnection?

    /// `connectLocally(receive:closed:review:)` with an interceptor that answers through a callback
    /// (`HookAnswerer`): the server applies each verdict on the thread that gives it, with no task waiting for
    /// it. An endpoint that does not implement it gets the default, which waits for the answer as `review` does.
    func connectLocally(
        receive: @escaping @Sendable (Command) -> Void, closed: @escaping @Sendable () -> Void,
        answering: HookAnswerer?
    ) -> LocalConnection?

    /// `connectLocally(receive:closed:answering:)` with a heads-up (`ReviewHeadsUp`): the server calls `headsUp` when
    /// a message it will probably ask this interceptor to review has started to arrive, before it has decoded it,
    /// so that the interceptor can get ready (the bot host wakes its Lua thread). An endpoint that does not
    /// implement it gets the default, which gives no heads-up.
    func connectLocally(
        receive: @escaping @Sendable (Command) -> Void, closed: @escaping @Sendable () -> Void,
        answering: HookAnswerer?, headsUp: ReviewHeadsUp?
    ) -> LocalConnection?
}

extension LocalEndpoint {
    public func connectLocally(
        receive: @escaping @Sendable (Command) -> Void, closed: @escaping @Sendable () -> Void,
        answering: HookAnswerer?, headsUp: ReviewHeadsUp?
    ) -> LocalConnection? {
        connectLocally(receive: receive, closed: closed, answering: answering)
    }

    public func connectLocally(
        receive: @escaping @Sendable (Command) -> Void, closed: @escaping @Sendable () -> Void,
        answering: HookAnswerer?
    ) -> LocalConnection? {
        let review = answering.map { answerer -> HookReviewer in
            { request in await withCheckedContinuation { answered in answerer(request) { answered.resume(returning: $0) } } }
        }
        return connectLocally(receive: receive, closed: closed, review: review)
    }
}

/// The client's side of a connection made with `LocalEndpoint.connectLocally`.
public struct LocalConnection: Sendable {
    /// Hands a command to the server; commands are handled in the order they are sent.
    public let send: @Sendable (Command) -> Void
    /// Ends the connection after the commands already sent; `closed` follows.
    public let close: @Sendable () -> Void

    public init(send: @escaping @Sendable (Command) -> Void, close: @escaping @Sendable () -> Void) {
        self.send = send
        self.close = close
    }
}

/// An interceptor attached in process: answers a hook request with a direct call. nil is not a verdict
/// (the server's failure policy decides, as for an invalid answer over a WebSocket).
public typealias HookReviewer = @Sendable (HookRequest) async -> HookVerdict?

/// An interceptor attached in process that answers a hook request by calling `answer` once with its verdict (nil
/// is not a verdict, as for `HookReviewer`), from whichever thread has it: the server carries the verdict on
/// from there (an in-process bot answers from its Lua thread, so its verdict reaches the message pipeline with
/// no hop through Swift's pool). It must not block; an answer never given is decided by the failure policy at
/// the deadline, and a second one is ignored.
public typealias HookAnswerer = @Sendable (HookRequest, _ answer: @escaping @Sendable (HookVerdict?) -> Void) -> Void

/// A heads-up to an interceptor attached in process that a message for review is probably on its way: called on a
/// server thread as a frame that looks like a message arrives, about 20–30 µs before the review's request on an
/// idle machine (issue 30, round 9). It must return at once. No review need follow (the frame may be something
/// the server does not review, or be refused first), and several may come before one review.
public typealias ReviewHeadsUp = @Sendable () -> Void
