import Foundation
import IMCore
import TOMLKit

/// `hookbot.toml` read with TOMLKit into JSON values, with the line of every key so that errors found
/// later (unknown keys, wrong types, a plugin's schema) name the file, the line and the key.
///
/// TOMLKit 0.6.0 reports positions only for syntax errors (`TOMLParseError.source`), not for the values
/// it parsed (toml++ keeps a `source()` region per node, but TOMLKit does not bridge it), so the key lines
/// come from `KeyLines`, a scan of the text for table headers and `key =` lines.
public struct ConfigFile: Sendable {
    /// The file's name as errors show it.
    public let name: String
    public let root: [String: JSONValue]
    private let lines: KeyLines

    /// Parses TOML text; syntax errors are `ConfigurationError`s with the line.
    public init(text: String, name: String = "hookbot.toml") throws(ConfigurationError) {
        self.name = name
        if let problem = ParserTraps.firstProblem(in: text) {
            throw ConfigurationError(message: problem.message, file: name, line: problem.line)
        }
        let table: TOMLTable
        do {
            table = try TOMLTable(string: text)
        } catch let error as TOMLParseError {
            throw ConfigurationError(message: error.description, file: name, line: error.source.begin.line)
        } catch {
            throw ConfigurationError(message: "\(error)", file: name)
        }
        lines = KeyLines(text)
        root = try Self.convert(table, path: [], file: name, lines: lines)
    }

    /// The line where `keyPath` ("plugins.autoreply.rules") is set, or its table starts.
    public func line(of keyPath: String) -> Int? { lines.line(of: keyPath) }

    /// An error about a key, located in the file.
    public func error(_ keyPath: String, _ message: String) -> ConfigurationError {
        ConfigurationError(message: message, file: name, line: line(of: keyPath), key: keyPath)
    }

    private static func convert(_ table: TOMLTable, path: [String], file: String, lines: KeyLines)
        throws(ConfigurationError) -> [String: JSONValue]
    {
        var out: [String: JSONValue] = [:]
        for key in table.keys {
            guard let value = table[key] else { continue }
            out[key] = try convert(value.tomlValue, path: path + [key], file: file, lines: lines)
        }
        return out
    }

    private static func convert(_ value: TOMLValue, path: [String], file: String, lines: KeyLines)
        throws(ConfigurationError) -> JSONValue
    {
        switch value.type {
        case .table: return .object(try convert(value.table ?? TOMLTable(), path: path, file: file, lines: lines))
        case .array:
            var items: [JSONValue] = []
            for item in value.array ?? TOMLArray() {
                items.append(try convert(item.tomlValue, path: path, file: file, lines: lines))
            }
            return .array(items)
        case .string: return .string(value.string ?? "")
        case .int: return .int(value.int ?? 0)
        case .double: return .double(value.double ?? 0)
        case .bool: return .bool(value.bool ?? false)
        case .date, .time, .dateTime:
            let key = path.joined(separator: ".")
            throw ConfigurationError(
                message: "dates and times are not supported; write a string", file: file,
                line: lines.line(of: key), key: key)
        }
    }
}

/// Where each key of a TOML document is set: table headers (`[a.b]`, `[[a.b]]`) and `key = value` lines
/// outside multi-line values. Dotted and quoted keys are understood; the first occurrence wins.
struct KeyLines: Sendable {
    private var lines: [String: Int] = [:]

    init(_ text: String) {
        var table: [String] = []
        var depth = 0
        var inMultilineString: String?
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            var line = Substring(raw)
            if let delimiter = inMultilineString {
                if line.contains(delimiter) { inMultilineString = nil }
                continue
            }
            line = line.drop(while: { $0 == " " || $0 == "\t" })
            if depth == 0, line.hasPrefix("[") {
                let header = line.hasPrefix("[[") ? line.dropFirst(2) : line.dropFirst()
                guard let end = header.firstIndex(of: "]") else { continue }
                table = Self.keyParts(header[..<end])
                record(table, number)
                continue
            }
            if depth == 0, let equals = Self.assignment(in: line) {
                let key = table + Self.keyParts(line[..<equals])
                record(key, number)
                line = line[line.index(after: equals)...]
            }
            // Track brackets and multi-line strings of the value, so keys inside them are not taken as keys.
            var quote: Character?
            var rest = line[...]
            while let character = rest.first {
                if quote == nil, rest.hasPrefix("\"\"\"") || rest.hasPrefix("'''") {
                    let delimiter = String(rest.prefix(3))
                    let after = rest.dropFirst(3)
                    if let close = after.range(of: delimiter) {
                        rest = after[close.upperBound...]
                        continue
                    }
                    inMultilineString = delimiter
                    break
                }
                rest = rest.dropFirst()
                if let open = quote {
                    if character == "\\", open == "\"" { rest = rest.dropFirst() } else if character == open { quote = nil }
                    continue
                }
                switch character {
                case "\"", "'": quote = character
                case "[", "{": depth += 1
                case "]", "}": depth = max(0, depth - 1)
                case "#": rest = ""
                default: break
                }
            }
        }
    }

    func line(of keyPath: String) -> Int? { lines[keyPath] }

    private mutating func record(_ parts: [String], _ line: Int) {
        let key = parts.joined(separator: ".")
        if lines[key] == nil { lines[key] = line }
    }

    /// The index of the `=` of a `key = value` line, outside quotes.
    private static func assignment(in line: Substring) -> Substring.Index? {
        var quote: Character?
        var index = line.startIndex
        while index < line.endIndex {
            let character = line[index]
            if let open = quote {
                if character == open { quote = nil }
            } else if character == "\"" || character == "'" {
                quote = character
            } else if character == "=" {
                return index
            } else if character == "#" {
                return nil
            }
            index = line.index(after: index)
        }
        return nil
    }

    /// `a."b c".d` → ["a", "b c", "d"].
    private static func keyParts(_ text: Substring) -> [String] {
        var parts: [String] = []
        var current = ""
        var quote: Character?
        for character in text {
            if let open = quote {
                if character == open { quote = nil } else { current.append(character) }
            } else if character == "\"" || character == "'" {
                quote = character
            } else if character == "." {
                parts.append(current.trimmingCharacters(in: .whitespaces))
                current = ""
            } else {
                current.append(character)
            }
        }
        parts.append(current.trimmingCharacters(in: .whitespaces))
        return parts
    }
}

