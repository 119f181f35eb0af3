import Foundation
import IMCore
import Logging
import Synchronization

/// A client id logged in to a Hookbot server: LeanCloud's `AVIMClient` in async Swift.
///
/// Subscribe to `events()` before calling `open()` (offline messages arrive right after login). The client
/// keeps one WebSocket; when it drops, the client pauses, reconnects with exponential backoff and jitter,
/// and resumes — requests made meanwhile wait and go out in order. It never reconnects after `close()`
/// or after the server logged it out (`IMEvent.kickedOffline`).
public actor IMClient {
    /// The client id this client logs in as.
    public nonisolated let clientId: String
    /// The single-device tag (for example `Mobile`): logging in elsewhere with the same tag logs this one out.
    public nonisolated let tag: String?
    /// A stable id of this client instance, sent at login so reconnects keep the tag.
    public nonisolated let deviceId: String
    public nonisolated let options: IMClientOptions
    /// The error of a request that got no reply within `options.requestTimeout`, made once: its text formats the
    /// duration, which every request written did before (a measured share of the bot's sends, issue 30).
    nonisolated let noReply: IMError
    /// Custom message types received messages are decoded to.
    public nonisolated let registry: IMMessageRegistry

    /// The connection state. Read without entering the client's executor: a client on a busy executor (the bot's,
    /// on the Lua thread) answers at once.
    public nonisolated var state: IMClientState {
        get async { publishedState.withLock { $0 } }
    }
    /// The connection state as the client changes it; `state` reads a copy.
    var connectionState: IMClientState = .closed {
        didSet { publishedState.withLock { $0 = connectionState } }
    }
    private nonisolated let publishedState = Mutex<IMClientState>(.closed)

    let hub = EventHub()
    /// The actor whose executor this client runs on (`unownedExecutor`), and where the in-process link's
    /// reading task waits without keeping the client alive.
    nonisolated let queue: any Actor
    private nonisolated let executor: UnownedSerialExecutor

    /// `options.executor`, or, without one, the executor of a default actor of the client's own, so that the
    /// client behaves as a default actor (Swift's pool; a caller's task may carry on where the actor ran).
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor }
    let logger: Logger
    var link: Link?
    var login: Login?
    var nextLinkID = 0
    /// Bumped by `open()`, `close()` and a kick: reconnect loops and logins of an older epoch stop.
    var epoch = 0
    var nextSerial = 1
    /// De-duplication tokens: a random prefix per client instance and a counter (unique across restarts
    /// without a UUID per message).
    let dedupePrefix = UUID().uuidString
    var dedupeCounter = 0
    var pending: [Int: PendingRequest] = [:]
    var reconnectTask: Task<Void, Never>?
    /// The session token of the last login, presented on reconnects instead of a new login signature.
    /// (Read by media uploads, which present it as `X-LC-IM-Session-Token`.)
    var sessionToken: String?
    /// The newest recall or edit seen (or the last login's server time): a reconnect asks for the ones after
    /// it, which the server pushes as `patch modify` (`.recalled` / `.edited` events missed while paused).
    var lastPatchTime: Int64?
    /// The request serial of the chat room rejoin a reconnect waits for before it counts as resumed.
    var rejoinSerial: Int?
    /// The message ids received lately (at least the last `deduplicationWindow`): a redelivery is not emitted twice.
    var seen: GenerationalMap<String, Void>
    /// The last message seen per conversation (what `markRead()` marks read up to).
    var lastMessages: [String: (id: String, timestamp: Int64)] = [:]
    /// Whether conversations are chat rooms, learnt from creation and queries. The chat room joined last
    /// is rejoined after a reconnect.
    var chatRoomFlags: [String: Bool] = [:]
    var currentChatRoom: String?
    /// Received stored messages not acknowledged yet, per conversation, and whether a flush is queued.
    var unacknowledged: [String: [String]] = [:]
    var ackFlushScheduled = false
    /// While the commands of one read are handled: their acks leave together after the last one.
    var receivingBatch = false

    /// A login in progress on a freshly connected link.
    struct Login {
        var link: Link
        var serial: Int
        var resuming: Bool
        /// The chat room join to send right after a reconnect, before waiting requests.
        var rejoin: Command?
        var continuation: CheckedContinuation<Result<Void, IMError>, Never>
    }

    /// What happens to a sent request when the connection drops before its reply.
    enum LossPolicy {
        /// Send it again after the reconnect (messages with a de-duplication token).
        case resend
        /// Fail it with `CONNECTION_LOST`.
        case fail
    }

    /// A request waiting for its reply; a class, so reading or marking one in `pending` does not copy its `Command`
    /// (a struct of dozens of retained fields) for every command received and request written (issue 30). Only the
    /// client's own isolation touches it.
    final class PendingRequest {
        let command: Command
        let policy: LossPolicy
        var written = false
        /// When the request fails with `expiry` unless its reply has come (see `sweepExpired`).
        var deadline: ContinuousClock.Instant?
        var expiry: IMError?
        let slot: ReplySlot

        init(command: Command, policy: LossPolicy, slot: ReplySlot) {
            self.command = command
            self.policy = policy
            self.slot = slot
        }
    }

    /// Resolves requests past their deadline; one task per client while requests are pending, instead
    /// of a timer task per request. It sleeps until the earliest deadline (`sweepAt`) instead of checking every
    /// 20 ms: replies almost always come first, and each check took a pool thread, a Dispatch timer and a hop to
    /// the client's executor (for the embedded bot, waking its Lua thread), about 250 wake-ups a second.
    var sweeper: Task<Void, Never>?
    /// When `sweeper` wakes next.
    var sweepAt: ContinuousClock.Instant?
    /// How many times pending requests were checked for their deadline (for tests).
    var sweeps = 0

    /// A client for `clientId`. Pass a `deviceId` that survives app restarts to keep a tag across them.
    public init(
        clientId: String, tag: String? = nil, deviceId: String? = nil, options: IMClientOptions,
        registry: IMMessageRegistry = .shared, logger: Logger? = nil
    ) {
        self.clientId = clientId
        self.tag = tag
        self.deviceId = deviceId ?? UUID().uuidString
        self.options = options
        noReply = IMError(.requestTimeout, "no reply within \(options.requestTimeout)")
        self.registry = registry
        self.logger = logger ?? Logger(label: "hookbot.client.\(clientId)")
        seen = GenerationalMap(generation: options.deduplicationWindow)
        queue = options.executor.map { ClientQueueOnExecutor($0) } ?? ClientQueue()
        executor = queue.unownedExecutor
    }

    deinit {
        hub.finish()
        link?.abort()
    }

    /// A new stream of this client's events. Every stream gets every event emitted after it was created;
    /// several consumers (an app and a bot host) can each hold one. Cancelling the consuming task ends it.
    public nonisolated func events() -> AsyncStream<IMEvent> {
        hub.subscribe()
    }

    /// Like `events()`, as an `IMEventQueue` read in batches; a reader on the client's executor can start its
    /// handling from `onArrival`, with no hop through Swift's pool (the bot host routes events so).
    public nonisolated func eventQueue() -> IMEventQueue {
        hub.queue()
    }
}

/// The default actor that lends its executor to a client without `IMClientOptions.executor`.
actor ClientQueue {}

/// An actor on the executor of `IMClientOptions.executor`.
actor ClientQueueOnExecutor {
    let executor: any SerialExecutor
    init(_ executor: any SerialExecutor) { self.executor = executor }
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
}
