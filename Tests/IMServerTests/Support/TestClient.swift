import Foundation
import HookbotTestSupport
import HummingbirdWSClient
import IMCore
import IMServer
import Logging
import Synchronization

/// A raw protocol client for tests: sends commands over a real WebSocket (or an in-process attachment)
/// and collects what arrives.
final class TestClient: Sendable {
    private enum Transport: Sendable {
        case webSocket(AsyncStream<String>.Continuation)
        case local(LocalConnection)
    }

    private let inbox = Inbox<Command>()
    private let raw = Inbox<String>()
    private let transport: Transport
    private let serial = Atomic<Int>(1)
    private let task: Task<Void, Never>
    private let codec = JSONCommandCodec()
    /// In-process interceptors: reviews waiting for the verdict the test sends.
    private let reviews = Mutex<[String: CheckedContinuation<Command, Never>]>([:])

    private init(outbox: AsyncStream<String>.Continuation, task: Task<Void, Never>) {
        transport = .webSocket(outbox)
        self.task = task
    }

    private init(local: LocalConnection, task: Task<Void, Never>) {
        transport = .local(local)
        self.task = task
    }

    /// Attaches in process (no socket, commands as values). Hook requests to this client, when it logs in
    /// as an interceptor, arrive in its inbox like frames and are answered with `send(verdict)`.
    static func attach(to server: IMServer) throws -> TestClient {
        let (ended, end) = AsyncStream<Void>.makeStream()
        let holder = Mutex<TestClient?>(nil)
        let connection = server.connectLocally(
            receive: { command in holder.withLock { $0 }?.inbox.append(command) },
            closed: { end.finish() },
            review: { request in await holder.withLock { $0 }?.review(request) })
        guard let connection else { throw IMError(.connectionFailed, "server not running") }
        let task = Task {
            for await _ in ended {}
            holder.withLock { $0 }?.markClosed()
        }
        let client = TestClient(local: connection, task: task)
        holder.withLock { $0 = client }
        return client
    }

    /// An in-process review: the request goes to the inbox as the `hook request` command a WebSocket
    /// interceptor would get, and the `hook verdict` the test sends is read as the server reads one.
    private func review(_ request: HookRequest) async -> HookVerdict? {
        let id = "t\(serial.wrappingAdd(1, ordering: .relaxed).oldValue)"
        let answer = await withCheckedContinuation { continuation in
            reviews.withLock { $0[id] = continuation }
            inbox.append(request.command(id: id))
        }
        return HookVerdict(command: answer, answering: request.kind)
    }

    /// Connects to `ws://127.0.0.1:port/ws`.
    static func connect(port: Int) async throws -> TestClient {
        let (frames, outbox) = AsyncStream<String>.makeStream()
        let (ready, readyContinuation) = AsyncStream<Void>.makeStream()
        let holder = Mutex<TestClient?>(nil)
        let task = Task {
            var logger = Logger(label: "test-client")
            logger.logLevel = .critical
            do {
                _ = try await WebSocketClient.connect(
                    url: "ws://127.0.0.1:\(port)/ws", configuration: .init(maxFrameSize: 16 << 20), logger: logger
                ) { inbound, outbound, _ in
                    readyContinuation.yield()
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask {
                            for await frame in frames { try await outbound.write(.text(frame)) }
                            try await outbound.close(.normalClosure, reason: nil)
                        }
                        for try await message in inbound.messages(maxSize: 16 << 20) {
                            if case .text(let text) = message { holder.withLock { $0 }?.receive(text) }
                        }
                        group.cancelAll()
                    }
                }
            } catch { if ProcessInfo.processInfo.environment["TEST_LOG"] != nil { print("test client ended: \(error)") } }
            readyContinuation.finish()
            holder.withLock { $0 }?.markClosed()
        }
        let client = TestClient(outbox: outbox, task: task)
        holder.withLock { $0 = client }
        for await _ in ready { return client }
        throw Timeout(waitingFor: "connection")
    }

    /// Connects and opens a session.
    static func login(
        _ clientID: String, port: Int, tag: String? = nil, deviceID: String? = nil,
        reopen: Bool = false
    ) async throws -> TestClient {
        let client = try await connect(port: port)
        var open = Command(cmd: .session, op: .open)
        open.peerId = clientID
        open.tag = tag
        open.deviceId = deviceID
        open.r = reopen ? true : nil
        let reply = try await client.request(open)
        guard reply.op == .opened else { throw IMError(code: reply.code ?? 0, reason: reply.reason ?? "login failed") }
        return client
    }

    private func receive(_ text: String) {
        if let command = try? codec.decode(text) { inbox.append(command) } else { raw.append(text) }
    }

    private func markClosed() {
        inbox.close()
        let waiting = reviews.withLock { reviews in
            defer { reviews.removeAll() }
            return Array(reviews.values)
        }
        for review in waiting { review.resume(returning: Command(cmd: .hook, op: .verdict)) }
    }

    var isClosed: Bool { inbox.isClosed }

    func sendRaw(_ text: String) {
        switch transport {
        case .webSocket(let outbox): outbox.yield(text)
        case .local(let connection):
            if let command = try? codec.decode(text) { connection.send(command) }
        }
    }

    func send(_ command: Command) {
        switch transport {
        case .webSocket(let outbox): outbox.yield(codec.encode(command))
        case .local(let connection):
            if command.cmd == .hook, command.op == .verdict,
                let review = reviews.withLock({ $0.removeValue(forKey: command.id ?? "") })
            {
                review.resume(returning: command)
            } else {
                connection.send(command)
            }
        }
    }

    /// Sends a request with a fresh `i` and returns the reply carrying that `i`.
    func request(_ command: Command, timeout: Duration = .seconds(10)) async throws -> Command {
        var command = command
        let i = serial.wrappingAdd(1, ordering: .relaxed).oldValue
        command.i = i
        send(command)
        return try await next(timeout: timeout, "reply to i=\(i)") { $0.i == i }
    }

    /// Waits for the next received command matching `predicate` (including ones already received).
    func next(
        timeout: Duration = .seconds(10), _ what: String = "command",
        where predicate: @escaping @Sendable (Command) -> Bool
    ) async throws -> Command {
        guard let command = await inbox.take(timeout: timeout, where: predicate) else { throw Timeout(waitingFor: what) }
        return command
    }

    /// Commands received and not yet consumed by `next` or `request`.
    func drain() -> [Command] { inbox.drain() }

    /// Waits briefly, then returns unconsumed commands matching `predicate` (for asserting absence).
    func settle(for duration: Duration = .milliseconds(300), where predicate: (Command) -> Bool) async -> [Command] {
        try? await Task.sleep(for: duration)
        return inbox.kept(where: predicate)
    }

    func close() async {
        switch transport {
        case .webSocket(let outbox): outbox.finish()
        case .local(let connection): connection.close()
        }
        await task.value
    }
}
