import HookbotTestSupport
import Hummingbird
import Logging
import ServiceLifecycle

/// Serves `responder` on a free loopback port, logging only critical messages, until the group is shut down;
/// gives the running group and the port once it listens. (The tests' stand-ins for other web servers.)
func startLoopbackWebServer<Responder: HTTPResponder>(
    _ responder: Responder, label: String
) async throws -> (ServiceGroup, Int) where Responder.Context == BasicRequestContext {
    let (ports, bound) = AsyncStream<Int>.makeStream()
    var logger = Logger(label: label)
    logger.logLevel = .critical
    let app = Application(
        responder: responder, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { channel in
            bound.yield(channel.localAddress?.port ?? 0)
            bound.finish()
        }, logger: logger)
    let group = ServiceGroup(configuration: .init(services: [app], logger: logger))
    Task { try await group.run() }
    for await port in ports { return (group, port) }
    throw Timeout(waitingFor: label)
}
