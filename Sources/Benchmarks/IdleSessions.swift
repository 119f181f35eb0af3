import ChildProcesses
import Foundation
import IMCore
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
import Synchronization

/// The `idle` workload's result: the server's resident size with 0, then `steps` idle logged-in sessions.
struct IdleSessionsResult: Encodable {
    struct Step: Encodable {
        var sessions: Int
        var rssMB: Double
        /// (RSS now − RSS with no session) / sessions.
        var kbPerSession: Double
        /// Logins per second while this step's sessions were opened.
        var loginsPerSecond: Double
    }

    /// Source addresses the clients connected from (127.0.0.2 …).
    var addresses: Int
    var emptyRSSMB: Double
    var steps: [Step]
    /// Least-squares slope of RSS over sessions across the steps (the empty server excluded): what one more
    /// idle session costs.
    var slopeKBPerSession: Double
}

/// Opens thousands of idle, logged-in WebSocket sessions against a separate `hookbot server` process and
/// reads its resident size (`VmRSS`) at each step, so the number is the server's alone.
///
/// The clients are bare SwiftNIO channels (HTTP upgrade, one masked login frame, pongs to the server's pings),
/// a few KB each in the benchmark's process: an `IMClient` per session would cost far more than the server's
/// session and make 15,000 of them slow to open.
struct IdleSessionsBenchmark {
    let root: URL
    let steps: [Int]
    /// Loopback source addresses to spread the sessions over (127.0.0.2 …), so no address runs out of
    /// ephemeral ports and the server's per-address cap stays meaningful.
    var addresses = 8
    /// Logins in flight at once.
    var concurrency = 200

