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
        if let problem = Self.costProblem(pattern) { throw IMError(.invalidField, "\(path).$regex: \(problem)") }
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

    /// Longest value a `$regex` is matched against; longer values never match. With at most two unbounded
    /// repetitions and none nested (`costProblem`), a match costs at most about this length squared.
    static let maxSubjectBytes = 1024

    /// Why matching `pattern` could take more than polynomial time on short values, or nil. The regex
    /// engine backtracks and has no step limit, so patterns are bounded before they are used: no
    /// repetition of a group that itself repeats or alternates (`(a|aa)*`, `(a+)+`), no back-references,
    /// at most two unbounded repetitions (`*`, `+`, `{n,}`).
    static func costProblem(_ pattern: String) -> String? {
        var unbounded = 0
        // Per open group: whether it contains a repetition or an alternation.
        var groups: [Bool] = []
        var closedGroupRepeats = false
        var escaped = false
        var inClass = false
        let scalars = Array(pattern.unicodeScalars)
        var index = 0
        while index < scalars.count {
            let c = scalars[index]
            defer { index += 1 }
            if escaped {
                escaped = false
                if ("1"..."9").contains(c) || c == "k" { return "back-references are not supported" }
                closedGroupRepeats = false
                continue
            }
            if c == "\\" {
                escaped = true
                continue
            }
            if inClass {
                if c == "]" { inClass = false }
                continue
            }
            switch c {
            case "[":
                inClass = true
                closedGroupRepeats = false
            case "(":
                groups.append(false)
                closedGroupRepeats = false
                if index + 1 < scalars.count, scalars[index + 1] == "?" { index += 1 } // (?: (?= (?i) …
            case ")":
                closedGroupRepeats = groups.popLast() ?? false
                if closedGroupRepeats, let last = groups.indices.last { groups[last] = true }
                continue
            case "|": if let last = groups.indices.last { groups[last] = true }
            case "*", "+", "{", "?":
                let isUnbounded = c == "*" || c == "+" || (c == "{" && Self.openEndedBrace(scalars, from: index))
                if isUnbounded { unbounded += 1 }
                if closedGroupRepeats, c != "?" { return "a repeated group must not itself repeat or alternate" }
                if let last = groups.indices.last { groups[last] = true }
            default: break
            }
            closedGroupRepeats = false
        }
        if unbounded > 2 { return "at most two unbounded repetitions (*, +, {n,})" }
        return nil
    }

    private static func openEndedBrace(_ scalars: [Unicode.Scalar], from start: Int) -> Bool {
        var index = start + 1
        while index < scalars.count, scalars[index] != "}" {
            if scalars[index] == ",", index + 1 < scalars.count, scalars[index + 1] == "}" { return true }
            index += 1
        }
        return false
    }

    /// The SQL function; values that are not text, or longer than `maxSubjectBytes`, never match.
    static let function = DatabaseFunction("hookbot_regexp", argumentCount: 3, pure: true) { values in
        guard let pattern = String.fromDatabaseValue(values[0]), let options = String.fromDatabaseValue(values[1]),
            let text = String.fromDatabaseValue(values[2]), text.utf8.count <= maxSubjectBytes,
            let regex = try? shared.regex(pattern, options: options)
        else { return false }
        return regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil
    }
}
