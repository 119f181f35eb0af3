import IMClient
import IMCore
import XCTest

/// A message the server was expected to refuse and accepted.
public struct AcceptedMessage: Error, CustomStringConvertible {
    public var text: String
    public var description: String { "the server accepted \"\(text)\", which it was to refuse" }
}

extension IMConversation {
    /// Sends `text`, which the server must refuse with `code` (by default 4402, a message the interceptor
    /// rejected), and gives the refusal for more checks. An accepted message fails the test and throws.
    @discardableResult
    public func sendRefused(
        _ text: String, code: Int = IMErrorCode.messageRejectedByApp.rawValue, file: StaticString = #filePath,
        line: UInt = #line
    ) async throws -> IMError {
        do {
            _ = try await send(.text(text))
        } catch {
            XCTAssertEqual(error.code, code, "\(error)", file: file, line: line)
            return error
        }
        XCTFail("the server accepted \"\(text)\"", file: file, line: line)
        throw AcceptedMessage(text: text)
    }
}
