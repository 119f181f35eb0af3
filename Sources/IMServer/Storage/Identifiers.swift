import Foundation

/// Server-assigned identifiers.
enum Identifiers {
    private static let alphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")

    /// A random base-62 string; 22 characters carry about 131 bits.
    static func random(length: Int = 22) -> String {
        var generator = SystemRandomNumberGenerator()
        return String((0..<length).map { _ in alphabet[Int(generator.next(upperBound: UInt64(alphabet.count)))] })
    }

    static func conversationID() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<3).map { _ in String(format: "%08x", UInt32(truncatingIfNeeded: generator.next())) }.joined()
    }

    static func messageID() -> String { random() }

    static func nowMillis() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)) }
}
