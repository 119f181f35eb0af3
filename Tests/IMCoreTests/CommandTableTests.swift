import Foundation
import HookbotTestSupport
import XCTest

/// The generated mappings are what scripts/generate-commands.py writes from scripts/command-fields.json,
/// so that a hand edit of a generated file (or a table change without regenerating) fails.
final class CommandTableTests: XCTestCase {
    func testGeneratedFilesMatchTheTable() throws {
        let (status, message) = try runProcess(
            URL(fileURLWithPath: "/usr/bin/env"),
            ["python3", CommandTable.root.appendingPathComponent("scripts/generate-commands.py").path, "--check"])
        XCTAssertEqual(status, 0, "run scripts/generate-commands.py: \(message)")
    }
}
