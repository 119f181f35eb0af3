import BotRouting
import Foundation
import HookRuntime
import IMCore
import Logging

/// Runs plugin scenario files (`*.test.lua`) in process: each case gets a fresh copy of the plugins it
/// names, a fresh state store and a manual clock, and its steps go through a simulated bot host.
public final class PluginTestRunner {
    public struct CaseResult: Sendable {
        public var file: String
        public var name: String
        public var passed: Bool
        /// Failure report (step, event, differences); empty when passed.
        public var details: [String]
        public var seconds: Double
    }

    public struct Summary: Sendable {
        public var results: [CaseResult] = []
        public var passed: Int { results.filter(\.passed).count }
        public var failed: Int { results.count - passed }
        public var line: String { "\(passed) passed, \(failed) failed" }
    }

    public var filter: String?
    public var verbose = false
    private let output: (String) -> Void
    private let logLevel: Logger.Level

    /// - Parameters:
    ///   - output: receives each line of the report (default: standard output).
    ///   - logLevel: level of the plugins' logger (their `ctx.log` lines are also in each step's `logs`).
    public init(
        filter: String? = nil, verbose: Bool = false, logLevel: Logger.Level = .critical,
        output: @escaping (String) -> Void = { print($0) }
    ) {
        self.filter = filter
        self.verbose = verbose
        self.logLevel = logLevel
        self.output = output
    }

    /// Scenario files under each path (a `*.test.lua` file, or a directory searched recursively), with
    /// the plugins directory each one belongs to.
    public static func discover(_ paths: [String], pluginsDirectory: String? = nil) throws -> [(file: URL, plugins: URL)] {
        let fm = FileManager.default
        var out: [(URL, URL)] = []
        for path in paths {
            let url = URL(fileURLWithPath: path).standardizedFileURL
            var isDir: ObjCBool = false
            guard fm.fileExists(atPath: url.path, isDirectory: &isDir) else { throw ScenarioError("no such file or directory: \(path)") }
            if !isDir.boolValue {
                out.append((url, pluginsDirectory.map { URL(fileURLWithPath: $0) } ?? guessPluginsDirectory(for: url)))
                continue
            }
            let root = pluginsDirectory.map { URL(fileURLWithPath: $0) } ?? url
            guard let walker = fm.enumerator(at: url, includingPropertiesForKeys: nil) else { continue }
            var files: [URL] = []
            for case let f as URL in walker where f.lastPathComponent.hasSuffix(".test.lua") { files.append(f.standardizedFileURL) }
            out += files.sorted { $0.path < $1.path }.map { ($0, root) }
        }
        return out
    }

    /// `plugins/tests/x.test.lua` and `plugins/poll/x.test.lua` (inside a folder plugin) belong to `plugins/`.
    static func guessPluginsDirectory(for file: URL) -> URL {
        let dir = file.deletingLastPathComponent()
        let fm = FileManager.default
        if dir.lastPathComponent == "tests" || fm.fileExists(atPath: dir.appendingPathComponent("init.lua").path) {
            return dir.deletingLastPathComponent()
        }
        return dir
    }

    /// Runs every case of every scenario under `paths` and prints `PASS`/`FAIL` lines and the summary.
    public func run(paths: [String], pluginsDirectory: String? = nil) async -> Summary {
        var summary = Summary()
        let files: [(file: URL, plugins: URL)]
        do { files = try Self.discover(paths, pluginsDirectory: pluginsDirectory) } catch {
            summary.results.append(
                CaseResult(
                    file: paths.joined(separator: " "), name: "discover", passed: false,
                    details: ["\(error)"], seconds: 0))
            output("FAIL \(error)")
            output(summary.line)
            return summary
        }
        if files.isEmpty { output("no *.test.lua files under \(paths.joined(separator: ", "))") }
        for entry in files { summary.results += await runFile(entry.file, pluginsDirectory: entry.plugins) }
        output(summary.line)
        return summary
    }

