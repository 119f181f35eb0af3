import Foundation
import XCTest

/// The generated mappings are what scripts/generate-commands.py writes from scripts/command-fields.json,
/// so that a hand edit of a generated file (or a table change without regenerating) fails.
final class CommandTableTests: XCTestCase {
    func testGeneratedFilesMatchTheTable() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", CommandTable.root.appendingPathComponent("scripts/generate-commands.py").path, "--check"]
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, "run scripts/generate-commands.py: \(message)")
    }
}
