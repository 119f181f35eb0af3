import Foundation
import IMCore
import Logging
import NIOCore

/// Opening and closing: login, the link's end, reconnecting with backoff, being kicked or giving up.
extension IMClient {
    /// Logs in. `force` (the default) takes the tag from any other device; a non-forced open fails with
    /// 4111 when another device holds the tag. Returns at once when already open.
    public func open(force: Bool = true) async throws(IMError) {
        switch connectionState {
        case .opened, .paused, .resuming: return
        case .opening: throw IMError(.invalidArgument, "open() is already in progress")
        case .closed, .kicked: break
        }
        if let error = ClientID.validate(clientId) { throw error }
        epoch += 1
        let epoch = epoch
        connectionState = .opening
        let result = await connectAndLogin(reopen: !force, resuming: false, epoch: epoch)
        if case .failure(let error) = result {
            if connectionState == .opening, epoch == self.epoch {
                connectionState = .closed
                failAll(error)
            }
            throw error
        }
    }

    /// Logs out and closes the connection. Waiting requests fail with `CLIENT_CLOSED`; no reconnect follows.
    public func close() async {
        if case .kicked = connectionState {
            connectionState = .closed
            return
        }
        guard connectionState != .closed else { return }
        epoch += 1
        reconnectTask?.cancel()
        reconnectTask = nil
        connectionState = .closed
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
    func connectAndLogin(reopen: Bool, resuming: Bool, epoch: Int) async -> Result<Void, IMError> {
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
                link = try Link.attach(id: nextLinkID, to: endpoint, review: options.localReviewer)
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
        if let inbox = link.localInbox {
            // In process: what arrived since the last look is handled as one batch, on the client's executor
            // (the waiting task is on `queue`, which shares it, and does not keep the client alive).
            let client = Weak(self) // tasks that outlive a dropped client
            if let loop = options.executor as? any EventLoop {
                // On a NIO loop (the bot's Lua thread): each burst is a job on the loop, no task waits for it.
                inbox.deliver(
                    on: loop, { commands in client.value?.assumeIsolated { $0.receive(commands, on: link) } },
                    ended: { client.value?.assumeIsolated { $0.linkEnded(link) } })
            } else {
                Task { [queue] in await Self.readLocal(inbox, of: link, for: client, on: queue) }
            }
        } else {
            Task { [weak self] in
                for await frame in link.inbound {
                    switch frame {
                    case .commands(let commands): await self?.receive(commands, on: link)
                    case .undecodable(let text): await self?.receiveUndecodable(text, on: link)
                    }
                }
                await self?.linkEnded(link)
            }
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

    /// Hands an in-process link's deliveries to the client as they arrive, for a client not on a NIO loop. Runs on
    /// `queue` (the client's executor, without keeping the client alive), so the client's `receive` needs no hop
    /// once the reader is resumed.
    static func readLocal(_ inbox: LocalInbox<Command>, of link: Link, for client: Weak<IMClient>, on queue: isolated any Actor) async {
        while let commands = await inbox.next(isolation: queue) {
            guard let client = client.value else { return }
            await client.receive(commands, on: link)
        }
        await client.value?.linkEnded(link)
    }

    func failLogin(_ error: IMError) {
        guard let login else { return }
        self.login = nil
        login.link.abort()
        login.continuation.resume(returning: .failure(error))
    }

    /// The login reply arrived on `login.link`.
    func completeLogin(_ login: Login, reply: Command) {
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
    func finishLogin(resuming: Bool) {
        connectionState = .opened
        hub.emit(resuming ? .resumed : .opened)
        flushPending()
    }

    /// The reply to the chat room rejoin after a reconnect arrived.
    func completeRejoin(_ reply: Command) {
        rejoinSerial = nil
        if let error = IMError(reply: reply) {
            logger.warning("could not rejoin the chat room", metadata: ["cid": "\(currentChatRoom ?? "")", "error": "\(error)"])
            currentChatRoom = nil
        }
        finishLogin(resuming: true)
    }

    /// A link's inbound stream ended.
    func linkEnded(_ ended: Link) {
        if let login, login.link.id == ended.id {
            failLogin(IMError(.connectionFailed, "the connection closed during login"))
            return
        }
        guard let link, link.id == ended.id else { return }
        self.link = nil
        guard connectionState == .opened || rejoinSerial != nil else { return }
        rejoinSerial = nil
        connectionState = .paused
        hub.emit(.paused(IMError(.connectionLost, "the connection to \(options.url) was lost")))
        for serial in pending.keys.sorted() {
            guard let request = pending[serial], request.written else { continue }
            if request.policy == .resend {
                request.written = false
                arm(serial, after: options.sendTimeout, IMError(.sendTimeout, "not sent: the connection did not come back in time"))
            } else {
                resolve(serial, .failure(IMError(.connectionLost, "the connection was lost before the reply")))
            }
        }
        startReconnecting()
    }

    func startReconnecting() {
        let epoch = self.epoch
        reconnectTask = Task { await self.reconnectLoop(epoch: epoch) }
    }

    func reconnectLoop(epoch: Int) async {
        var attempt = 0
        while epoch == self.epoch, !Task.isCancelled {
            let delay = options.reconnectDelay(attempt: attempt, unit: Double.random(in: 0...1))
            attempt += 1
            try? await Task.sleep(for: delay)
            guard epoch == self.epoch, !Task.isCancelled else { return }
            connectionState = .resuming
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
                connectionState = .paused
            }
        }
    }

    /// The server logged this client out.
    func kicked(_ error: IMError) {
        epoch += 1
        connectionState = .kicked(error)
        endSession(error)
        hub.emit(.kickedOffline(error))
    }

    /// A reconnect failed with a server error other than 4111: stop for good.
    func giveUp(_ error: IMError) {
        epoch += 1
        connectionState = .closed
        endSession(error)
        hub.emit(.closed(error))
    }

    func endSession(_ error: IMError) {
        rejoinSerial = nil
        reconnectTask?.cancel()
        reconnectTask = nil
        currentChatRoom = nil
        failLogin(error)
        failAll(error)
        link?.close()
        link = nil
    }
}
