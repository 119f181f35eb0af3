/// What the server does when an interceptor does not answer in time, is disconnected, or answers nonsense.
public enum InterceptionFailurePolicy: String, Sendable {
    /// Deliver the message (or allow the membership change) as if the interceptor had allowed it.
    case failOpen = "open"
    /// Refuse it with 4402 (messages) or 4305 (membership changes).
    case failClosed = "closed"
}

/// Settings of the interception role (pre-delivery hooks answered by a bot host).
public struct InterceptionConfiguration: Sendable {
    /// One interceptor: the client id it logs in as, and the secret its login signature is made with.
    public struct Interceptor: Sendable {
        public var clientID: String
        public var secret: String

        public init(clientID: String, secret: String) {
            self.clientID = clientID
            self.secret = secret
        }
    }

    /// Interceptors, consulted in this order; each sees the message as the previous one left it.
    public var interceptors: [Interceptor] = []
    /// How long one interceptor may take to answer, in milliseconds.
    public var deadlineMillis: Int = 200
    public var failurePolicy: InterceptionFailurePolicy = .failOpen
    /// Conversations whose messages are intercepted; nil means all.
    public var conversations: Set<String>?
    /// Whether membership changes (join, invite, kick, quit) are also sent for review.
    public var reviewMembership: Bool = true
    /// Most messages of one connection under review at once; its next message waits (is not even read)
    /// until one is decided. Keeps a burst from outrunning a healthy interceptor.
    public var reviewsPerSender: Int = 16
    /// Most messages under review at once, all senders together.
    public var reviewsInFlight: Int = 128

    public init() {}
}
