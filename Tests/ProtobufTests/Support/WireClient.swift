import Foundation
import HookbotTestSupport
import Hummingbird
import HummingbirdWSClient
import IMCore
import IMProto
import Logging
import NIOCore
import Synchronization

/// A raw protocol client for tests, speaking JSON, binary protobuf or base64 protobuf over a real
/// WebSocket. Commands go through the same codecs as the server's.
final class WireClient: Sendable {
    enum Mode: Sendable, CustomStringConvertible {
        case json
        /// Binary frames; the subprotocol offered (`lc.protobuf2.3` or `lc.protobuf2.1`).
        case protobuf(String)
        /// Base64 text frames (`lc.proto2base64.3`).
        case base64

        static let binary = Mode.protobuf("lc.protobuf2.3")

        var subprotocol: String? {
            switch self {
            case .json: nil
            case .protobuf(let name): name
            case .base64: "lc.proto2base64.3"
            }
        }

        var description: String { subprotocol ?? "json" }
    }

    enum Frame: Sendable {
        case text(String)
        case binary([UInt8])
    }

    private struct State {
        /// Frames received, in order, with whether they were binary.
        var frameKinds: [Bool] = []
        var undecodable: [Frame] = []
    }

    let mode: Mode
    private let state = Mutex(State())
    private let inbox = Inbox<Command>()
    private let outbox: AsyncStream<Frame>.Continuation
    private let serial = Atomic<Int>(1)
    private let task: Task<Void, Never>
    private let json = JSONCommandCodec()
    private let protobuf = ProtobufCommandCodec()

    private init(mode: Mode, outbox: AsyncStream<Frame>.Continuation, task: Task<Void, Never>) {
        self.mode = mode
        self.outbox = outbox
        self.task = task
    }

    static func connect(port: Int, mode: Mode) async throws -> WireClient {
        let (frames, outbox) = AsyncStream<Frame>.makeStream()
        let (ready, readyContinuation) = AsyncStream<Void>.makeStream()
        let holder = Mutex<WireClient?>(nil)
        var headers = HTTPFields()
        if let subprotocol = mode.subprotocol { headers[.secWebSocketProtocol] = subprotocol }
        let configuration = WebSocketClientConfiguration(maxFrameSize: 16 << 20, additionalHeaders: headers)
        let task = Task {
            var logger = Logger(label: "wire-client")
            logger.logLevel = .critical
            do {
                _ = try await WebSocketClient.connect(
                    url: "ws://127.0.0.1:\(port)/ws", configuration: configuration, logger: logger
                ) { inbound, outbound, _ in
                    readyContinuation.yield()
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask {
                            for await frame in frames {
                                switch frame {
                                case .text(let text): try await outbound.write(.text(text))
                                case .binary(let bytes): try await outbound.write(.binary(ByteBuffer(bytes: bytes)))
                                }
                            }
                            try await outbound.close(.normalClosure, reason: nil)
                        }
                        for try await message in inbound.messages(maxSize: 16 << 20) {
                            switch message {
                            case .text(let text): holder.withLock { $0 }?.receive(.text(text))
                            case .binary(let buffer): holder.withLock { $0 }?.receive(.binary(Array(buffer.readableBytesView)))
                            }
                        }
                        group.cancelAll()
                    }
                }
            } catch {}
            readyContinuation.finish()
            holder.withLock { $0 }?.markClosed()
        }
        let client = WireClient(mode: mode, outbox: outbox, task: task)
        holder.withLock { $0 = client }
        for await _ in ready { return client }
        throw Timeout(waitingFor: "connection")
    }

    /// Connects and opens a session; returns the client and the `session opened` reply.
    static func login(_ clientID: String, port: Int, mode: Mode, configure: (inout Command) -> Void = { _ in })
        async throws -> WireClient
    {
        let client = try await connect(port: port, mode: mode)
        var open = Command(cmd: .session, op: .open)
        open.peerId = clientID
        configure(&open)
        let reply = try await client.request(open)
        guard reply.op == .opened else { throw IMError(code: reply.code ?? 0, reason: reply.reason ?? "login failed") }
        return client
    }

    private func receive(_ frame: Frame) {
        let commands: [Command]?
        switch (mode, frame) {
        case (.json, .text(let text)): commands = (try? json.decode(text)).map { [$0] }
        case (.protobuf, .binary(let bytes)): commands = try? protobuf.decode(bytes)
        case (.base64, .text(let text)): commands = try? protobuf.decodeBase64(text)
        default: commands = nil
        }
        state.withLock { state in
            if case .binary = frame { state.frameKinds.append(true) } else { state.frameKinds.append(false) }
        }
        guard let commands else {
            state.withLock { $0.undecodable.append(frame) }
            return
        }
        for command in commands { inbox.append(command) }
    }

    private func markClosed() { inbox.close() }

    var isClosed: Bool { inbox.isClosed }
    /// For each frame received so far: binary (true) or text (false).
    var receivedFrameKinds: [Bool] { state.withLock { $0.frameKinds } }
    var undecodableFrames: Int { state.withLock { $0.undecodable.count } }

    func sendFrame(_ frame: Frame) { outbox.yield(frame) }

    func send(_ command: Command) {
        switch mode {
        case .json: outbox.yield(.text(json.encode(command)))
        case .protobuf: outbox.yield(.binary(try! protobuf.encode(command)))
        case .base64: outbox.yield(.text(try! protobuf.encodeBase64(command)))
        }
    }

    /// Sends a `GenericCommand` as built by a LeanCloud SDK.
    func send(_ generic: LCProtoGenericCommand) {
        let bytes: [UInt8] = try! generic.serializedBytes()
        switch mode {
        case .json: fatalError("protobuf only")
        case .protobuf: outbox.yield(.binary(bytes))
        case .base64: outbox.yield(.text(Data(bytes).base64EncodedString()))
        }
    }

    func nextSerial() -> Int { serial.wrappingAdd(1, ordering: .relaxed).oldValue }

    /// Sends a request with a fresh `i` and returns the reply carrying that `i`.
    func request(_ command: Command, timeout: Duration = .seconds(10)) async throws -> Command {
        var command = command
        let i = nextSerial()
        command.i = i
        send(command)
        return try await next(timeout: timeout, "reply to \(command.cmd.rawValue) i=\(i)") { $0.i == i }
    }

    func request(_ generic: LCProtoGenericCommand, timeout: Duration = .seconds(10)) async throws -> Command {
        var generic = generic
        let i = nextSerial()
        generic.i = Int32(i)
        send(generic)
        return try await next(timeout: timeout, "reply to i=\(i)") { $0.i == i }
    }

    func next(
        timeout: Duration = .seconds(10), _ what: String = "command",
        where predicate: @escaping @Sendable (Command) -> Bool
    ) async throws -> Command {
        guard let command = await inbox.take(timeout: timeout, where: predicate) else { throw Timeout(waitingFor: what) }
        return command
    }

    /// Waits briefly, then returns unconsumed commands matching `predicate`.
    func settle(for duration: Duration = .milliseconds(300), where predicate: (Command) -> Bool) async -> [Command] {
        try? await Task.sleep(for: duration)
        return inbox.kept(where: predicate)
    }

    func close() async {
        outbox.finish()
        await task.value
    }
}
