import Foundation
import HummingbirdWSClient
import IMCore
import Logging
import HookbotTestSupport
import Synchronization

/// A raw protocol client for tests: sends commands over a real WebSocket and collects what arrives.
final class TestClient: Sendable {
    private let inbox = Inbox<Command>()
    private let raw = Inbox<String>()
    private let outbox: AsyncStream<String>.Continuation
    private let serial = Atomic<Int>(1)
    private let task: Task<Void, Never>
    private let codec = JSONCommandCodec()

    private init(outbox: AsyncStream<String>.Continuation, task: Task<Void, Never>) {
        self.outbox = outbox
        self.task = task
    }

    /// Connects to `ws://127.0.0.1:port/ws`.
    static func connect(port: Int) async throws -> TestClient {
        let (frames, outbox) = AsyncStream<String>.makeStream()
        let (ready, readyContinuation) = AsyncStream<Void>.makeStream()
        let holder = Mutex<TestClient?>(nil)
        let task = Task {
            var logger = Logger(label: "test-client")
            logger.logLevel = .critical
            do { _ = try await WebSocketClient.connect(url: "ws://127.0.0.1:\(port)/ws", configuration: .init(maxFrameSize: 16 << 20), logger: logger) { inbound, outbound, _ in
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
            } } catch { if ProcessInfo.processInfo.environment["TEST_LOG"] != nil { print("test client ended: \(error)") } }
            readyContinuation.finish()
            holder.withLock { $0 }?.markClosed()
        }
        let client = TestClient(outbox: outbox, task: task)
        holder.withLock { $0 = client }
        for await _ in ready { return client }
        throw Timeout(waitingFor: "connection")
    }

    /// Connects and opens a session.
    static func login(_ clientID: String, port: Int, tag: String? = nil, deviceID: String? = nil,
                      reopen: Bool = false) async throws -> TestClient {
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

    private func markClosed() { inbox.close() }

    var isClosed: Bool { inbox.isClosed }

    func sendRaw(_ text: String) { outbox.yield(text) }

    func send(_ command: Command) { outbox.yield(codec.encode(command)) }

    /// Sends a request with a fresh `i` and returns the reply carrying that `i`.
    func request(_ command: Command, timeout: Duration = .seconds(10)) async throws -> Command {
        var command = command
        let i = serial.wrappingAdd(1, ordering: .relaxed).oldValue
        command.i = i
        send(command)
        return try await next(timeout: timeout, "reply to i=\(i)") { $0.i == i }
    }

    /// Waits for the next received command matching `predicate` (including ones already received).
    func next(timeout: Duration = .seconds(10), _ what: String = "command",
              where predicate: @escaping @Sendable (Command) -> Bool) async throws -> Command {
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
        outbox.finish()
        await task.value
    }
}
