import Foundation
import IMCore

/// Settings of an `IMClient`.
public struct IMClientOptions: Sendable {
    /// The server's WebSocket endpoint: `ws://HOST:PORT/ws`, or `wss://HOST:PORT/ws` for a server (or a
    /// proxy) that speaks TLS.
    public var url: String
    /// For `wss://` URLs: the certificate authorities the server's certificate must chain to. The server's
    /// name (the URL's host) must be in its certificate, and TLS 1.2 is the oldest version accepted.
    public var trustRoots: IMTrustRoots = .system
    /// A server in the same process to attach to instead of `url` (no socket, no encoding); see
    /// `LocalEndpoint`. Everything else (login, reconnect, requests, events) works as over a WebSocket.
    public var localEndpoint: (any LocalEndpoint)?
    /// With `localEndpoint`, when this client is one of the server's interceptors: answers the server's
    /// hook requests with a direct call (`HookRequest` in, `HookVerdict` out) instead of receiving them as
    /// events.
    public var interceptionReviewer: HookReviewer?
    /// Like `interceptionReviewer`, with the request and the answer as `hook request` and `hook verdict`
    /// commands; used when `interceptionReviewer` is nil.
    public var interceptionHandler: (@Sendable (Command) async -> Command)?
    /// The serial executor the client's actor runs on; nil: as any actor's, Swift's shared pool. A host that
    /// calls the client from an executor of its own passes it, so that its calls and the client's handling of
    /// what arrives (deliveries of an in-process link included) run there with no hop: the bot host gives its
    /// client the Lua thread. The client then shares that executor: a long job there delays it. Code on other
    /// executors hops onto it for each call and leaves it when the call returns.
    public var executor: (any SerialExecutor)?
    /// Delay before the first reconnect attempt; each further attempt doubles it, up to `reconnectMaxDelay`.
    /// Every delay is randomised between half and all of its value (jitter).
    public var reconnectBaseDelay: Duration = .milliseconds(500)
    public var reconnectMaxDelay: Duration = .seconds(30)
    /// How long a request (a message included) may wait for the connection to come back while the client
    /// is paused; after that it fails with `SEND_TIMEOUT` (9002) and is never sent.
    public var sendTimeout: Duration = .seconds(30)
    /// How long a sent request waits for its reply before failing with `REQUEST_TIMEOUT` (9003).
    public var requestTimeout: Duration = .seconds(15)
    /// How long establishing a WebSocket and logging in may take.
    public var connectTimeout: Duration = .seconds(10)
    /// WebSocket ping interval that detects dead connections; nil disables pings.
    public var pingInterval: Duration? = .seconds(30)
    /// Largest WebSocket frame accepted from the server.
    public var maxFrameSize: Int = 1 << 20
    /// Signs logins and conversation actions when the server requires signatures.
    public var signatureProvider: (any IMSignatureProvider)?
    /// How many received message ids are remembered at least to drop redeliveries (up to twice as many are).
    public var deduplicationWindow: Int = 10_000
    /// The server's HTTP address for media uploads and downloads (`http(s)://host:port`, a proxy's path
    /// prefix allowed); nil: from `url`, `ws` becoming `http` and `wss` `https`, same host and port.
    public var mediaBaseURL: String?
    /// The device's push token (an APNs device token, an FCM registration token), sent in `session open` as
    /// LeanCloud's SDKs send it: the server registers it for this client (`apns` for 64 hex digits, else `fcm`)
    /// with the client's `deviceId`, and `close()` removes it. Other providers: `IMClient.registerDevice`.
    public var deviceToken: String?

    /// Options for a server at `url` (for example `ws://127.0.0.1:8080/ws`).
    public init(url: String) {
        self.url = url
    }

    /// Options for attaching to a server in the same process (`IMServer` is a `LocalEndpoint`).
    public init(local endpoint: any LocalEndpoint) {
        self.init(url: "local:")
        localEndpoint = endpoint
    }

    /// Options for a server on `host:port`, path `/ws`.
    public init(host: String = "127.0.0.1", port: Int) {
        self.init(url: "ws://\(host):\(port)/ws")
    }

    /// The delay before reconnect attempt number `attempt` (0-based), with jitter drawn from `unit` in 0...1.
    func reconnectDelay(attempt: Int, unit: Double) -> Duration {
        let factor = pow(2.0, Double(min(attempt, 30)))
        let capped = min(reconnectBaseDelay * factor, reconnectMaxDelay)
        return capped * (0.5 + 0.5 * unit)
    }
}

/// The certificate authorities a `wss://` connection trusts.
public enum IMTrustRoots: Sendable, Equatable {
    /// The system's (Debian: /etc/ssl/certs), or the PEM bundle the environment variable `SSL_CERT_FILE`
    /// names, as with OpenSSL and curl (so `hookbot run --server wss://…` and `hookbot chat` can trust a
    /// CA of one's own).
    case system
    /// The CA certificates in this PEM file, instead of the system's: a self-hosted server's own CA.
    case pemFile(String)
    /// The CA certificates in this PEM text, instead of the system's.
    case pem(String)
}

extension IMClientOptions {
    /// What answers the server's hook requests for a client attached in process, if anything does.
    var localReviewer: HookReviewer? {
        if let interceptionReviewer { return interceptionReviewer }
        guard let handler = interceptionHandler else { return nil }
        return { request in HookVerdict(command: await handler(request.command(id: nil)), answering: request.kind) }
    }
}