/// Finds the syntax errors the toml++ parser TOMLKit 0.6.0 bundles asserts on, aborting the process instead
/// of reporting them, so that they are refused here first (both found by `make fuzz`):
/// - a table header whose first key starts with a character that cannot start a key (`[/bot]`, `[[ +rules]]`;
///   `parse_key()`: "is_bare_key_character || is_string_delimiter");
/// - a `}` where an array expects a value (`rules = [ } ]`, `[1, }]`; `parse_value()`: "!is_value_terminator").
/// A header is a `[` at the start of a line (after a byte order mark on the first) outside strings and outside
/// the brackets of a value; the scan tracks strings, comments and the brackets of values, nothing more.
enum ParserTraps {
    static func firstProblem(in text: String) -> (line: Int, message: String)? {
        let bytes = Array(text.utf8)
        // A UTF-8 byte order mark, which toml++ skips, does not make the first line's header a value.
        var index = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        var line = 1
        var open: [UInt8] = [] // the [ and { of a value, innermost last
        var expectingArrayValue = false // after an array's [ or a comma in it
        var atLineStart = true
        func peek(_ offset: Int) -> UInt8? { index + offset < bytes.count ? bytes[index + offset] : nil }
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\n"):
                line += 1
                atLineStart = true
                index += 1
                continue
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"):
                index += 1
                continue
            case UInt8(ascii: "#"):
                while index < bytes.count, bytes[index] != UInt8(ascii: "\n") { index += 1 }
                continue
            case UInt8(ascii: "\""), UInt8(ascii: "'"):
                let multiline = peek(1) == byte && peek(2) == byte
                let quote = multiline ? [byte, byte, byte] : [byte]
                index += quote.count
                while index < bytes.count, !bytes[index...].starts(with: quote) {
                    if bytes[index] == UInt8(ascii: "\n") { line += 1 }
                    if byte == UInt8(ascii: "\""), bytes[index] == UInt8(ascii: "\\") { index += 1 }
                    index += 1
                }
                index += quote.count
                expectingArrayValue = false
            case UInt8(ascii: "["):
                if atLineStart, open.isEmpty {
                    var next = index + 1
                    if next < bytes.count, bytes[next] == UInt8(ascii: "[") { next += 1 }
                    while next < bytes.count, bytes[next] == UInt8(ascii: " ") || bytes[next] == UInt8(ascii: "\t") { next += 1 }
                    if next < bytes.count, !startsKey(bytes[next]) {
                        let shown =
                            (0x21..<0x7F).contains(bytes[next]) ? "'\(Character(UnicodeScalar(bytes[next])))'" : "byte \(bytes[next])"
                        return (line, "Error while parsing table header: expected a key, saw \(shown)")
                    }
                    while index < bytes.count, bytes[index] != UInt8(ascii: "\n") { index += 1 }
                    continue
                }
                open.append(byte)
                expectingArrayValue = true
                index += 1
            case UInt8(ascii: "{"):
                open.append(byte)
                expectingArrayValue = false
                index += 1
            case UInt8(ascii: ","):
                expectingArrayValue = open.last == UInt8(ascii: "[")
                index += 1
            case UInt8(ascii: "]"), UInt8(ascii: "}"):
                if byte == UInt8(ascii: "}"), expectingArrayValue {
                    return (line, "Error while parsing array: expected a value or closing ']', saw '}'")
                }
                _ = open.popLast()
                expectingArrayValue = false
                index += 1
            default:
                expectingArrayValue = false
                index += 1
            }
            atLineStart = false
        }
        return nil
    }

    /// Whether a key may start with `byte`: a bare-key character (ASCII letters, digits, `_`, `-`) or a quote.
    private static func startsKey(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "\""), UInt8(ascii: "'"):
            true
        default:
            false
        }
    }
}
