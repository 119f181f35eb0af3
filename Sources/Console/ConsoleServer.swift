import Hummingbird
import IMServer
import Logging
import NIOCore
import ServiceLifecycle
import Telemetry

/// The console's own HTTP listener, for a bot whose IM server runs elsewhere (`hookbot run --server`):
/// the page, the admin API, webhooks, `/metrics`, `/health` and `/ready` on `[console] host` and `port`.
public final class ConsoleServer: Sendable {
    private let group: ServiceGroup
    private let task: Task<Void, any Error>
    /// The bound port.
    public let port: Int

    private init(group: ServiceGroup, task: Task<Void, any Error>, port: Int) {
        self.group = group
        self.task = task
        self.port = port
    }

    /// Starts listening (port 0: a free one) and returns once bound.
    public static func start(
        console: Console?, webhooks: Webhooks? = nil, readiness: @escaping @Sendable () async -> String?,
        telemetry: Telemetry, host: String, port: Int, logger: Logger
    ) async throws -> ConsoleServer {
        let router = Router()
        Probes.register(on: router, telemetry: telemetry, notReady: readiness)
        console?.register(on: router)
        webhooks?.register(on: router)
        let (ports, bound) = AsyncStream<Int>.makeStream()
        let app = Application(
            router: router, configuration: .init(address: .hostname(host, port: port), serverName: "hookbot-console"),
            onServerRunning: { channel in
                bound.yield(channel.localAddress?.port ?? 0)
                bound.finish()
            }, logger: logger)
        let group = ServiceGroup(configuration: .init(services: [app], logger: logger))
        let task = Task {
            defer { bound.finish() }
            try await group.run()
        }
        for await port in ports { return ConsoleServer(group: group, task: task, port: port) }
        _ = try await task.value
        throw ConsoleServerError(message: "the console could not listen on \(host):\(port)")
    }

    /// Stops listening and waits until the listener has shut down.
    public func stop() async {
        await group.triggerGracefulShutdown()
        _ = try? await task.value
    }
}

struct ConsoleServerError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
