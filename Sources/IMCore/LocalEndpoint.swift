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
