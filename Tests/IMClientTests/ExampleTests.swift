import Foundation
import HookbotTestSupport
import XCTest

/// Runs `examples/TomAndJerry` (the `tom-and-jerry-example` executable) and checks its conversation.
final class ExampleTests: XCTestCase {
    func testTomAndJerryExampleRuns() async throws {
        let binary = try XCTUnwrap(Self.exampleURL(), "build the tom-and-jerry-example executable first (swift build)")
        let process = try ChildProcess(binary, error: .discarded)
        let status = try await process.waitForExit(timeout: .seconds(60)).status
        let text = process.printed
        XCTAssertEqual(status, 0, text)
        for line in ["Jerry got: Jerry, wake up!", "Tom got: Five more minutes…", "Jerry got a poke of strength 3", "done"] {
            XCTAssertTrue(text.contains(line), "missing '\(line)' in:\n\(text)")
        }
    }

    /// The executable built next to the test bundle (`.build/<triple>/<config>/tom-and-jerry-example`).
    private static func exampleURL() -> URL? {
        let testBinary = URL(fileURLWithPath: CommandLine.arguments.first(where: { $0.contains(".xctest") }) ?? CommandLine.arguments[0])
        var directory = testBinary.deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("tom-and-jerry-example")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        return nil
    }
}
