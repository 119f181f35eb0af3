import Foundation
import IMCore
import Logging

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
    /// Custom message types received messages are decoded to.
    public nonisolated let registry: IMMessageRegistry

    /// The connection state.
    public private(set) var state: IMClientState = .closed

    let hub = EventHub()
    let logger: Logger
    private var link: Link?
    private var login: Login?
    private var nextLinkID = 0
    /// Bumped by `open()`, `close()` and a kick: reconnect loops and logins of an older epoch stop.
    private var epoch = 0
    private var nextSerial = 1
    /// De-duplication tokens: a random prefix per client instance and a counter (unique across restarts
    /// without a UUID per message).
    private let dedupePrefix = UUID().uuidString
    private var dedupeCounter = 0
    private var pending: [Int: PendingRequest] = [:]
    private var reconnectTask: Task<Void, Never>?
    /// The session token of the last login, presented on reconnects instead of a new login signature.
    /// (Read by media uploads, which present it as `X-LC-IM-Session-Token`.)
    private(set) var sessionToken: String?
    /// The newest recall or edit seen (or the last login's server time): a reconnect asks for the ones after
    /// it, which the server pushes as `patch modify` (`.recalled` / `.edited` events missed while paused).
    var lastPatchTime: Int64?
    /// The request serial of the chat room rejoin a reconnect waits for before it counts as resumed.
    private var rejoinSerial: Int?
    private var seen: RecentIDs
    /// The last message seen per conversation (what `markRead()` marks read up to).
    var lastMessages: [String: (id: String, timestamp: Int64)] = [:]
    /// Whether conversations are chat rooms, learnt from creation and queries. The chat room joined last
    /// is rejoined after a reconnect.
    var chatRoomFlags: [String: Bool] = [:]
    var currentChatRoom: String?
    /// Received stored messages not acknowledged yet, per conversation, and whether a flush is queued.
    var unacknowledged: [String: [String]] = [:]
    var ackFlushScheduled = false

    /// A login in progress on a freshly connected link.
    private struct Login {
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

    private struct PendingRequest {
        var command: Command
        var policy: LossPolicy
        var written = false
        /// When the request fails with `expiry` unless its reply has come (see `sweepExpired`).
        var deadline: ContinuousClock.Instant?
        var expiry: IMError?
        var slot: ReplySlot
    }

    /// Resolves requests past their deadline; one task per client while requests are pending, instead
    /// of a timer task per request.
    private var sweeper: Task<Void, Never>?
    /// How often pending requests are checked for their deadline.
    private static let sweepInterval: Duration = .milliseconds(20)

    /// A client for `clientId`. Pass a `deviceId` that survives app restarts to keep a tag across them.
    public init(
        clientId: String, tag: String? = nil, deviceId: String? = nil, options: IMClientOptions,
        registry: IMMessageRegistry = .shared, logger: Logger? = nil
    ) {
        self.clientId = clientId
        self.tag = tag
        self.deviceId = deviceId ?? UUID().uuidString
        self.options = options
        self.registry = registry
        self.logger = logger ?? Logger(label: "hookbot.client.\(clientId)")
        seen = RecentIDs(capacity: options.deduplicationWindow)
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

    // MARK: Opening and closing

    /// Logs in. `force` (the default) takes the tag from any other device; a non-forced open fails with
    /// 4111 when another device holds the tag. Returns at once when already open.
    public func open(force: Bool = true) async throws(IMError) {
        switch state {
        case .opened, .paused, .resuming: return
        case .opening: throw IMError(.invalidArgument, "open() is already in progress")
        case .closed, .kicked: break
        }
        if let error = ClientID.validate(clientId) { throw error }
        epoch += 1
        let epoch = epoch
        state = .opening
        let result = await connectAndLogin(reopen: !force, resuming: false, epoch: epoch)
        if case .failure(let error) = result {
            if state == .opening, epoch == self.epoch {
                state = .closed
                failAll(error)
            }
            throw error
        }
    }

    /// Logs out and closes the connection. Waiting requests fail with `CLIENT_CLOSED`; no reconnect follows.
    public func close() async {
        if case .kicked = state {
            state = .closed
            return
        }
        guard state != .closed else { return }
        epoch += 1
        reconnectTask?.cancel()
        reconnectTask = nil
        state = .closed
        rejoinSerial = nil
        failLogin(IMError(.clientClosed, "close() was called during login"))
        failAll(IMError(.clientClosed, "the client was closed"))
        currentChatRoom = nil
        sessionToken = nil
        if let link {
            self.link = nil
            try? link.send(Command(cmd: .session, op: .close, i: allocateSerial()))
            await link.closeAndWait(timeout: .seconds(2))
        }
        hub.emit(.closed(nil))
    }

    /// Connects a new link and logs in on it. On success the link becomes current, the state `.opened`,
    /// and `.opened` or `.resumed` is emitted before anything the server sends after the login reply.
    private func connectAndLogin(reopen: Bool, resuming: Bool, epoch: Int) async -> Result<Void, IMError> {
        var open = Command(cmd: .session, op: .open)
        open.peerId = clientId
        open.tag = tag
        open.deviceId = deviceId
        open.deviceToken = options.deviceToken
        open.r = reopen ? true : nil
        open.ua = "hookbot-swift-sdk/1"
        var rejoin: Command?
        do {
            if resuming { open.lastPatchTime = lastPatchTime }
            if resuming, let sessionToken {
                open.st = sessionToken
            } else {
                open = try await signed(open, .open)
            }
            if resuming, let room = currentChatRoom {
                var join = Command(cmd: .conv, op: .join)
                join.cid = room
                rejoin = try await signed(join, .join(conversationId: room))
            }
        } catch {
            return .failure(error)
        }
        guard epoch == self.epoch else { return .failure(IMError(.clientClosed, "the client was closed")) }
        nextLinkID += 1
        let link: Link
        do {
            if let endpoint = options.localEndpoint {
                link = try Link.attach(id: nextLinkID, to: endpoint, review: options.interceptionHandler)
            } else {
                link = try await Link.connect(
                    id: nextLinkID, url: options.url, timeout: options.connectTimeout, pingInterval: options.pingInterval,
                    maxFrameSize: options.maxFrameSize, trustRoots: options.trustRoots, logger: logger)
            }
        } catch {
            return .failure(error)
        }
        guard epoch == self.epoch else {
            link.close()
            return .failure(IMError(.clientClosed, "the client was closed"))
        }
        Task { [weak self] in
            for await frame in link.inbound {
                switch frame {
                case .command(let command): await self?.receive(command, on: link)
                case .undecodable(let text): await self?.receiveUndecodable(text, on: link)
                }
            }
            await self?.linkEnded(link)
        }
        let serial = allocateSerial()
        open.i = serial
        let timeout = options.connectTimeout
        let timer = Task {
            try? await Task.sleep(for: timeout)
            if !Task.isCancelled { link.abort() }
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { continuation in
            login = Login(link: link, serial: serial, resuming: resuming, rejoin: rejoin, continuation: continuation)
            do throws(IMError) {
                try link.send(open)
            } catch {
                login = nil
                continuation.resume(returning: .failure(error))
            }
        }
    }

    private func failLogin(_ error: IMError) {
        guard let login else { return }
        self.login = nil
        login.link.abort()
        login.continuation.resume(returning: .failure(error))
    }

    /// The login reply arrived on `login.link`.
    private func completeLogin(_ login: Login, reply: Command) {
        self.login = nil
        if let error = IMError(reply: reply) {
            login.link.close()
            login.continuation.resume(returning: .failure(error))
            return
        }
        guard reply.cmd == .session, reply.op == .opened else {
            login.link.close()
            login.continuation.resume(returning: .failure(IMError(.unexpectedReply, "login answered with \(reply.cmd.rawValue)")))
            return
        }
        link = login.link
        sessionToken = reply.st ?? sessionToken
        if let t = reply.t { lastPatchTime = max(lastPatchTime ?? t, t) }
        if var rejoin = login.rejoin {
            let serial = allocateSerial()
            rejoin.i = serial
            rejoinSerial = serial
            try? login.link.send(rejoin)
        } else {
            finishLogin(resuming: login.resuming)
        }
        login.continuation.resume(returning: .success(()))
    }

    /// The session is fully restored: waiting requests go out.
    private func finishLogin(resuming: Bool) {
        state = .opened
        hub.emit(resuming ? .resumed : .opened)
        flushPending()
    }

    /// The reply to the chat room rejoin after a reconnect arrived.
    private func completeRejoin(_ reply: Command) {
        rejoinSerial = nil
        if let error = IMError(reply: reply) {
            logger.warning("could not rejoin the chat room", metadata: ["cid": "\(currentChatRoom ?? "")", "error": "\(error)"])
            currentChatRoom = nil
        }
        finishLogin(resuming: true)
    }

    /// A link's inbound stream ended.
    private func linkEnded(_ ended: Link) {
        if let login, login.link.id == ended.id {
            failLogin(IMError(.connectionFailed, "the connection closed during login"))
            return
        }
        guard let link, link.id == ended.id else { return }
        self.link = nil
        guard state == .opened || rejoinSerial != nil else { return }
        rejoinSerial = nil
        state = .paused
        hub.emit(.paused(IMError(.connectionLost, "the connection to \(options.url) was lost")))
        for serial in pending.keys.sorted() {
            guard let request = pending[serial], request.written else { continue }
            if request.policy == .resend {
                pending[serial]?.written = false
                arm(serial, after: options.sendTimeout, IMError(.sendTimeout, "not sent: the connection did not come back in time"))
            } else {
                resolve(serial, .failure(IMError(.connectionLost, "the connection was lost before the reply")))
            }
        }
        startReconnecting()
    }

    private func startReconnecting() {
        let epoch = self.epoch
        reconnectTask = Task { await self.reconnectLoop(epoch: epoch) }
    }

    private func reconnectLoop(epoch: Int) async {
        var attempt = 0
        while epoch == self.epoch, !Task.isCancelled {
            let delay = options.reconnectDelay(attempt: attempt, unit: Double.random(in: 0...1))
            attempt += 1
            try? await Task.sleep(for: delay)
            guard epoch == self.epoch, !Task.isCancelled else { return }
            state = .resuming
            hub.emit(.resuming(attempt: attempt))
            switch await connectAndLogin(reopen: true, resuming: true, epoch: epoch) {
            case .success:
                reconnectTask = nil
                return
            case .failure(let error) where epoch != self.epoch:
                logger.debug("reconnect abandoned", metadata: ["error": "\(error)"])
                return
            case .failure(let error)
            where sessionToken != nil
                && (error.knownCode == .sessionTokenExpired || error.knownCode == .signatureFailed):
                // A refused token (expired, revoked, or a server that wants a signature) is not the end:
                // log in again with a fresh signature.
                logger.debug("session token refused; logging in with a signature")
                sessionToken = nil
                attempt = 0
            case .failure(let error) where error.clientCode == nil:
                reconnectTask = nil
                if error.code == IMErrorCode.sessionConflict.rawValue { kicked(error) } else { giveUp(error) }
                return
            case .failure(let error):
                logger.debug("reconnect failed", metadata: ["attempt": "\(attempt)", "error": "\(error)"])
                state = .paused
            }
        }
    }

    /// The server logged this client out.
    private func kicked(_ error: IMError) {
        epoch += 1
        state = .kicked(error)
        endSession(error)
        hub.emit(.kickedOffline(error))
    }

    /// A reconnect failed with a server error other than 4111: stop for good.
    private func giveUp(_ error: IMError) {
        epoch += 1
        state = .closed
        endSession(error)
        hub.emit(.closed(error))
    }

    private func endSession(_ error: IMError) {
        rejoinSerial = nil
        reconnectTask?.cancel()
        reconnectTask = nil
        currentChatRoom = nil
        failLogin(error)
        failAll(error)
        link?.close()
        link = nil
    }

    // MARK: Requests

    func nextDedupeToken() -> String {
        dedupeCounter += 1
        return "\(dedupePrefix)-\(dedupeCounter)"
    }

    func allocateSerial() -> Int {
        defer { nextSerial += 1 }
        return nextSerial
    }

    /// Sends a request and returns its reply. While the client is paused the request waits for the
    /// reconnect (at most `sendTimeout`); a reply carrying an error code is thrown as `IMError`.
    func request(_ command: Command, policy: LossPolicy = .fail) async throws(IMError) -> Command {
        let (serial, slot) = try enqueue(command, policy: policy)
        let result = await withTaskCancellationHandler {
            await slot.value()
        } onCancel: {
            Task { await self.resolve(serial, .failure(IMError(.cancelled, "the request was cancelled"))) }
        }
        let reply = try result.get()
        if let error = IMError(reply: reply) { throw error }
        return reply
    }

    /// Writes a request now, so requests leave in the order they are enqueued (or queues it while paused),
    /// and returns the slot its reply will arrive in.
    func enqueue(_ command: Command, policy: LossPolicy) throws(IMError) -> (serial: Int, slot: ReplySlot) {
        switch state {
        case .opened, .opening, .paused, .resuming: break
        case .closed, .kicked: throw IMError(.clientNotOpen, "open the client first")
        }
        var command = command
        let serial = allocateSerial()
        command.i = serial
        let slot = ReplySlot()
        pending[serial] = PendingRequest(command: command, policy: policy, slot: slot)
        if let link, state == .opened {
            write(serial, on: link)
        } else {
            arm(serial, after: options.sendTimeout, IMError(.sendTimeout, "not sent: the client stayed disconnected"))
        }
        return (serial, slot)
    }

    /// Sends a command without waiting for anything; it is lost when the client is not connected.
    func post(_ command: Command) throws(IMError) {
        guard let link, state == .opened else { throw IMError(.clientNotOpen, "not connected") }
        try link.send(command)
    }

    private func write(_ serial: Int, on link: Link) {
        guard let request = pending[serial] else { return }
        pending[serial]?.written = true
        do throws(IMError) {
            try link.send(request.command)
        } catch {
            return resolve(serial, .failure(error))
        }
        arm(serial, after: options.requestTimeout, IMError(.requestTimeout, "no reply within \(options.requestTimeout)"))
    }

    /// Writes every waiting request, oldest first.
    private func flushPending() {
        guard let link else { return }
        for serial in pending.keys.sorted() where pending[serial]?.written == false {
            write(serial, on: link)
        }
    }

    private func arm(_ serial: Int, after delay: Duration, _ error: IMError) {
        guard pending[serial] != nil else { return }
        pending[serial]?.deadline = ContinuousClock.now.advanced(by: delay)
        pending[serial]?.expiry = error
        if sweeper == nil {
            sweeper = Task { [weak self] in
                while let self, await self.sweepExpired() {
                    try? await Task.sleep(for: Self.sweepInterval)
                }
            }
        }
    }

    /// Fails the requests whose deadline has passed; false (and the sweeper ends) once none is pending.
    private func sweepExpired() -> Bool {
        let now = ContinuousClock.now
        for (serial, request) in pending {
            if let deadline = request.deadline, let expiry = request.expiry, deadline <= now {
                resolve(serial, .failure(expiry))
            }
        }
        if pending.isEmpty { sweeper = nil }
        return !pending.isEmpty
    }

    private func resolve(_ serial: Int, _ result: Result<Command, IMError>) {
        guard let request = pending.removeValue(forKey: serial) else { return }
        if request.command.cmd == .direct, request.command.transient != true, request.command.action == nil,
            case .success(let ack) = result, ack.code == nil, let id = ack.uid, let timestamp = ack.t,
            let cid = request.command.cid
        {
            noteLastMessage(cid: cid, id: id, timestamp: timestamp)
        }
        request.slot.fulfill(result)
    }

    private func failAll(_ error: IMError) {
        for serial in pending.keys.sorted() { resolve(serial, .failure(error)) }
    }

    // MARK: Receiving

    private func receive(_ command: Command, on link: Link) {
        if let login, login.link.id == link.id, command.i == login.serial {
            return completeLogin(login, reply: command)
        }
        guard self.link?.id == link.id else { return }
        if let serial = command.i {
            if serial == rejoinSerial { return completeRejoin(command) }
            if pending[serial]?.written == true { resolve(serial, .success(command)) }
            return
        }
        if command.cmd == .session, command.op == .closed {
            if command.code != nil, let error = IMError(reply: command) { kicked(error) }
            return
        }
        dispatchEvent(command, on: link)
    }

    private func receiveUndecodable(_ text: String, on link: Link) {
        guard self.link?.id == link.id else { return }
        hub.emit(.undecodable(text))
    }

    /// Remembers a received message id; false when it was seen before.
    func markSeen(_ id: String) -> Bool { seen.insert(id) }
}

/// The most recent ids inserted, up to a capacity.
struct RecentIDs {
    private var members = Set<String>()
    private var ring: [String] = []
    private var next = 0
    let capacity: Int

    init(capacity: Int) { self.capacity = max(1, capacity) }

    /// Inserts `id`; false when it is already present.
    mutating func insert(_ id: String) -> Bool {
        guard members.insert(id).inserted else { return false }
        if ring.count < capacity {
            ring.append(id)
        } else {
            members.remove(ring[next])
            ring[next] = id
            next = (next + 1) % capacity
        }
        return true
    }
}
