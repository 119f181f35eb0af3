/// A reference that does not keep its object alive: for callbacks, timers and routes that may outlive what they
/// call (each of the server's sessions, the bot host, its client), where a strong reference would make a cycle that
/// keeps a stopped server and its threads and files alive.
public struct Weak<Object: AnyObject> {
    public weak var value: Object?

    public init(_ value: Object?) { self.value = value }
}

extension Weak: Sendable where Object: Sendable {}
