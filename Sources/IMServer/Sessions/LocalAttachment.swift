import IMCore
import Synchronization

/// In-process clients (the bot host of `hookbot run`, benchmarks): a connection kind whose commands cross
/// as values. Each attachment is a `Connection` with the `.local` wire format, and its commands go through
/// `IMService.handle` one at a time in the order they were sent, exactly like a WebSocket's frames.
final class LocalAttachments: Sendable {
    private struct Attached {
        var transport: Transport
        var task: Task<Void, Never>
    }

    private let attached = Mutex<[UInt64: Attached]>([:])

    /// Starts serving a new in-process connection.
    func attach(
        allocateID: @escaping @Sendable () -> UInt64, service: IMService, receive: @escaping @Sendable (Command) -> Void,
        closed: @escaping @Sendable () -> Void, review: HookReviewer?
    ) -> LocalConnection {
        let (commands, input) = AsyncStream<Command>.makeStream()
        let transport = Transport(
            remoteAddress: "in-process", format: .local, encoder: { .command($0) },
            emit: { outbound in if case .command(let command) = outbound { receive(command) } },
            finish: { input.finish() }, review: review, allocateID: allocateID)
        let id = transport.openFirst().id
        service.metrics.connectionOpened(.local)
        service.logger.info("connection accepted", metadata: ["conn": "\(id)", "remote": "in-process", "format": "local"])
        // The task is registered before it can finish, so `detach` below always finds it.
        attached.withLock { attached in
            let task = Task {
                for await command in commands {
                    await service.handle(command, arrivingOn: transport)
                }
                service.transportClosed(transport)
                service.metrics.connectionClosed(.local)
                self.attached.withLock { _ = $0.removeValue(forKey: id) }
                service.logger.info("connection closed", metadata: ["conn": "\(id)"])
                closed()
            }
            attached[id] = Attached(transport: transport, task: task)
        }
        return LocalConnection(send: { input.yield($0) }, close: { input.finish() })
    }

    /// Closes every in-process connection and waits until each has ended.
    func closeAll() async {
        let all = attached.withLock { Array($0.values) }
        for entry in all { entry.transport.close(code: .goingAway) }
        for entry in all { await entry.task.value }
    }
}

extension IMServer: LocalEndpoint {
    /// Attaches an in-process client; nil when the server is not running.
    public func connectLocally(
        receive: @escaping @Sendable (Command) -> Void, closed: @escaping @Sendable () -> Void,
        review: HookReviewer?
    ) -> LocalConnection? {
        guard isRunning else { return nil }
        return locals.attach(
            allocateID: { [self] in allocateConnectionID() }, service: service, receive: receive, closed: closed, review: review)
    }
}
