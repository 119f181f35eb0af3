import Foundation

/// Settings of an IM server.
public struct ServerConfiguration: Sendable {
    /// Address to bind; loopback by default.
    public var host: String = "127.0.0.1"
    /// Port to bind; 0 picks a free port (see `IMServer.start()`).
    public var port: Int = 8080
    /// Path of the SQLite file (the embedded store), used when `databaseURL` is nil.
    public var databasePath: String = "hookbot.sqlite"
    /// A PostgreSQL URL (`postgres://user:password@host:port/database`, optionally `?schema=NAME`): the
    /// server keeps its state there instead of in SQLite, and several servers on one database serve clients
    /// together (see docs/DEPLOY.md).
    public var databaseURL: String?
    /// Largest message body (`msg`) accepted, in bytes; larger ones are refused with 4109.
    public var maxMessageBytes: Int = 64 * 1024
    /// Largest WebSocket frame; a larger frame closes the connection (WebSocket code 1009).
    public var maxFrameBytes: Int = 1024 * 1024
    /// Bytes queued for one WebSocket and not yet written beyond which the server stops reading that
    /// client's frames (until the queue drains)...
    public var pauseReadingAboveQueuedBytes: Int = 2 << 20
    /// ...and beyond which it closes the connection (a client that does not read what it is sent).
    public var closeAboveQueuedBytes: Int = 16 << 20
    /// After this many sessions opened or closed, the server gives the allocator's free memory back to the system once
    /// the churn has calmed (`MemoryTrim`): what a reconnection storm's logins left behind. 0 never does.
    public var memoryTrimAfterSessions: Int = 1000
    /// Default and largest page size of `logs`.
    public var historyDefaultLimit: Int = 20
    public var historyMaxLimit: Int = 1000
    /// Most backlog messages sent per conversation on login; the rest are flagged `hasMore`.
    public var backlogLimitPerConversation: Int = 1000
    /// `PRAGMA synchronous = FULL` (fsync on every commit) when true, `NORMAL` otherwise.
    public var synchronousFull: Bool = true
    /// With SQLite, the most messages a batch may hold to be committed on the event loop that enqueued its first
    /// message (the WebSocket's, or the in-process bot's thread) when the writer thread is idle, saving two thread
    /// wake-ups per message; larger batches, and everything while the writer is busy, commit on the writer thread with
    /// group commit. 0 commits everything on the writer thread. `HOOKBOT_INLINE_COMMIT` in the environment overrides it.
    public var inlineCommitLimit: Int = 1
    /// Commits are made inline only while recent one-message commits took this long or less on average (an `fsync` of
    /// milliseconds, a slow disk at `synchronous = FULL`, is waited for better by the writer thread than by an event loop
    /// serving other connections).
    public var inlineCommitBudget: Duration = .microseconds(500)
    /// How long the start-up integrity check of the SQLite file (`PRAGMA quick_check`) may run, in seconds;
    /// a damaged file is refused, a check that runs out of time is logged and the server starts. 0 skips it.
    public var integrityCheckSeconds: Int = 30
    /// Lifetime of session tokens (`st`), in seconds.
    public var sessionTokenTTL: Int = 24 * 3600

    /// Most conversations a query without an indexed condition (objectId, m, lm) may scan; beyond it the
    /// query fails with 4310.
    public var queryScanLimit: Int = 10_000
    /// How long after sending a sender may recall a message, in seconds.
    public var recallWindow: Int = 120

    /// With both set, logins and conversation actions (start, join, invite, kick) need signatures.
    public var appID: String?
    public var masterKey: String?
    /// LeanCloud's app key (the client-side key): the storage API (`/1.1/files…`) accepts `X-LC-Sign` /
    /// `X-LC-Key` made with it; alone it lets a caller upload only while signatures are off.
    public var appKey: String?
    /// How far a signature's timestamp may be from the server's clock, in seconds; nonces are remembered
    /// this long.
    public var signatureWindow: Int = 300

    /// When the server stops, how long connections told `goaway` may take to close before they are closed
    /// (a client that never answers the close handshake would otherwise hold the shutdown forever).
    public var shutdownGrace: Duration = .seconds(5)

    /// Most connections open at once from one IP address; more are closed at once (see `ConnectionGuard`).
    public var maxConnectionsPerAddress: Int = 256
    /// How long a new TCP connection may take to send its first complete HTTP request (the WebSocket
    /// upgrade); a connection that stays silent longer is closed.
    public var handshakeTimeout: Duration = .seconds(10)
    /// How long a WebSocket may stay open without a logged-in session (`session open`).
    public var loginTimeout: Duration = .seconds(30)
    /// The server pings every WebSocket this often; one that has not answered the previous ping by then
    /// is closed, so a dead or unresponsive peer holds its connection at most two intervals.
    public var pingInterval: Duration = .seconds(30)
    /// How long an HTTP connection (probes, metrics, console) may stay idle between requests.
    public var httpIdleTimeout: Duration = .seconds(60)

    /// Pre-delivery interception by bot hosts.
    public var interception = InterceptionConfiguration()

    /// With a value, the port speaks TLS only (`wss://…/ws`, `https://…/metrics`): see `TLSSettings`.
    public var tls: TLSSettings?

    /// Uploaded files (`POST /media`): where, how large, how much per client. See `MediaConfiguration`.
    public var media = MediaConfiguration()

    /// Offline push: providers, templates, the queue. See `PushConfiguration` and docs/PUSH.md.
    public var push = PushConfiguration()

    public init() {}

    /// Checks settings the server cannot start with; the error names the setting.
    public func validate() throws {
        var seen = Set<String>()
        for interceptor in interception.interceptors where !seen.insert(interceptor.clientID).inserted {
            throw ServerConfigurationError(
                "interceptor \(interceptor.clientID) is listed more than once; give each interceptor client id once")
        }
    }
}

/// A setting the server cannot start with (a repeated interceptor, a TLS certificate or key that cannot be
/// used: the server does not start, or, on a certificate reload, keeps the previous pair). The message
/// names the setting or file and what is wrong with it.
public struct ServerConfigurationError: Error, CustomStringConvertible, LocalizedError {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
    public var errorDescription: String? { message }
}