    /// Runs one scenario file.
    public func runFile(_ file: URL, pluginsDirectory: URL) async -> [CaseResult] {
        let name = file.lastPathComponent
        let base = String(name.dropLast(".test.lua".count))
        let lua: LuaDataSandbox
        let scenario: Scenario
        do {
            lua = try LuaDataSandbox(globals: ["NIL": Scenario.absentMarker])
            scenario = try Scenario(
                data: try lua.evaluate(file: file.path, as: "scenario"), path: file.path,
                pluginsDirectory: pluginsDirectory, defaultPlugin: base)
        } catch {
            output("FAIL \(name): \(error)")
            return [CaseResult(file: file.path, name: name, passed: false, details: ["\(error)"], seconds: 0)]
        }
        var results: [CaseResult] = []
        for testCase in scenario.cases {
            let title = "\(base): \(testCase.name)"
            if let filter, !title.localizedCaseInsensitiveContains(filter) { continue }
            let start = Date()
            var details: [String]
            do { details = try await run(testCase, of: scenario, lua: lua) } catch { details = ["\(error)"] }
            let result = CaseResult(
                file: file.path, name: title, passed: details.isEmpty, details: details,
                seconds: Date().timeIntervalSince(start))
            results.append(result)
            output((result.passed ? "PASS " : "FAIL ") + title)
            for line in details {
                output(line.split(separator: "\n", omittingEmptySubsequences: false).map { "  " + $0 }.joined(separator: "\n"))
            }
        }
        return results
    }

    // MARK: one case

    private func run(_ testCase: Scenario.TestCase, of scenario: Scenario, lua: LuaDataSandbox) async throws -> [String] {
        let fm = FileManager.default
        let sandbox = fm.temporaryDirectory.appendingPathComponent("hookbot-test-\(UUID().uuidString)")
        defer { try? fm.removeItem(at: sandbox) }
        let clock = ManualClock()
        let recorder = StepRecorder()
        var logger = Logger(label: "hookbot.test")
        logger.logLevel = logLevel
        var limits = HookLimits.default
        limits.deadline = scenario.deadline
        let transport = RecordedHTTP(recordings: testCase.http, recorder: recorder)
        // The hosts of the recorded calls are every plugin's allow-list; other hosts are refused as in a bot.
        let policy = HTTPPolicy(hosts: Set(testCase.http.keys.compactMap(RecordedHTTP.host)))
        var bots: [SimulatedBot] = []
        var mainStore: HookStateStore?
        for (index, member)
            in ([Scenario.Bot(id: scenario.bot, plugins: scenario.plugins, config: testCase.config)]
            + scenario.bots).enumerated()
        {
            let home = sandbox.appendingPathComponent(member.id)
            let pluginsDir = home.appendingPathComponent("plugins")
            try fm.createDirectory(at: pluginsDir, withIntermediateDirectories: true)
            try copyPlugins(member.plugins, from: scenario.pluginsDirectory, to: pluginsDir)
            let store = try HookStateStore(path: home.appendingPathComponent("state.sqlite").path)
            if index == 0 { mainStore = store }
            let runtime = PluginRuntime(
                directory: pluginsDir, store: store, config: member.config, limits: limits,
                clock: clock.clock, logger: logger, botID: member.id, http: transport,
                httpPolicies: Dictionary(uniqueKeysWithValues: member.plugins.map { ($0, policy) }),
                media: ScenarioMedia(files: testCase.files))
            try testCase.members.install(in: runtime.members, store: store, now: clock.now)
            await runtime.setDefaultLocale(scenario.locale)
            let settings = RoutingSettings(
                botID: member.id, intercepting: index == 0 && testCase.mode == .interceptor,
                maxHops: scenario.maxHops, replyLimit: scenario.replyLimit,
                replyWindow: scenario.replyWindow,
                translateTo: index == 0 ? testCase.translateTo : [:])
            bots.append(
                SimulatedBot(
                    id: member.id, runtime: runtime, settings: settings, recorder: recorder, main: index == 0,
                    logger: logger))
        }
        guard let store = mainStore else { return [] }
        let host = SimulatedHost(bots: bots, recorder: recorder, clock: clock, scenario: scenario)
        do {
            let details = try await run(testCase, on: host, store: store, lua: lua)
            await host.shutdown()
            return details
        } catch {
            await host.shutdown()
            throw error
        }
    }

