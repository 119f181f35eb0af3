import Foundation
import HummingbirdWSClient
import IMCore
import Logging
import Synchronization

/// A raw protocol client for tests: sends commands over a real WebSocket and collects what arrives.
final class TestClient: Sendable {
    struct Timeout: Error, CustomStringConvertible {
        var waitingFor: String
        var description: String { "timed out waiting for \(waitingFor)" }
    }

    private struct State {
        var inbox: [Command] = []
        var raw: [String] = []
        var waiters: [(id: Int, predicate: @Sendable (Command) -> Bool, continuation: CheckedContinuation<Command?, Never>)] = []
        var closed = false
        var nextWaiter = 0
    }

    private let state = Mutex(State())
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
        guard let command = try? codec.decode(text) else {
            state.withLock { $0.raw.append(text) }
            return
        }
        let waiter = state.withLock { state -> CheckedContinuation<Command?, Never>? in
            if let index = state.waiters.firstIndex(where: { $0.predicate(command) }) {
                return state.waiters.remove(at: index).continuation
            }
            state.inbox.append(command)
            return nil
        }
        waiter?.resume(returning: command)
    }

    private func markClosed() {
        let waiters = state.withLock { state in
            state.closed = true
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters { waiter.continuation.resume(returning: nil) }
    }

    var isClosed: Bool { state.withLock { $0.closed } }

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
        let id = state.withLock { state -> Int in state.nextWaiter += 1; return state.nextWaiter }
        let result = await withTaskGroup(of: Command?.self) { group in
            group.addTask {
                await withCheckedContinuation { (continuation: CheckedContinuation<Command?, Never>) in
                    let immediate = self.state.withLock { state -> Command?? in
                        if let index = state.inbox.firstIndex(where: predicate) { return .some(state.inbox.remove(at: index)) }
                        if state.closed { return .some(nil) }
                        state.waiters.append((id, predicate, continuation))
                        return .none
                    }
                    if let immediate { continuation.resume(returning: immediate) }
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                let waiter = self.state.withLock { state -> CheckedContinuation<Command?, Never>? in
                    guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                    return state.waiters.remove(at: index).continuation
                }
                waiter?.resume(returning: nil)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        guard let result else { throw Timeout(waitingFor: what) }
        return result
    }

    /// Commands received and not yet consumed by `next` or `request`.
    func drain() -> [Command] {
        state.withLock { state in
            defer { state.inbox.removeAll() }
            return state.inbox
        }
    }

    /// Waits briefly, then returns unconsumed commands matching `predicate` (for asserting absence).
    func settle(for duration: Duration = .milliseconds(300), where predicate: (Command) -> Bool) async -> [Command] {
        try? await Task.sleep(for: duration)
        return state.withLock { $0.inbox.filter(predicate) }
    }

    func close() async {
        outbox.finish()
        await task.value
    }
}
