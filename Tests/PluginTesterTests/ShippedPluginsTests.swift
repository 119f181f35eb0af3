import Foundation
import PluginTester
import XCTest

/// Runs the scenario files of the shipped plugins.
final class ShippedPluginsTests: XCTestCase {
    func testShippedPluginScenariosPass() async throws {
        var lines: [String] = []
        let runner = PluginTestRunner { lines.append($0) }
        let summary = await runner.run(paths: [packageRoot.appendingPathComponent("plugins").path])
        XCTAssertEqual(summary.failed, 0, lines.joined(separator: "\n"))
        XCTAssertGreaterThan(summary.passed, 20)
        XCTAssertEqual(lines.last, summary.line)
    }
}

let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