    /// Loads the plugins of every bot, then runs the steps; the differences, or nothing when all matched.
    private func run(
        _ testCase: Scenario.TestCase, on host: SimulatedHost, store: HookStateStore,
        lua: LuaDataSandbox
    ) async throws -> [String] {
        let scenario = host.scenario
        let clock = host.clock
        var loadErrors: [HookError] = []
        let loaded = await host.record {
            for bot in host.bots {
                let router = bot.router
                await bot.runtime.onAsyncResults { result in await router.finish(result) }
                let report = await bot.runtime.loadAll()
                loadErrors += report.errors
                await bot.router.finish(HookResult(actions: report.actions))
            }
        }
        if !loadErrors.isEmpty { return loadErrors.map { "load failed: \($0)" } }
        let mainPlugin = scenario.plugins.first ?? ""
        if verbose { output("  load: " + Render.lua(.object(loaded.summary))) }
        let expectations = Expectations(lua: lua)
        let state = { (plugin: String?, key: String) -> JSONValue? in
            (try? store.get(plugin: plugin ?? mainPlugin, key: key, now: clock.now)) ?? nil
        }
        let loadFailures = expectations.check(testCase.expectLoad, actual: loaded.json, state: state, mainPlugin: mainPlugin)
        if !loadFailures.isEmpty { return ["load:"] + loadFailures.map { "  " + $0 } }
        for step in testCase.steps {
            let media = ScenarioMedia(files: testCase.files)
            let outcome = try await host.record { try await perform(step.event, on: host, media: media) }
            if verbose { output("  step \(step.number): " + Render.lua(.object(outcome.summary))) }
            let failures = expectations.check(step.expect, actual: outcome.json, state: state, mainPlugin: mainPlugin)
            if !failures.isEmpty {
                return ["step \(step.number) (\(describe(step.event))):"] + failures.map { "  " + $0 }
            }
        }
        return []
    }

    private func copyPlugins(_ names: [String], from source: URL, to target: URL) throws {
        let fm = FileManager.default
        // Shared modules (`require`) and the matcher's preset word lists (`ctx.matcher{presets = …}`).
        for folder in ["lib", "presets"] {
            let shared = source.appendingPathComponent(folder)
            if fm.fileExists(atPath: shared.path) { try fm.copyItem(at: shared, to: target.appendingPathComponent(folder)) }
        }
        for name in names {
            let folder = source.appendingPathComponent(name)
            let file = source.appendingPathComponent(name + ".lua")
            if fm.fileExists(atPath: folder.appendingPathComponent("init.lua").path) {
                try fm.copyItem(at: folder, to: target.appendingPathComponent(name))
            } else if fm.fileExists(atPath: file.path) {
                try fm.copyItem(at: file, to: target.appendingPathComponent(name + ".lua"))
                // its translations (`ctx.t`): plugins/locales/<name>/
                let locales = source.appendingPathComponent("locales").appendingPathComponent(name)
                if fm.fileExists(atPath: locales.path) {
                    let copy = target.appendingPathComponent("locales").appendingPathComponent(name)
                    try fm.createDirectory(at: copy.deletingLastPathComponent(), withIntermediateDirectories: true)
                    try fm.copyItem(at: locales, to: copy)
                }
            } else {
                throw ScenarioError("no plugin \(name) in \(source.path) (looked for \(name).lua and \(name)/init.lua)")
            }
        }
    }

    // MARK: events

