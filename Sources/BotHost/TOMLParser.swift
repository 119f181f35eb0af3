import IMCore

/// Parses the TOML used by `hookbot.toml` into JSON values: tables (`[a.b]`), arrays of tables
/// (`[[rules]]`), dotted and quoted keys, basic, literal and multi-line strings, integers, floats,
/// booleans, arrays and inline tables. Dates and times are not supported.
public enum TOMLParser {
    public struct ParseError: Error, Equatable, CustomStringConvertible {
        public var line: Int
        public var message: String
        public var description: String { "hookbot.toml line \(line): \(message)" }
    }

    public static func parse(_ text: String) throws(ParseError) -> [String: JSONValue] {
        var scanner = Scanner(Array(text.unicodeScalars))
        var root: [String: JSONValue] = [:]
        var current: [String] = []
        while true {
            scanner.skipBlankLines()
            guard let c = scanner.peek() else { break }
            if c == "[" {
                scanner.advance()
                let isArray = scanner.peek() == "["
                if isArray { scanner.advance() }
                let path = try scanner.key()
                try scanner.expect("]")
                if isArray { try scanner.expect("]") }
                try scanner.endOfLine()
                if isArray {
                    try appendTable(&root, path: path, line: scanner.line)
                } else {
                    try ensureTable(&root, path: path, line: scanner.line)
                }
                current = path
            } else {
                let key = try scanner.key()
                try scanner.expect("=")
                let value = try scanner.value()
                try scanner.endOfLine()
                try insert(&root, path: current + key, value: value, line: scanner.line)
            }
        }
        return root
    }

    private static func ensureTable(_ object: inout [String: JSONValue], path: [String], line: Int) throws(ParseError) {
        try descend(&object, path: path[...], line: line) { _ in }
    }

    private static func appendTable(_ object: inout [String: JSONValue], path: [String], line: Int) throws(ParseError) {
        guard let last = path.last else { throw ParseError(line: line, message: "empty table name") }
        try descend(&object, path: path.dropLast()[...], line: line) { table throws(ParseError) in
            switch table[last] {
            case nil: table[last] = .array([.object([:])])
            case .array(var items)?:
                items.append(.object([:]))
                table[last] = .array(items)
            default: throw ParseError(line: line, message: "'\(last)' is not an array of tables")
            }
        }
    }

    private static func insert(_ object: inout [String: JSONValue], path: [String], value: JSONValue, line: Int) throws(ParseError) {
        guard let last = path.last else { throw ParseError(line: line, message: "empty key") }
        try descend(&object, path: path.dropLast()[...], line: line) { table throws(ParseError) in
            if table[last] != nil { throw ParseError(line: line, message: "duplicate key '\(last)'") }
            table[last] = value
        }
    }

    /// Walks to the table at `path` (creating tables; entering the last element of arrays of tables).
    private static func descend(_ object: inout [String: JSONValue], path: ArraySlice<String>, line: Int,
                                _ body: (inout [String: JSONValue]) throws(ParseError) -> Void) throws(ParseError) {
        guard let head = path.first else { return try body(&object) }
        switch object[head] {
        case nil, .object?:
            var child = object[head]?.objectValue ?? [:]
            try descend(&child, path: path.dropFirst(), line: line, body)
            object[head] = .object(child)
        case .array(var items)?:
            guard case .object(var child)? = items.last else { throw ParseError(line: line, message: "'\(head)' is not a table") }
            try descend(&child, path: path.dropFirst(), line: line, body)
            items[items.count - 1] = .object(child)
            object[head] = .array(items)
        default:
            throw ParseError(line: line, message: "'\(head)' is not a table")
        }
    }

    private struct Scanner {
        let chars: [Unicode.Scalar]
        var index = 0
        var line = 1

        init(_ chars: [Unicode.Scalar]) { self.chars = chars }

        func peek(_ offset: Int = 0) -> Unicode.Scalar? {
            index + offset < chars.count ? chars[index + offset] : nil
        }

        mutating func advance() {
            if peek() == "\n" { line += 1 }
            index += 1
        }

        func error(_ message: String) -> ParseError { ParseError(line: line, message: message) }

        mutating func skipSpaces() {
            while let c = peek(), c == " " || c == "\t" { advance() }
        }

        mutating func skipComment() {
            if peek() == "#" { while let c = peek(), c != "\n" { advance() } }
        }

        mutating func skipBlankLines() {
            while true {
                skipSpaces()
                skipComment()
                if peek() == "\n" || peek() == "\r" { advance() } else { return }
            }
        }

        /// Spaces, newlines and comments inside arrays.
        mutating func skipWhitespaceAndComments() {
            while true {
                skipSpaces()
                skipComment()
                guard let c = peek(), c == "\n" || c == "\r" else { return }
                advance()
            }
        }

        mutating func expect(_ c: Unicode.Scalar) throws(ParseError) {
            skipSpaces()
            guard peek() == c else { throw error("expected '\(c)'") }
            advance()
        }

