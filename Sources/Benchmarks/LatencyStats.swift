/// Latency samples in milliseconds, summarised as percentiles.
struct LatencyStats: Encodable {
    var count: Int
    var p50: Double
    var p90: Double
    var p99: Double
    var max: Double

    init(_ samples: [Double]) {
        let sorted = samples.sorted()
        count = sorted.count
        func percentile(_ p: Double) -> Double {
            guard !sorted.isEmpty else { return 0 }
            let index = min(sorted.count - 1, Int((p * Double(sorted.count)).rounded(.up)) - 1)
            return Self.round(sorted[Swift.max(0, index)])
        }
        p50 = percentile(0.50)
        p90 = percentile(0.90)
        p99 = percentile(0.99)
        max = Self.round(sorted.last ?? 0)
    }

    static func round(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }
}

extension Duration {
    var milliseconds: Double {
        let parts = components
        return Double(parts.seconds) * 1000 + Double(parts.attoseconds) / 1e15
    }
}
