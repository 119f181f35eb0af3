import Foundation
import HookbotTestSupport
import PluginTester
import XCTest

/// The custom-types example: its plugins' scenarios pass, and the program runs end to end.
final class CustomTypesExampleTests: XCTestCase {
    func testExamplePluginScenariosPass() async {
        var lines: [String] = []
        let summary = await PluginTestRunner { lines.append($0) }
            .run(paths: [packageRoot.appendingPathComponent("examples/CustomTypes/plugins").path])
        XCTAssertEqual(summary.failed, 0, lines.joined(separator: "\n"))
        XCTAssertGreaterThanOrEqual(summary.passed, 8)
    }

    func testCustomTypesExampleRuns() throws {
        guard let binary = builtProduct("custom-types-example") else { throw XCTSkip("custom-types-example is not built") }
        let (status, output) = try runProcess(binary, [])
        XCTAssertEqual(status, 0, output)
        XCTAssertTrue(output.contains("bot: Lunch? Pizza · 2, Sushi · 0 (2 votes)"), output)
        XCTAssertTrue(output.contains("bot posted a link card: Hookbot 1.0 released"), output)
        XCTAssertTrue(output.contains("bot relayed: Tom is typing…"), output)
        XCTAssertTrue(output.hasSuffix("done\n"), output)
    }
}