        mutating func endOfLine() throws(ParseError) {
            skipSpaces()
            skipComment()
            if peek() == "\r" { advance() }
            guard peek() == nil || peek() == "\n" else { throw error("unexpected text after value") }
            if peek() == "\n" { advance() }
        }

        mutating func key() throws(ParseError) -> [String] {
            var parts: [String] = []
            repeat {
                skipSpaces()
                if peek() == "\"" || peek() == "'" {
                    parts.append(try string())
                } else {
                    var bare = ""
                    while let c = peek(), c.properties.isAlphabetic || ("0"..."9").contains(c) || c == "_" || c == "-" {
                        bare.unicodeScalars.append(c)
                        advance()
                    }
                    guard !bare.isEmpty else { throw error("expected a key") }
                    parts.append(bare)
                }
                skipSpaces()
                guard peek() == "." else { break }
                advance()
            } while true
            return parts
        }

        mutating func value() throws(ParseError) -> JSONValue {
            skipSpaces()
            guard let c = peek() else { throw error("expected a value") }
            switch c {
            case "\"", "'": return .string(try string())
            case "[": return try array()
            case "{": return try inlineTable()
            case "t", "f": return try boolean()
            default: return try number()
            }
        }

        mutating func string() throws(ParseError) -> String {
            let quote = peek() ?? "\""
            let multiline = peek(1) == quote && peek(2) == quote
            advance()
            if multiline {
                advance()
                advance()
                if peek() == "\n" { advance() }
            }
            var result = ""
            while true {
                guard let c = peek() else { throw error("unterminated string") }
                if c == quote {
                    if !multiline {
                        advance()
                        return result
                    }
                    if peek(1) == quote, peek(2) == quote {
                        advance(); advance(); advance()
                        return result
                    }
                }
                if c == "\n", !multiline { throw error("newline in a single-line string") }
                if c == "\\", quote == "\"" {
                    advance()
                    guard let escaped = peek() else { throw error("unterminated escape") }
                    advance()
                    switch escaped {
                    case "n": result += "\n"
                    case "t": result += "\t"
                    case "r": result += "\r"
                    case "\"": result += "\""
                    case "\\": result += "\\"
                    case "u", "U":
                        let count = escaped == "u" ? 4 : 8
                        var hex = ""
                        for _ in 0..<count {
                            guard let h = peek() else { throw error("bad unicode escape") }
                            hex.unicodeScalars.append(h)
                            advance()
                        }
                        guard let value = UInt32(hex, radix: 16), let scalar = Unicode.Scalar(value) else {
                            throw error("bad unicode escape")
                        }
                        result.unicodeScalars.append(scalar)
                    case "\n" where multiline:
                        while let w = peek(), w == " " || w == "\t" || w == "\n" { advance() }
                    default: throw error("unknown escape '\\\(escaped)'")
                    }
                    continue
                }
                result.unicodeScalars.append(c)
                advance()
            }
        }

        mutating func array() throws(ParseError) -> JSONValue {
            advance()
            var items: [JSONValue] = []
            while true {
                skipWhitespaceAndComments()
                if peek() == "]" {
                    advance()
                    return .array(items)
                }
                items.append(try value())
                skipWhitespaceAndComments()
                if peek() == "," { advance(); continue }
                guard peek() == "]" else { throw error("expected ',' or ']' in array") }
            }
        }

        mutating func inlineTable() throws(ParseError) -> JSONValue {
            advance()
            var table: [String: JSONValue] = [:]
            skipSpaces()
            if peek() == "}" {
                advance()
                return .object(table)
            }
            while true {
                let path = try key()
                try expect("=")
                let item = try value()
                try TOMLParser.insert(&table, path: path, value: item, line: line)
                skipSpaces()
                if peek() == "," { advance(); continue }
                guard peek() == "}" else { throw error("expected ',' or '}' in inline table") }
                advance()
                return .object(table)
            }
        }

        mutating func boolean() throws(ParseError) -> JSONValue {
            for (word, value) in [("true", true), ("false", false)] where matches(word) {
                for _ in word.unicodeScalars { advance() }
                return .bool(value)
            }
            throw error("expected a value")
        }

        func matches(_ word: String) -> Bool {
            for (offset, c) in word.unicodeScalars.enumerated() where peek(offset) != c { return false }
            return true
        }

        mutating func number() throws(ParseError) -> JSONValue {
            var text = ""
            while let c = peek(), "+-0123456789._eExabcdefABCDEFoinf".unicodeScalars.contains(c) {
                if c != "_" { text.unicodeScalars.append(c) }
                advance()
            }
            if let int = Int64(text) { return .int(int) }
            if text.hasPrefix("0x"), let int = Int64(text.dropFirst(2), radix: 16) { return .int(int) }
            if text == "inf" || text == "+inf" { return .double(.infinity) }
            if text == "-inf" { return .double(-.infinity) }
            if let double = Double(text), text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) {
                return .double(double)
            }
            throw error(text.isEmpty ? "expected a value" : "invalid value '\(text)'")
        }
    }
}
