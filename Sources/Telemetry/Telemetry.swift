import CoreMetrics
import Prometheus

/// The metrics of one server or bot process: a Prometheus registry, and the swift-metrics factory the
/// server, the plugin runtime and the bot host record into. Each instance is independent (no global
/// bootstrap), so several servers in one process, as in the tests, keep separate counts.
public final class Telemetry: Sendable {
    public let registry: PrometheusCollectorRegistry
    public let factory: any MetricsFactory

    /// Histogram buckets: hooks and deliveries take microseconds to milliseconds; slow ones up to seconds.
    public static let durationBuckets: [Duration] = [
        .microseconds(50), .microseconds(100), .microseconds(250), .microseconds(500),
        .milliseconds(1), .milliseconds(2.5), .milliseconds(5), .milliseconds(10), .milliseconds(25),
        .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5),
    ]
    /// Buckets of size histograms (messages per commit).
    public static let sizeBuckets: [Double] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]

    public init() {
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = Self.durationBuckets
        factory.defaultValueHistogramBuckets = Self.sizeBuckets
        self.factory = factory
    }

    /// The Prometheus text exposition (format 0.0.4) of every metric recorded so far.
    public func exposition() -> String {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(16 * 1024)
        registry.emit(into: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }

    /// The content type of `exposition()`.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"
}