    func run() async throws -> IdleSessionsResult {
        // Each session is a descriptor in this process and one in the server's (which inherits the limit):
        // raise the soft limit to the hard one, and leave out steps that would not fit under it.
        let descriptors = Self.raiseDescriptorLimit()
        let steps = steps.filter { UInt64($0) + 256 <= descriptors }
        guard !steps.isEmpty else {
            throw BenchError(message: "the descriptor limit (ulimit -n \(descriptors)) is too low for \(self.steps.min() ?? 0) sessions")
        }
        let total = steps.max() ?? 0
        let (process, port) = try Self.startServer(in: root.appendingPathComponent("idle"), perAddress: total / addresses + 64)
        defer {
            process.signal()
            _ = process.waitUntilExit()
        }
        let clients = IdleClients(group: MultiThreadedEventLoopGroup.singleton, port: port)
        defer { clients.closeAll() }
        // Wait for the server to listen: one session, closed again (a login touches the store once).
        var ready = false
        for _ in 0..<200 where !ready {
            do {
                try await clients.open(id: "idle-probe", from: "127.0.0.1", keep: false)
                ready = true
            } catch {
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        guard ready else { throw BenchError(message: "hookbot server did not accept a login on port \(port)") }
        try await Task.sleep(for: .seconds(1))
        let empty = try Self.rssKB(process.processIdentifier)
        var results: [IdleSessionsResult.Step] = []
        var opened = 0
        let clock = ContinuousClock()
        for step in steps.sorted() where step > opened {
            let started = clock.now
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                var inFlight = 0
                for index in opened..<step {
                    if inFlight == concurrency {
                        try await tasks.next()
                        inFlight -= 1
                    }
                    let address = "127.0.0.\(2 + index % addresses)"
                    tasks.addTask { try await clients.open(id: "idle-\(index)", from: address, keep: true) }
                    inFlight += 1
                }
                try await tasks.waitForAll()
            }
            let seconds = (clock.now - started).milliseconds / 1000
            let loginsPerSecond = (Double(step - opened) / seconds).rounded()
            opened = step
            // Let what the logins allocated settle (glibc trims and the server's queues drain).
            try await Task.sleep(for: .seconds(2))
            let rss = try Self.rssKB(process.processIdentifier)
            results.append(
                .init(
                    sessions: step, rssMB: Self.round(rss / 1024, 1), kbPerSession: Self.round((rss - empty) / Double(step), 1),
                    loginsPerSecond: loginsPerSecond))
        }
        // One step (a low descriptor limit): its sessions' share of the growth instead.
        let slope = results.count == 1 ? results[0].kbPerSession : Self.slope(results.map { (Double($0.sessions), $0.rssMB * 1024) })
        return IdleSessionsResult(
            addresses: addresses, emptyRSSMB: Self.round(empty / 1024, 1), steps: results, slopeKBPerSession: Self.round(slope, 1))
    }

    static func round(_ value: Double, _ digits: Int) -> Double {
        let scale = pow(10, Double(digits))
        return (value * scale).rounded() / scale
    }

    /// Least-squares slope of y over x (at least two points).
    static func slope(_ points: [(x: Double, y: Double)]) -> Double {
        let n = Double(points.count)
        let mx = points.map(\.x).reduce(0, +) / n
        let my = points.map(\.y).reduce(0, +) / n
        let sxy = points.map { ($0.x - mx) * ($0.y - my) }.reduce(0, +)
        let sxx = points.map { ($0.x - mx) * ($0.x - mx) }.reduce(0, +)
        return sxx == 0 ? 0 : sxy / sxx
    }

    /// The resident size of process `pid` in KB (`VmRSS`).
    /// Raises this process's soft descriptor limit to the hard one (a server child inherits it); gives the new limit.
    static func raiseDescriptorLimit() -> UInt64 {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        limit.rlim_cur = limit.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        return UInt64(limit.rlim_cur)
    }

    /// Starts `hookbot server` (this executable) as a child process on a random port, its SQLite file in `directory`,
    /// allowing `perAddress` connections from one address. `HOOKBOT_BENCH_IDLE_SERVER` names another build's binary
    /// to run instead (a before/after comparison in one sitting).
    static func startServer(in directory: URL, perAddress: Int) throws -> (process: ChildProcess, port: Int) {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let port = Int.random(in: 30000..<60000)
        let executable =
            ProcessInfo.processInfo.environment["HOOKBOT_BENCH_IDLE_SERVER"].map { URL(fileURLWithPath: $0) }
            ?? URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        let process = try ChildProcess(
            executable,
            [
                "server", "--port", "\(port)", "--db", directory.appendingPathComponent("s.sqlite").path, "--log-level", "error",
                "--max-connections-per-address", "\(perAddress)",
            ],
            output: .inherited, error: .inherited)
        return (process, port)
    }

    static func rssKB(_ pid: Int32) throws -> Double {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kilobytes = line.split(separator: " ").dropFirst().first.flatMap({ Double($0) })
        else { throw BenchError(message: "no VmRSS in /proc/\(pid)/status") }
        return kilobytes
    }
}

/// The bare WebSocket clients of the idle workload (on NIO's shared event loops).
final class IdleClients: Sendable {
    private let group: MultiThreadedEventLoopGroup
    private let port: Int
    private let channels = Mutex<[any Channel]>([])

    init(group: MultiThreadedEventLoopGroup, port: Int) {
        self.group = group
        self.port = port
    }

    /// Connects from `source` to the server, upgrades to a WebSocket (JSON), logs in as `id` and returns
    /// once the server answered `session opened`. With `keep`, the session stays open (answering pings)
    /// until `closeAll`.
    func open(id: String, from source: String, keep: Bool) async throws {
        _ = try await connect(id: id, from: source, then: [], keep: keep)
    }

