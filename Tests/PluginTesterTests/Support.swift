import Foundation
import PluginTester
import XCTest

/// A temporary plugins folder as `hookbot test` reads it (plugins, `tests/` with the scenarios), removed when
/// the test that made it ends.
final class ScenarioFolder: Sendable {
    let url: URL

    /// A new folder holding `files` (path → text, e.g. `probe.lua` or `tests/probe.test.lua`).
    init(_ test: XCTestCase, files: KeyValuePairs<String, String> = [:]) throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("plugin-tester-\(UUID().uuidString)")
        self.url = url
        try FileManager.default.createDirectory(at: url.appendingPathComponent("tests"), withIntermediateDirectories: true)
        test.addTeardownBlock { try? FileManager.default.removeItem(at: url) }
        for (path, text) in files { try write(path, text) }
    }

    func write(_ path: String, _ text: String) throws {
        try text.write(to: url.appendingPathComponent(path), atomically: true, encoding: .utf8)
    }

    /// Writes `scenario` as `tests/<name>` and runs the folder: the summary and the report as one text.
    func report(_ scenario: String, as name: String) async throws -> (PluginTestRunner.Summary, String) {
        try write("tests/\(name)", scenario)
        let (summary, lines) = await run()
        return (summary, lines.joined(separator: "\n"))
    }

    /// Runs the scenarios of the folder (or only the file at `path` in it) as `hookbot test` does: the summary
    /// and the lines it printed.
    func run(_ path: String? = nil, filter: String? = nil) async -> (PluginTestRunner.Summary, [String]) {
        var lines: [String] = []
        let target = path.map { url.appendingPathComponent($0) } ?? url
        let summary = await PluginTestRunner(filter: filter) { lines.append($0) }.run(paths: [target.path])
        return (summary, lines)
    }
}
