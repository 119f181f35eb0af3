import Hummingbird
import IMCore
import NIOCore
import Telemetry

/// The routes a load balancer and Prometheus use: `GET /health` (alive), `GET /ready` (200, or 503 with
/// the reason `notReady` gives) and `GET /metrics` (the telemetry's exposition). The server's port and a
/// remote bot's console port serve the same three.
public enum Probes {
    public static func register(
        on router: Router<BasicRequestContext>, telemetry: Telemetry,
        notReady: @escaping @Sendable () async -> String?
    ) {
        router.get("/health") { _, _ in "ok" }
        router.get("/ready") { _, _ -> Response in
            let reason = await notReady()
            return HTTPJSON.response(
                reason == nil ? .ok : .serviceUnavailable,
                ["ready": JSONValue.bool(reason == nil), "reason": reason.map(JSONValue.string) ?? .null])
        }
        router.get("/metrics") { _, _ -> Response in
            Response(
                status: .ok, headers: [.contentType: Telemetry.contentType],
                body: .init(byteBuffer: ByteBuffer(string: telemetry.exposition())))
        }
    }
}
