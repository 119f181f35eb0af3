import Foundation
import Synchronization

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

    /// A process-unique message id without a system call: 10 random base-62 characters drawn once per
    /// process (about 59 bits, so ids of different runs do not collide) and a 12-character counter.
    static func messageID() -> String {
        let n = messageCounter.wrappingAdd(1, ordering: .relaxed).oldValue
        // The 22 ASCII bytes written in place: the `[Character]` and the two strings joined before were about 1 % of
        // the pipeline's writer thread (one id per stored message).
        return String(unsafeUninitializedCapacity: 22) { bytes in
            for (index, byte) in messagePrefix.enumerated() { bytes[index] = byte }
            var rest = n
            for index in stride(from: 21, through: 10, by: -1) {
                bytes[index] = asciiAlphabet[Int(rest % 62)]
                rest /= 62
            }
            return 22
        }
    }

    private static let asciiAlphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8)
    private static let messagePrefix = Array(random(length: 10).utf8)
    private static let messageCounter = Atomic<UInt64>(0)

    static func nowMillis() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)) }
}
