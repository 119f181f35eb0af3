import CoreMetrics
import Dispatch

/// Calls, failures and time of one hook of one plugin (counted since the runtime started, across reloads);
/// the admin API and `hookbot plugins` encode it as it is.
public struct HookUsage: Sendable, Hashable, Encodable {
    /// The hook's Lua name (`on_receive`, …), or `timer` for timer callbacks.
    public var name: String
    public var calls: Int
    public var failures: Int
    public var totalMillis: Double
    public var maxMillis: Double

    /// A hook's usage; all zero for one never called.
    public init(name: String, calls: Int = 0, failures: Int = 0, totalMillis: Double = 0, maxMillis: Double = 0) {
        self.name = name
        self.calls = calls
        self.failures = failures
        self.totalMillis = totalMillis
        self.maxMillis = maxMillis
    }
}

/// What one plugin's hooks cost, kept by the engine per plugin name so it survives reloads, and recorded
/// as metrics (`hookbot_hook_calls_total`, `hookbot_hook_failures_total`, `hookbot_hook_duration_seconds`,
/// labelled by plugin and hook). Used on the runtime's thread only.
final class PluginUsage {
    private struct Slot {
        var calls = 0
        var failures = 0
        var nanos: UInt64 = 0
        var maxNanos: UInt64 = 0
    }

    /// A class, so that a call reads its slot's handles with one retain instead of copying three.
    private final class Handles {
        let calls: Counter
        let failures: Counter
        let duration: Timer
        init(dimensions: [(String, String)], factory: any MetricsFactory) {
            calls = Counter(label: "hookbot_hook_calls_total", dimensions: dimensions, factory: factory)
            failures = Counter(label: "hookbot_hook_failures_total", dimensions: dimensions, factory: factory)
            duration = Timer(label: "hookbot_hook_duration_seconds", dimensions: dimensions, factory: factory)
        }
    }

    /// The slots of timer callbacks and of commands, after the hooks'.
    static let timerSlot = HookName.allCases.count
    static let commandSlot = HookName.allCases.count + 1
    static let httpSlot = HookName.allCases.count + 2

    let plugin: String
    private let factory: any MetricsFactory
    @exclusivity(unchecked) private var slots = [Slot](repeating: Slot(), count: HookName.allCases.count + 3)
    /// Metric handles per slot, made at the slot's first call.
    @exclusivity(unchecked) private var handles = [Handles?](repeating: nil, count: HookName.allCases.count + 3)
    /// Times the circuit breaker disabled the plugin.
    private(set) var breakerTrips = 0
    private let trips: Counter
    private let loads: (ok: Counter, failed: Counter)

    init(plugin: String, factory: any MetricsFactory) {
        self.plugin = plugin
        self.factory = factory
        trips = Counter(label: "hookbot_plugin_breaker_trips_total", dimensions: [("plugin", plugin)], factory: factory)
        loads = (
            Counter(label: "hookbot_plugin_loads_total", dimensions: [("plugin", plugin), ("result", "ok")], factory: factory),
            Counter(label: "hookbot_plugin_loads_total", dimensions: [("plugin", plugin), ("result", "failed")], factory: factory)
        )
    }

    /// Nanoseconds on a monotonic clock.
    @inline(__always) static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// Records one call of the hook in `slot` (`HookName.rawValue` or `timerSlot`) that took `nanos`
    /// (`hb_limits.last_nanos`: the sandbox's limited calls measure themselves).
    func record(slot index: Int, nanos: UInt64, failed: Bool) {
        slots[index].calls += 1
        slots[index].nanos &+= nanos
        if nanos > slots[index].maxNanos { slots[index].maxNanos = nanos }
        if failed { slots[index].failures += 1 }
        let metrics: Handles
        if let made = handles[index] {
            metrics = made
        } else {
            metrics = Handles(dimensions: [("plugin", plugin), ("hook", Self.name(of: index))], factory: factory)
            handles[index] = metrics
        }
        metrics.calls.increment()
        if failed { metrics.failures.increment() }
        metrics.duration.recordNanoseconds(Int64(clamping: nanos))
    }

    func breakerTripped() {
        breakerTrips += 1
        trips.increment()
    }

    func loaded(ok: Bool) { (ok ? loads.ok : loads.failed).increment() }

    /// The plugin's HTTP calls.
    private(set) var http = HTTPUsage()
    func httpStarted() {
        http.started += 1
        http.inFlight += 1
    }
    func httpRefused() { http.refused += 1 }
    func httpFinished(failed: Bool) {
        http.inFlight = max(0, http.inFlight - 1)
        if failed { http.failed += 1 }
    }

    /// The hooks called at least once.
    var hooks: [HookUsage] {
        slots.indices.compactMap { index in
            let slot = slots[index]
            guard slot.calls > 0 else { return nil }
            return HookUsage(
                name: Self.name(of: index), calls: slot.calls, failures: slot.failures,
                totalMillis: Double(slot.nanos) / 1e6, maxMillis: Double(slot.maxNanos) / 1e6)
        }
    }

    private static func name(of slot: Int) -> String {
        switch slot {
        case timerSlot: "timer"
        case commandSlot: "command"
        case httpSlot: "http_callback"
        default: HookName.allCases[slot].luaName
        }
    }
}