    /// Like `open`, then sends each step's frame and waits for an answer containing its `until`; returns the
    /// channel and the last answer. Text frames that arrive afterwards go to `received`.
    func connect(
        id: String, from source: String, then steps: [IdleSessionStep], keep: Bool = true,
        received: (@Sendable (ByteBuffer) -> Void)? = nil
    ) async throws -> (channel: any Channel, answer: String) {
        let loggedIn = group.next().makePromise(of: String.self)
        var login = Command(cmd: .session, op: .open, i: 1)
        login.peerId = id
        let steps = [IdleSessionStep(send: JSONCommandCodec().encode(login), until: #""opened""#)] + steps
        let upgrader = NIOWebSocketClientUpgrader(
            maxFrameSize: 1 << 20,
            upgradePipelineHandler: { channel, _ in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(IdleSessionHandler(steps: steps, done: loggedIn, received: received))
                }
            })
        let bootstrap = ClientBootstrap(group: group)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .bind(to: try SocketAddress(ipAddress: source, port: 0))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers(
                        withClientUpgrade: (upgraders: [upgrader], completionHandler: { _ in }))
                    try channel.pipeline.syncOperations.addHandler(UpgradeRequester(port: self.port, failed: loggedIn))
                }
            }
        let channel: any Channel
        do {
            channel = try await bootstrap.connect(host: "127.0.0.1", port: port).get()
        } catch {
            // A server not listening yet: the caller tries again; the promise must not be left (NIO's debug builds
            // stop the process on a leaked promise).
            loggedIn.fail(error)
            throw error
        }
        let deadline = channel.eventLoop.scheduleTask(in: .seconds(60)) {
            loggedIn.fail(BenchError(message: "session \(id) not logged in after 60 s"))
        }
        loggedIn.futureResult.whenComplete { _ in deadline.cancel() }
        channel.closeFuture.whenComplete { _ in loggedIn.fail(BenchError(message: "session \(id) closed before its login")) }
        let answer: String
        do {
            answer = try await loggedIn.futureResult.get()
        } catch {
            channel.close(promise: nil)
            throw error
        }
        if keep { channels.withLock { $0.append(channel) } } else { try? await channel.close() }
        return (channel, answer)
    }

    /// Sends a text frame (masked, as a client does) on `channel`.
    static func send(_ text: String, on channel: any Channel) {
        let frame = WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: ByteBuffer(string: text))
        channel.writeAndFlush(frame, promise: nil)
    }

    func closeAll() {
        for channel in channels.withLock({ $0 }) { channel.close(promise: nil) }
    }
}

/// Sends the upgrade request once the TCP connection is up, and fails the login on any error (a refused
/// upgrade among them); passes everything read on.
private final class UpgradeRequester: ChannelInboundHandler {
    typealias InboundIn = NIOAny
    typealias OutboundOut = HTTPClientRequestPart
    let port: Int
    let failed: EventLoopPromise<String>

    init(port: Int, failed: EventLoopPromise<String>) {
        self.port = port
        self.failed = failed
    }

    func channelActive(context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: "127.0.0.1:\(port)")
        headers.add(name: "Content-Length", value: "0")
        context.write(wrapOutboundOut(.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: "/ws", headers: headers))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        context.fireChannelActive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failed.fail(BenchError(message: "session failed: \(error)"))
        context.close(promise: nil)
    }
}

/// A frame a client sends after its login, and what the answer it waits for contains.
struct IdleSessionStep: Sendable {
    var send: String
    var until: String
}

/// After the upgrade: sends the login and each step, waiting for its answer; then hands text frames to
/// `received`, and answers pings.
private final class IdleSessionHandler: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame
    let steps: [IdleSessionStep]
    var next = 0
    let done: EventLoopPromise<String>
    let received: (@Sendable (ByteBuffer) -> Void)?

    init(steps: [IdleSessionStep], done: EventLoopPromise<String>, received: (@Sendable (ByteBuffer) -> Void)?) {
        self.steps = steps
        self.done = done
        self.received = received
    }

    func handlerAdded(context: ChannelHandlerContext) {
        send(steps[0].send, context: context)
    }

    private func send(_ text: String, context: ChannelHandlerContext) {
        let data = context.channel.allocator.buffer(string: text)
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: data)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .ping:
            let pong = WebSocketFrame(fin: true, opcode: .pong, maskKey: .random(), data: frame.unmaskedData)
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
        case .text where next == steps.count:
            received?(frame.unmaskedData)
        case .text:
            let text = String(buffer: frame.unmaskedData)
            if text.contains(steps[next].until) {
                next += 1
                if next == steps.count { done.succeed(text) } else { send(steps[next].send, context: context) }
            } else if text.contains(#""cmd":"error""#) || text.contains(#""op":"closed""#) {
                done.fail(BenchError(message: "refused: \(text)"))
            }
        case .connectionClose:
            context.close(promise: nil)
        default:
            break
        }
    }
}
