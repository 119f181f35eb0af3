import PushProviders
import XCTest

/// For each row (a device the test's push service answers for in its own way, the outcome expected), in
/// order: sends to it through `send` and checks what the provider made of the answer.
func assertOutcomes(
    _ rows: [(String, PushOutcome)], file: StaticString = #filePath, line: UInt = #line,
    _ send: (String) async throws -> PushOutcome
) async throws {
    for (device, expected) in rows {
        let outcome = try await send(device)
        XCTAssertEqual(outcome, expected, "sending to \(device)", file: file, line: line)
    }
}
