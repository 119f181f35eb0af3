import IMClient
import IMCore

/// A message the server was expected to refuse and accepted, or refused with another code.
public struct UnexpectedRefusal: Error, CustomStringConvertible {
    public var text: String
    /// The refusal that came instead of the expected one; nil when the message was accepted.
    public var refusal: IMError?
    public var expectedCode: Int
    public var description: String {
        guard let refusal else { return "the server accepted \"\(text)\", which it was to refuse with \(expectedCode)" }
        return "the server refused \"\(text)\" with \(refusal.code) (\(refusal)), not \(expectedCode)"
    }
}

extension IMConversation {
    /// Sends `text`, which the server must refuse with `code` (by default 4402, a message the interceptor
    /// rejected), and gives the refusal for more checks. An accepted message or another code throws
    /// `UnexpectedRefusal`, which fails an XCTest and a Swift Testing test alike (an XCTAssert inside a `@Test`
    /// would pass silently).
    @discardableResult
    public func sendRefused(_ text: String, code: Int = IMErrorCode.messageRejectedByApp.rawValue) async throws -> IMError {
        let refusal: IMError
        do {
            _ = try await send(.text(text))
            throw UnexpectedRefusal(text: text, refusal: nil, expectedCode: code)
        } catch let error as IMError {
            refusal = error
        }
        guard refusal.code == code else { throw UnexpectedRefusal(text: text, refusal: refusal, expectedCode: code) }
        return refusal
    }
}
