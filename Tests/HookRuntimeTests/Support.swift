import Foundation
import IMCore
import Logging
import XCTest

@testable import HookRuntime

/// A temporary plugins directory plus a state file and a manual clock.
final class Fixture: @unchecked Sendable {
    let root: URL
    let plugins: URL
    let dbPath: String
    let clock = ManualClock()
    private(set) lazy var store: HookStateStore = try! HookStateStore(path: dbPath)

    init() {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("hookrt-\(UUID().uuidString)")
        plugins = root.appendingPathComponent("plugins")
        try! FileManager.default.createDirectory(at: plugins, withIntermediateDirectories: true)
        dbPath = root.appendingPathComponent("state.sqlite").path
    }

    deinit { try? FileManager.default.removeItem(at: root) }

    func write(_ rel: String, _ source: String) {
        let url = plugins.appendingPathComponent(rel)
        try! FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try! source.write(to: url, atomically: true, encoding: .utf8)
    }

    func remove(_ rel: String) {
        try! FileManager.default.removeItem(at: plugins.appendingPathComponent(rel))
    }

    /// The runtime a running bot uses: the engine on its own Lua thread.
    func threadedRuntime(limits: HookLimits = .default) -> PluginRuntime {
        PluginRuntime(
            directory: plugins, store: store, limits: limits, clock: clock.clock,
            logger: Logger(label: "hookbot.plugins", factory: { _ in SwiftLogNoOpLogHandler() }))
    }

    func runtime(
        limits: HookLimits = .default, config: [String: JSONValue] = [:],
        store: HookStateStore? = nil
    ) -> PluginEngine {
        PluginEngine(
            directory: plugins, store: store ?? self.store, config: config, limits: limits,
            clock: clock.clock, logLevel: .critical)
    }
}

/// Small limits so failure tests stay fast.
let testLimits = HookLimits(
    instructionBudget: 2_000_000, deadline: 2.0, loadDeadline: 5.0,
    memoryBytes: 8 * 1024 * 1024)

func msg(
    _ text: String?, id: String = UUID().uuidString, cid: String = "c1", from: String = "u1",
    type: Int = MessageType.text.rawValue, attrs: [String: JSONValue] = [:]
) -> HookMessage {
    HookMessage(id: id, cid: cid, from: from, type: type, text: text, attrs: attrs, timestamp: 1_700_000_000_000)
}

/// Texts of send/reply actions, in order.
func sentTexts(_ actions: [HookAction]) -> [String] {
    actions.compactMap { a in
        switch a.kind {
        case .send(_, let m, _), .sendTransient(_, let m): return m.text
        default: return nil
        }
    }
}

func logMessages(_ actions: [HookAction]) -> [String] {
    actions.compactMap { a in
        if case .log(_, let m) = a.kind { return m }
        return nil
    }
}

extension PluginEngine {
    func status(_ name: String) -> PluginStatus? { plugins.first { $0.name == name } }
}
