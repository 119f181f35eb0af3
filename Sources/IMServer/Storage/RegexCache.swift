import Foundation
import GRDB
import IMCore
import Synchronization

/// Compiled `$regex` patterns, shared by the SQL function `hookbot_regexp(pattern, options, value)`.
final class RegexCache: Sendable {
    static let shared = RegexCache()
    private let cache = Mutex<[String: NSRegularExpression]>([:])
    private static let capacity = 256

    func regex(_ pattern: String, options: String, path: String = "where") throws -> NSRegularExpression {
        let key = options + "\u{0}" + pattern
        if let cached = cache.withLock({ $0[key] }) { return cached }
        guard pattern.utf8.count <= 512 else { throw IMError(.invalidField, "\(path).$regex is longer than 512 bytes") }
        var flags: NSRegularExpression.Options = []
        for option in options {
            switch option {
            case "i": flags.insert(.caseInsensitive)
            case "m": flags.insert(.anchorsMatchLines)
            case "s": flags.insert(.dotMatchesLineSeparators)
            case "x": flags.insert(.allowCommentsAndWhitespace)
            default: throw IMError(.invalidField, "\(path).$options: unknown option '\(option)'")
            }
        }
        let regex: NSRegularExpression
        do { regex = try NSRegularExpression(pattern: pattern, options: flags) } catch {
            throw IMError(.invalidField, "\(path).$regex is not a valid regular expression")
        }
        cache.withLock { cache in
            if cache.count >= Self.capacity { cache.removeAll() }
            cache[key] = regex
        }
        return regex
    }

    /// The SQL function; values that are not text never match.
    static let function = DatabaseFunction("hookbot_regexp", argumentCount: 3, pure: true) { values in
        guard let pattern = String.fromDatabaseValue(values[0]), let options = String.fromDatabaseValue(values[1]),
              let text = String.fromDatabaseValue(values[2]),
              let regex = try? shared.regex(pattern, options: options)
        else { return false }
        return regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil
    }
}