    private func perform(_ event: Scenario.Step.Event, on host: SimulatedHost, media: ScenarioMedia) async throws {
        switch event {
        case .message(let v): await host.message(try await message(v, host: host, media: media))
        case .transient(let v):
            var m = try await message(v, host: host, media: media)
            m.transient = true
            await host.transient(m)
        case .cmd(let v):
            let o = try object(v, "cmd")
            await host.command(
                HookCommand(
                    action: o["action"]?.stringValue ?? "", ext: o["ext"].flatMap(Scenario.objectOrEmpty) ?? [:],
                    cid: o["cid"]?.stringValue ?? "c1", from: o["from"]?.stringValue ?? "Tom"))
        case .join(let v):
            let o = try object(v, "join")
            let cid = o["cid"]?.stringValue ?? "c1"
            for bot in host.bots {
                ScenarioMembers.preset(o, members: members(o), cid: cid, in: bot.runtime.members, now: host.clock.now)
            }
            await host.event(
                .membersJoined(cid: cid, members: members(o), by: o["by"]?.stringValue, founding: o["founding"]?.boolValue == true))
        case .leave(let v):
            let o = try object(v, "leave")
            await host.event(.membersLeft(cid: o["cid"]?.stringValue ?? "c1", members: members(o), by: o["by"]?.stringValue))
        case .invited(let v):
            let o = try object(v, "invited")
            await host.event(.invited(cid: o["cid"]?.stringValue ?? "c1", by: o["by"]?.stringValue))
        case .kicked(let v):
            let o = try object(v, "kicked")
            await host.event(.kicked(cid: o["cid"]?.stringValue ?? "c1", by: o["by"]?.stringValue))
        case .update(let v):
            let o = try object(v, "update")
            await host.event(
                .conversationUpdated(
                    cid: o["cid"]?.stringValue ?? "c1", attrs: o["attrs"].flatMap(Scenario.objectOrEmpty) ?? [:],
                    by: o["by"]?.stringValue))
        case .recall(let v):
            let o = try object(v, "recall")
            await host.event(
                .recalled(
                    cid: o["cid"]?.stringValue ?? "c1", messageID: o["id"]?.stringValue ?? "",
                    by: o["by"]?.stringValue, timestamp: Int64(host.clock.now * 1000)))
        case .edit(let v): await host.edit(try await message(v, host: host, media: media))
        case .click(let v):
            let o = try object(v, "click")
            guard let card = host.card(o["card"]?.stringValue) else {
                throw ScenarioError("click: \(o["card"]?.stringValue.map { "no card \($0)" } ?? "no card") was sent in this case")
            }
            await host.command(try ScenarioCards.click(o, card: card))
        case .advance(let seconds): await host.advance(seconds)
        case .at(let time):
            guard time >= host.clock.now else {
                throw ScenarioError("at \(time) is before the scenario's clock (\(host.clock.now))")
            }
            await host.advance(time - host.clock.now)
        case .translate(let v):
            let o = try object(v, "translate")
            await host.translate(
                text: o["text"]?.stringValue ?? "", from: o["from"]?.stringValue,
                to: o["to"]?.stringValue ?? "en", messageID: o["id"]?.stringValue)
        case .offline(let v):
            let o = try object(v, "offline")
            try Scenario.checkKeys(o, allowed: ["message", "receivers", "notification", "mentions"], at: "offline")
            try await host.offline(try await message(o["message"] ?? .string(""), host: host, media: media), o)
        case .reload: await host.reload()
        case .setState(let plugin, let values):
            for (k, v) in values.sorted(by: { $0.key < $1.key }) {
                try host.main.runtime.store.set(plugin: plugin ?? host.scenario.plugins.first ?? "", key: k, value: v, now: host.clock.now)
            }
        case .none: break
        }
    }

