import IMCore
import Synchronization

/// In-process clients (the bot host of `hookbot run`, benchmarks): a connection kind whose commands cross
/// as values. Each attachment is a `Connection` with the `.local` wire format, and its commands go through
/// `IMService.handle` one at a time in the order they were sent, exactly like a WebSocket's frames.
final class LocalAttachments: Sendable {
    private struct Attached {
        var transport: Transport
        var commands: LocalCommands
    }

    private let attached = Mutex<[UInt64: Attached]>([:])

    /// Starts serving a new in-process connection.
    func attach(
        allocateID: @escaping @Sendable () -> UInt64, service: IMService, receive: @escaping @Sendable (Command) -> Void,
        closed: @escaping @Sendable () -> Void, review: HookAnswerer?, headsUp: ReviewHeadsUp? = nil
    ) -> LocalConnection {
        let commands = LocalCommands()
        let transport = Transport(
            remoteAddress: "in-process", format: .local, encoder: { .command($0) },
            emit: { outbound in if case .command(let command) = outbound { receive(command) } },
            finish: { commands.close() }, review: review, headsUp: headsUp, allocateID: allocateID)
        let id = transport.openFirst().id
        service.metrics.connectionOpened(.local)
        service.logger.info("connection accepted", metadata: ["conn": "\(id)", "remote": "in-process", "format": "local"])
        // Registered before a command can end it, so `closeAll` always finds it.
        attached.withLock { $0[id] = Attached(transport: transport, commands: commands) }
        commands.serve(
            handle: { command in await service.handle(command, arrivingOn: transport) },
            end: {
                service.transportClosed(transport)
                service.metrics.connectionClosed(.local)
                self.attached.withLock { _ = $0.removeValue(forKey: id) }
                service.logger.info("connection closed", metadata: ["conn": "\(id)"])
                closed()
            })
        return LocalConnection(send: { commands.send($0) }, close: { commands.close() })
    }

    /// Closes every in-process connection and waits until each has ended.
    func closeAll() async {
        let all = attached.withLock { Array($0.values) }
        for entry in all { entry.transport.close(code: .goingAway) }
        for entry in all { await entry.commands.ended() }
    }
}

/// One in-process connection's commands, handled one at a time in the order they were sent by a task that
/// exists only while some wait (an idle attachment holds no task, as an idle WebSocket session holds none).
private final class LocalCommands: Sendable {
    private struct State {
        var queue: [Command] = []
        var draining = false
        var closing = false
        var ended = false
        var endWaiters: [CheckedContinuation<Void, Never>] = []
        var handle: (@Sendable (Command) async -> Void)?
        var end: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())

    /// What handles the commands and what runs once after the last of them; set before any is sent.
    func serve(handle: @escaping @Sendable (Command) async -> Void, end: @escaping @Sendable () -> Void) {
        state.withLock { state in
            state.handle = handle
            state.end = end
        }
    }

    /// Queues a command (dropped once the connection is closing, as a closed stream drops it).
    func send(_ command: Command) {
        startDrainingIf(immediately: true) { state in
            guard !state.closing else { return false }
            state.queue.append(command)
            return true
        }
    }

    /// Ends the connection after the commands already sent.
    func close() {
        startDrainingIf(immediately: false) { state in
            guard !state.closing else { return false }
            state.closing = true
            return true
        }
    }

    /// Returns once the connection has ended (its `end` has run).
    func ended() async {
        await withCheckedContinuation { continuation in
            let ended = state.withLock { state in
                if !state.ended { state.endWaiters.append(continuation) }
                return state.ended
            }
            if ended { continuation.resume() }
        }
    }

    /// Starts the task that handles what is queued, unless one is at it. `immediately`: the task runs on the
    /// sender's thread until it first waits (the bot host sends from its Lua thread: a reply's way through
    /// `IMService.handle` to `MessagePipeline.enqueue` does not wait, so the Lua thread wakes the writer thread
    /// itself instead of waking a pool thread that then wakes it; issue 30). After a wait the task goes on on
    /// Swift's pool. A close starts it on the pool: its end runs `IMService.transportClosed` and the `closed`
    /// callback, which a caller of `close` (possibly under a lock of its own) must not run inline.
    private func startDrainingIf(immediately: Bool, _ change: (inout State) -> Bool) {
        let start = state.withLock { state in
            guard change(&state), !state.draining else { return false }
            state.draining = true
            return true
        }
        guard start else { return }
        if immediately {
            Task.immediate { await self.drain(endingOnAnotherTask: true) }
        } else {
            Task { await self.drain(endingOnAnotherTask: false) }
        }
    }

    private enum Next {
        case commands([Command], handle: @Sendable (Command) async -> Void)
        case end(@Sendable () -> Void, waiters: [CheckedContinuation<Void, Never>])
        case idle
    }

    /// Handles what is queued until nothing is, then ends the connection once it is closing. `endingOnAnotherTask`:
    /// the end runs on a task of its own, not inline on a sender's thread (see `startDrainingIf`).
    private func drain(endingOnAnotherTask: Bool) async {
        while true {
            let next = state.withLock { state -> Next in
                if !state.queue.isEmpty, let handle = state.handle {
                    defer { state.queue = [] }
                    return .commands(state.queue, handle: handle)
                }
                guard state.closing, !state.ended, let end = state.end else {
                    state.draining = false
                    return .idle
                }
                // Stays `draining`: nothing starts another task after the end. Dropping the closures ends
                // the cycle through the transport (whose `finish` holds this).
                state.ended = true
                defer {
                    state.endWaiters = []
                    state.handle = nil
                    state.end = nil
                }
                return .end(end, waiters: state.endWaiters)
            }
            switch next {
            case .commands(let commands, let handle):
                for command in commands { await handle(command) }
            case .end(let end, let waiters):
                let ending = {
                    end()
                    for waiter in waiters { waiter.resume() }
                }
                if endingOnAnotherTask { Task { ending() } } else { ending() }
                return
            case .idle:
                return
            }
        }
    }
}

extension IMServer: LocalEndpoint {
    /// Attaches an in-process client; nil when the server is not running.
    public func connectLocally(
        receive: @escaping @Sendable (Command) -> Void, closed: @escaping @Sendable () -> Void,
        review: HookReviewer?
    ) -> LocalConnection? {
        connectLocally(receive: receive, closed: closed, answering: review.map(InterceptorHub.answerer(waitingFor:)))
    }

    /// Attaches an in-process client whose verdicts come by callback; nil when the server is not running.
    public func connectLocally(
        receive: @escaping @Sendable (Command) -> Void, closed: @escaping @Sendable () -> Void,
        answering: HookAnswerer?
    ) -> LocalConnection? {
        connectLocally(receive: receive, closed: closed, answering: answering, headsUp: nil)
    }

    /// Attaches an in-process client whose verdicts come by callback and that is given a heads-up when a message
    /// for its review is probably on its way (`ReviewHeadsUp`); nil when the server is not running.
    public func connectLocally(
        receive: @escaping @Sendable (Command) -> Void, closed: @escaping @Sendable () -> Void,
        answering: HookAnswerer?, headsUp: ReviewHeadsUp?
    ) -> LocalConnection? {
        guard isRunning else { return nil }
        return locals.attach(
            allocateID: { [self] in allocateConnectionID() }, service: service, receive: receive, closed: closed, review: answering,
            headsUp: headsUp)
    }
}
