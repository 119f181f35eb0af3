import Foundation
import IMCore
import Logging
import Synchronization
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

extension XCTestCase {
    /// Most tests' setup in one call: a new `Fixture` holding one plugin file, and an engine on it that loaded it.
    /// A load error fails the test at the caller's line. The fixture (its files, state and clock) lives until the
    /// test ends, so a caller that needs only the engine can write `let (_, rt) = loaded(…)`.
    func loaded(
        _ name: String, _ source: String, limits: HookLimits = .default, config: [String: JSONValue] = [:],
        file: StaticString = #filePath, line: UInt = #line
    ) -> (Fixture, PluginEngine) {
        loaded([name: source], limits: limits, config: config, file: file, line: line)
    }

    /// `loaded(_:_:)` for several plugin files (path → source, written in this order).
    func loaded(
        _ plugins: KeyValuePairs<String, String>, limits: HookLimits = .default, config: [String: JSONValue] = [:],
        file: StaticString = #filePath, line: UInt = #line
    ) -> (Fixture, PluginEngine) {
        let fixture = Fixture()
        // Held until the test ends, then let go: XCTest on Linux keeps teardown blocks until the process ends, and a
        // block that captured the fixture kept its state file open and its folder on disk for the rest of the run.
        let held = Mutex<Fixture?>(fixture)
        addTeardownBlock { _ = held.withLock { $0.take() } }
        for (name, source) in plugins { fixture.write(name, source) }
        let engine = fixture.runtime(limits: limits, config: config)
        XCTAssertEqual(engine.loadAll().errors, [], "loading \(plugins.map(\.0))", file: file, line: line)
        return (fixture, engine)
    }

    /// Runs `body` (Lua, with `ctx` in scope) under `pcall` in a hook of a new plugin and gives its reply,
    /// `ok|result` with the result rendered by the Lua function `render` (`prelude` may define it); `files` are
    /// written into the plugins directory first (presets, libraries). A load or hook error fails the test.
    func probe(
        _ body: String, prelude: String = "", render: String = "tostring", files: [String: String] = [:],
        limits: HookLimits = testLimits, file: StaticString = #filePath, line: UInt = #line
    ) -> String {
        let f = Fixture()
        for (path, text) in files { f.write(path, text) }
        f.write(
            "probe.lua",
            """
            \(prelude)
            return { on_receive = function(msg, ctx)
              local ok, res = pcall(function()
                \(body)
              end)
              ctx.reply(tostring(ok) .. "|" .. \(render)(res))
            end }
            """)
        let rt = f.runtime(limits: limits)
        XCTAssertEqual(rt.loadAll().errors, [], file: file, line: line)
        let r = rt.receive(msg("x"))
        XCTAssertEqual(r.errors, [], file: file, line: line)
        return sentTexts(r.actions).first ?? "<no reply>"
    }
}

/// A value a test shares with its callbacks and tasks, behind a lock.
final class Shared<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value

    init(_ value: Value) { stored = value }

    var value: Value {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }

    func update(_ change: (inout Value) -> Void) { lock.withLock { change(&stored) } }
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