    /// A message step: a string is a text from Tom in c1; a table has the message fields, with `type`
    /// a number or a registered type name. A `file` whose `id` names one of the scenario's files is
    /// filled from it, as the server fills a stored file's message before anyone sees it.
    private func message(_ v: JSONValue, host: SimulatedHost, media: ScenarioMedia) async throws -> HookMessage {
        if case .string(let text) = v {
            return HookMessage(id: host.newMessageID(), cid: "c1", from: "Tom", text: text, timestamp: Int64(host.clock.now * 1000))
        }
        let o = try object(v, "message")
        try Scenario.checkKeys(o, allowed: ["id", "cid", "from", "type", "text", "attrs", "file", "location", "timestamp"], at: "message")
        var type = MessageType.text.rawValue
        switch o["type"] {
        case .int(let n)?: type = n
        case .string(let name)?:
            let registered = await host.main.runtime.messageTypes
            if let n = HookMessageTypes.builtinNames.first(where: { $0.value == name })?.key
                ?? registered.first(where: { $0.name == name })?.number
            {
                type = n
            } else {
                throw ScenarioError("unknown message type '\(name)' (not built in and not registered by a loaded plugin)")
            }
        case nil: break
        default: throw ScenarioError("message.type must be a number or a type name")
        }
        var file: FileInfo?
        if let f = o["file"]?.objectValue {
            try Scenario.checkKeys(f, allowed: ["id", "url", "name", "format", "size", "width", "height", "duration"], at: "message.file")
            file = FileInfo(
                url: f["url"]?.stringValue ?? "", objId: f["id"]?.stringValue, name: f["name"]?.stringValue,
                format: f["format"]?.stringValue, size: f["size"]?.intValue.map(Int64.init), width: f["width"]?.intValue,
                height: f["height"]?.intValue, duration: f["duration"]?.doubleValue)
            file = file.map(media.filled)
        }
        var location: Location?
        if let l = o["location"]?.objectValue, let lat = l["latitude"]?.doubleValue, let lon = l["longitude"]?.doubleValue {
            location = Location(latitude: lat, longitude: lon)
        }
        return HookMessage(
            id: o["id"]?.stringValue ?? host.newMessageID(), cid: o["cid"]?.stringValue ?? "c1",
            from: o["from"]?.stringValue ?? "Tom", type: type, text: o["text"]?.stringValue,
            attrs: o["attrs"].flatMap(Scenario.objectOrEmpty) ?? [:], file: file, location: location,
            timestamp: Int64(o["timestamp"]?.intValue ?? Int(host.clock.now * 1000)))
    }

    private func object(_ v: JSONValue, _ what: String) throws -> [String: JSONValue] {
        guard let o = Scenario.objectOrEmpty(v) else { throw ScenarioError("\(what) must be a table") }
        return o
    }

    private func members(_ o: [String: JSONValue]) -> [String] {
        if let one = o["member"]?.stringValue { return [one] }
        return (o["members"]?.arrayValue ?? []).compactMap(\.stringValue)
    }

    private func describe(_ event: Scenario.Step.Event) -> String {
        switch event {
        case .message(let v): return "message " + Render.lua(v)
        case .transient(let v): return "transient " + Render.lua(v)
        case .cmd(let v): return "cmd " + Render.lua(v)
        case .join(let v): return "join " + Render.lua(v)
        case .leave(let v): return "leave " + Render.lua(v)
        case .invited(let v): return "invited " + Render.lua(v)
        case .kicked(let v): return "kicked " + Render.lua(v)
        case .update(let v): return "update " + Render.lua(v)
        case .recall(let v): return "recall " + Render.lua(v)
        case .edit(let v): return "edit " + Render.lua(v)
        case .click(let v): return "click " + Render.lua(v)
        case .advance(let s): return "advance \(Render.lua(.double(s)))s"
        case .at(let t): return "at \(Date(timeIntervalSince1970: t).formatted(.iso8601))"
        case .translate(let v): return "translate " + Render.lua(v)
        case .offline(let v): return "offline " + Render.lua(v)
        case .reload: return "reload"
        case .setState(_, let values): return "set_state " + Render.lua(.object(values))
        case .none: return "checks"
        }
    }
}
