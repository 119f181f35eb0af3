// Hand-written JSON over UTF-8 bytes (reader here, writer in JSONWriter.swift, Command mapping in
// Command+JSON.swift). Foundation's JSONDecoder/JSONEncoder dominated the server's per-message CPU
// profile (generic Codable containers, a DOM per frame, String keys), and no library available to this
// project does Codable-free JSON over bytes, so the frames are scanned and written here directly.
// Why one file of ~770 lines: the reader is one struct whose cursor and bytes stay private to it; its
// structure, string and number scanners (the per-frame hot path) all move that cursor, and split across
// files they would need it made module-wide.

/// A frame that is not JSON, or JSON beyond the reader's limits.
struct JSONSyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
    enum Kind: Sendable, Equatable {
        /// Not RFC 8259 JSON (or not valid UTF-8).
        case syntax
        /// Containers nested deeper than the reader's `maxDepth`.
        case tooDeep
    }

    var kind: Kind
    /// Byte offset where the problem was found.
    var offset: Int
    var message: String

    var description: String { "\(message) at byte \(offset)" }
}

/// A number token as scanned: its bytes, and its value when it is an integer literal that fits Int64.
struct JSONNumberToken {
    var start: Int
    var end: Int
    /// No fraction and no exponent.
    var isIntegerLiteral: Bool
    /// The value of an integer literal within Int64's range.
    var integer: Int64?
}

/// A strict, single-pass RFC 8259 scanner over UTF-8 bytes.
///
/// Every byte is looked at a bounded number of times (no backtracking), containers may nest at most
/// `maxDepth` levels, strings must be valid UTF-8 without raw control characters, escapes must be
/// valid (`\uXXXX` surrogates paired), numbers follow the JSON grammar (no leading zeros, no `NaN`).
/// The reader is driven by its caller: `readValue()` builds a `JSONValue`, while the `begin…` /
/// `next…` methods let a decoder walk objects and arrays without building one.
struct JSONReader {
    static let defaultMaxDepth = 64

    let bytes: UnsafeBufferPointer<UInt8>
    var position = 0
    /// Open containers around `position`.
    var depth = 0
    let maxDepth: Int
    /// Set when `readValue()` met a number that does not fit a Double (it reads as `null` then).
    var sawUnrepresentableNumber = false

    init(_ bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int = JSONReader.defaultMaxDepth) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    // MARK: Bytes and structure

    func error(_ message: String) -> JSONSyntaxError {
        JSONSyntaxError(kind: .syntax, offset: position, message: message)
    }

    mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case .space, .newline, .carriageReturn, .tab: position += 1
            default: return
            }
        }
    }

    /// The next byte that is not whitespace, not consumed; nil at the end of the input.
    mutating func peek() -> UInt8? {
        skipWhitespace()
        return position < bytes.count ? bytes[position] : nil
    }

    /// Succeeds when only whitespace is left.
    mutating func expectEnd() throws(JSONSyntaxError) {
        if peek() != nil { throw error("unexpected data after the JSON value") }
    }

    private mutating func enter() throws(JSONSyntaxError) {
        depth += 1
        if depth > maxDepth {
            throw JSONSyntaxError(kind: .tooDeep, offset: position, message: "nesting deeper than \(maxDepth) levels")
        }
    }

    /// Consumes `{`; returns whether the object has a member (false: `}` consumed too).
    /// With members, read each one's key with `readKey()`/`readKeyIndex(in:)`, then its value, then
    /// call `nextMember()`.
    mutating func beginObject() throws(JSONSyntaxError) -> Bool {
        try beginContainer(open: .openBrace, close: .closeBrace, "expected an object")
    }

    /// After a member's value: true at `,` (another member follows), false at `}` (object closed).
    mutating func nextMember() throws(JSONSyntaxError) -> Bool {
        try nextInContainer(close: .closeBrace, "expected ',' or '}'")
    }

    /// Consumes `[`; returns whether the array has an element (false: `]` consumed too).
    mutating func beginArray() throws(JSONSyntaxError) -> Bool {
        try beginContainer(open: .openBracket, close: .closeBracket, "expected an array")
    }

    /// After an element: true at `,`, false at `]` (array closed).
    mutating func nextElement() throws(JSONSyntaxError) -> Bool {
        try nextInContainer(close: .closeBracket, "expected ',' or ']'")
    }

    private mutating func beginContainer(open: UInt8, close: UInt8, _ expected: String) throws(JSONSyntaxError) -> Bool {
        guard peek() == open else { throw error(expected) }
        try enter()
        position += 1
        if peek() == close {
            position += 1
            depth -= 1
            return false
        }
        return true
    }

    private mutating func nextInContainer(close: UInt8, _ expected: String) throws(JSONSyntaxError) -> Bool {
        switch peek() {
        case .comma:
            position += 1
            return true
        case close:
            position += 1
            depth -= 1
            return false
        default:
            throw error(expected)
        }
    }

    private mutating func expectColon() throws(JSONSyntaxError) {
        guard peek() == .colon else { throw error("expected ':'") }
        position += 1
    }

    /// Reads a member's key and the `:` after it.
    mutating func readKey() throws(JSONSyntaxError) -> String {
        guard peek() == .quote else { throw error("expected a string key") }
        let key = try readString()
        try expectColon()
        return key
    }

    /// Reads a member's key and the `:` after it, returning its index in `table` (-1 when not there)
    /// without creating a String.
    mutating func readKeyIndex(in table: JSONKeyTable) throws(JSONSyntaxError) -> Int {
        guard peek() == .quote else { throw error("expected a string key") }
        let index = try readStringIndex(in: table)
        try expectColon()
        return index
    }

    // MARK: Literals

    private mutating func literal(_ word: StaticString) throws(JSONSyntaxError) {
        let count = word.utf8CodeUnitCount
        guard bytes.count - position >= count else { throw error("invalid literal") }
        let expected = word.utf8Start
        for k in 0..<count where bytes[position + k] != expected[k] {
            throw error("invalid literal")
        }
        position += count
    }

    /// Reads `true` or `false` at the current byte.
    mutating func readBool() throws(JSONSyntaxError) -> Bool {
        if peek() == .lowerT {
            try literal("true")
            return true
        }
        try literal("false")
        return false
    }

    mutating func readNull() throws(JSONSyntaxError) {
        _ = peek()
        try literal("null")
    }

    // MARK: Strings

    /// Scans (and checks) the string starting at the current byte, a `"`. Returns the range of its
    /// content, between the quotes, and whether that contains escapes.
    mutating func scanString() throws(JSONSyntaxError) -> (range: Range<Int>, escaped: Bool) {
        position += 1
        let start = position
        var escaped = false
        let base = UnsafeRawPointer(bytes.baseAddress!)
        while position < bytes.count {
            // Plain ASCII goes 8 bytes at a time, up to the first byte that needs a look.
            while bytes.count - position >= 8 {
                let word = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: position, as: UInt64.self))
                let special = JSONSWAR.special(word, nonASCII: true)
                if special == 0 {
                    position += 8
                } else {
                    position += JSONSWAR.firstFlaggedByte(special)
                    break
                }
            }
            guard position < bytes.count else { break }
            let b = bytes[position]
            if b == .quote {
                position += 1
                return (start..<(position - 1), escaped)
            }
            if b == .backslash {
                escaped = true
                try skipEscape()
            } else if b < 0x20 {
                throw error("control character in string")
            } else if b < 0x80 {
                position += 1
            } else {
                try skipUTF8Sequence()
            }
        }
        throw error("unterminated string")
    }

    /// Validates the multi-byte UTF-8 sequence at `position` (no overlong forms, no surrogates,
    /// nothing above U+10FFFF) and moves past it.
    private mutating func skipUTF8Sequence() throws(JSONSyntaxError) {
        let lead = bytes[position]
        let length: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0:
            length = 3
            low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED:
            length = 3
            high = 0x9F
        case 0xF0:
            length = 4
            low = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4:
            length = 4
            high = 0x8F
        default: throw error("invalid UTF-8")
        }
        guard bytes.count - position >= length else { throw error("invalid UTF-8") }
        let second = bytes[position + 1]
        guard second >= low, second <= high else { throw error("invalid UTF-8") }
        for k in 2..<length where bytes[position + k] & 0xC0 != 0x80 {
            throw error("invalid UTF-8")
        }
        position += length
    }

    /// Checks the escape at `position` (a backslash) and moves past it.
    private mutating func skipEscape() throws(JSONSyntaxError) {
        guard bytes.count - position >= 2 else { throw error("unterminated string") }
        let e = bytes[position + 1]
        position += 2
        switch e {
        case .quote, .backslash, .slash, .lowerB, .lowerF, .lowerN, .lowerR, .lowerT:
            return
        case .lowerU:
            let scalar = try hex4()
            if scalar >= 0xDC00, scalar <= 0xDFFF { throw error("unpaired surrogate escape") }
            if scalar >= 0xD800, scalar <= 0xDBFF {
                guard bytes.count - position >= 2, bytes[position] == .backslash, bytes[position + 1] == .lowerU else {
                    throw error("unpaired surrogate escape")
                }
                position += 2
                let trail = try hex4()
                guard trail >= 0xDC00, trail <= 0xDFFF else { throw error("unpaired surrogate escape") }
            }
        default:
            throw error("invalid escape")
        }
    }

    private mutating func hex4() throws(JSONSyntaxError) -> UInt32 {
        guard bytes.count - position >= 4 else { throw error("invalid \\u escape") }
        var value: UInt32 = 0
        for k in 0..<4 {
            guard let digit = Self.hexValue(bytes[position + k]) else { throw error("invalid \\u escape") }
            value = value << 4 | digit
        }
        position += 4
        return value
    }

    @inline(__always) private static func hexValue(_ b: UInt8) -> UInt32? {
        switch b {
        case 0x30...0x39: UInt32(b - 0x30)
        case 0x41...0x46: UInt32(b - 0x41 + 10)
        case 0x61...0x66: UInt32(b - 0x61 + 10)
        default: nil
        }
    }

    /// Writes the decoded content of a string already checked by `scanString()` to `out` (which holds
    /// at least `raw.count` bytes: decoding never lengthens) and returns the decoded length.
    private static func unescape(_ raw: UnsafeBufferPointer<UInt8>, into out: UnsafeMutableBufferPointer<UInt8>) -> Int {
        var written = 0
        var index = 0
        func put(_ b: UInt8) {
            out[written] = b
            written += 1
        }
        func hex(at k: Int) -> UInt32 {
            (0..<4).reduce(0) { $0 << 4 | hexValue(raw[k + $1])! }
        }
        while index < raw.count {
            let b = raw[index]
            guard b == .backslash else {
                put(b)
                index += 1
                continue
            }
            let e = raw[index + 1]
            index += 2
            switch e {
            case .lowerB: put(0x08)
            case .lowerF: put(0x0C)
            case .lowerN: put(0x0A)
            case .lowerR: put(0x0D)
            case .lowerT: put(0x09)
            case .lowerU:
                var scalar = hex(at: index)
                index += 4
                if scalar >= 0xD800, scalar <= 0xDBFF {
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (hex(at: index + 2) - 0xDC00)
                    index += 6
                }
                switch scalar {
                case 0..<0x80:
                    put(UInt8(scalar))
                case 0x80..<0x800:
                    put(UInt8(0xC0 | scalar >> 6))
                    put(UInt8(0x80 | scalar & 0x3F))
                case 0x800..<0x10000:
                    put(UInt8(0xE0 | scalar >> 12))
                    put(UInt8(0x80 | scalar >> 6 & 0x3F))
                    put(UInt8(0x80 | scalar & 0x3F))
                default:
                    put(UInt8(0xF0 | scalar >> 18))
                    put(UInt8(0x80 | scalar >> 12 & 0x3F))
                    put(UInt8(0x80 | scalar >> 6 & 0x3F))
                    put(UInt8(0x80 | scalar & 0x3F))
                }
            default: put(e) // " \ /
            }
        }
        return written
    }

    /// Reads the string at the current byte (which must be `"`).
    mutating func readString() throws(JSONSyntaxError) -> String {
        guard peek() == .quote else { throw error("expected a string") }
        let (range, escaped) = try scanString()
        let raw = UnsafeBufferPointer(rebasing: bytes[range])
        if !escaped { return String(decoding: raw, as: UTF8.self) }
        return String(unsafeUninitializedCapacity: raw.count) { Self.unescape(raw, into: $0) }
    }

    /// Reads the string at the current byte (which must be `"`) and returns its index in `table`
    /// (-1 when not there).
    mutating func readStringIndex(in table: JSONKeyTable) throws(JSONSyntaxError) -> Int {
        let (range, escaped) = try scanString()
        let raw = UnsafeBufferPointer(rebasing: bytes[range])
        if !escaped { return table.index(of: raw) }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: raw.count) { buffer in
            let count = Self.unescape(raw, into: buffer)
            return table.index(of: UnsafeBufferPointer(rebasing: buffer[..<count]))
        }
    }

    // MARK: Numbers

    @inline(__always) private func isDigit(at index: Int) -> Bool {
        index < bytes.count && bytes[index] &- 0x30 < 10
    }

    /// Scans a number at the current byte (`-` or a digit).
    mutating func scanNumber() throws(JSONSyntaxError) -> JSONNumberToken {
        let start = position
        let negative = bytes[position] == .minus
        if negative { position += 1 }
        guard isDigit(at: position) else { throw error("invalid number") }
        // Accumulated negatively so that Int64.min fits.
        var value: Int64 = 0
        var overflow = false
        if bytes[position] == .digitZero {
            position += 1
            if isDigit(at: position) { throw error("leading zero in number") }
        } else {
            while position < bytes.count {
                let digit = bytes[position] &- 0x30
                guard digit < 10 else { break }
                if !overflow {
                    let (shifted, o1) = value.multipliedReportingOverflow(by: 10)
                    let (next, o2) = shifted.subtractingReportingOverflow(Int64(digit))
                    if o1 || o2 { overflow = true } else { value = next }
                }
                position += 1
            }
        }
        var isIntegerLiteral = true
        if position < bytes.count, bytes[position] == .dot {
            isIntegerLiteral = false
            position += 1
            guard isDigit(at: position) else { throw error("invalid number") }
            while isDigit(at: position) { position += 1 }
        }
        if position < bytes.count, bytes[position] | 0x20 == .lowerE {
            isIntegerLiteral = false
            position += 1
            if position < bytes.count, bytes[position] == .plus || bytes[position] == .minus { position += 1 }
            guard isDigit(at: position) else { throw error("invalid number") }
            while isDigit(at: position) { position += 1 }
        }
        var integer: Int64?
        if isIntegerLiteral, !overflow {
            if negative { integer = value } else if value != .min { integer = -value }
        }
        return JSONNumberToken(start: start, end: position, isIntegerLiteral: isIntegerLiteral, integer: integer)
    }

    /// The token's value as a Double, nil when it is not finite (beyond ±Double.greatestFiniteMagnitude).
    func doubleValue(_ token: JSONNumberToken) -> Double? {
        if let integer = token.integer { return Double(integer) }
        if let fast = fastDouble(token) { return fast }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[token.start..<token.end]), as: UTF8.self)
        guard let value = Double(text), value.isFinite else { return nil }
        return value
    }

    /// Clinger's fast path: a significand below 2^53 scaled by an exactly representable power of ten
    /// is one correctly rounded IEEE operation.
    private func fastDouble(_ token: JSONNumberToken) -> Double? {
        var index = token.start
        let negative = bytes[index] == .minus
        if negative { index += 1 }
        var significand: UInt64 = 0
        var digits = 0
        var scale = 0
        var inFraction = false
        while index < token.end {
            let b = bytes[index]
            if b == .dot {
                inFraction = true
            } else if b &- 0x30 < 10 {
                if significand != 0 || b != .digitZero { digits += 1 }
                if digits > 15 { return nil }
                significand = significand * 10 + UInt64(b &- 0x30)
                if inFraction { scale -= 1 }
            } else {
                break
            }
            index += 1
        }
        if index < token.end {
            // Exponent.
            index += 1
            var expNegative = false
            if bytes[index] == .minus || bytes[index] == .plus {
                expNegative = bytes[index] == .minus
                index += 1
            }
            var exponent = 0
            while index < token.end {
                exponent = exponent * 10 + Int(bytes[index] &- 0x30)
                if exponent > 400 { return nil }
                index += 1
            }
            scale += expNegative ? -exponent : exponent
        }
        var value = Double(significand)
        if significand != 0 {
            guard scale >= -22, scale <= 22 else { return nil }
            value = scale < 0 ? value / powersOfTen[-scale] : value * powersOfTen[scale]
        }
        return negative ? -value : value
    }

    /// The token's value when it is a whole number within Int64's range, however it is written
    /// (`3`, `3.0`, `0.3e1`, `300e-2`, `-0`); nil for fractions and out-of-range values. Exact: no
    /// rounding through Double.
    func exactInteger(_ token: JSONNumberToken) -> Int64? {
        if token.isIntegerLiteral { return token.integer }
        var index = token.start
        let negative = bytes[index] == .minus
        if negative { index += 1 }
        // The value is digits × 10^(exponent − fractionDigits); only the digits from the first to the
        // last non-zero one matter, the zeros after them scale the value.
        var digitCount = 0
        var fractionDigits = 0
        var firstNonZero = -1
        var lastNonZero = -1
        var firstPosition = 0
        var lastPosition = 0
        var inFraction = false
        while index < token.end {
            let b = bytes[index]
            if b == .dot {
                inFraction = true
            } else if b &- 0x30 < 10 {
                if inFraction { fractionDigits += 1 }
                if b != .digitZero {
                    if firstNonZero < 0 {
                        firstNonZero = digitCount
                        firstPosition = index
                    }
                    lastNonZero = digitCount
                    lastPosition = index
                }
                digitCount += 1
            } else {
                break
            }
            index += 1
        }
        if firstNonZero < 0 { return 0 }
        var exponent = 0
        if index < token.end {
            index += 1
            var expNegative = false
            if bytes[index] == .minus || bytes[index] == .plus {
                expNegative = bytes[index] == .minus
                index += 1
            }
            while index < token.end {
                exponent = min(exponent * 10 + Int(bytes[index] &- 0x30), 1_000_000)
                index += 1
            }
            if expNegative { exponent = -exponent }
        }
        let power = exponent - fractionDigits + (digitCount - 1 - lastNonZero)
        let significant = lastNonZero - firstNonZero + 1
        if power < 0 || significant + power > 19 { return nil }
        var magnitude: UInt64 = 0
        for k in firstPosition...lastPosition where bytes[k] != .dot {
            magnitude = magnitude * 10 + UInt64(bytes[k] &- 0x30)
        }
        for _ in 0..<power {
            let (next, overflow) = magnitude.multipliedReportingOverflow(by: 10)
            if overflow { return nil }
            magnitude = next
        }
        if negative {
            if magnitude == UInt64(Int64.max) + 1 { return .min }
            return magnitude <= UInt64(Int64.max) ? -Int64(magnitude) : nil
        }
        return magnitude <= UInt64(Int64.max) ? Int64(magnitude) : nil
    }

    // MARK: Values

    /// Reads any value into a `JSONValue`. Numbers: integer literals within Int64 are `.int`, all
    /// others `.double`; a number beyond Double's range reads as `.null` and sets
    /// `sawUnrepresentableNumber`. Duplicate keys: the last one wins.
    mutating func readValue() throws(JSONSyntaxError) -> JSONValue {
        guard let b = peek() else { throw error("unexpected end of input") }
        switch b {
        case .quote:
            return .string(try readString())
        case .openBrace:
            var object: [String: JSONValue] = [:]
            if try beginObject() {
                repeat {
                    let key = try readKey()
                    object[key] = try readValue()
                } while try nextMember()
            }
            return .object(object)
        case .openBracket:
            var array: [JSONValue] = []
            if try beginArray() {
                repeat {
                    array.append(try readValue())
                } while try nextElement()
            }
            return .array(array)
        case .lowerT, .lowerF:
            return .bool(try readBool())
        case .lowerN:
            try readNull()
            return .null
        case .minus, 0x30...0x39:
            let token = try scanNumber()
            if let integer = token.integer { return .int(Int(integer)) }
            guard let value = doubleValue(token) else {
                sawUnrepresentableNumber = true
                return .null
            }
            return .double(value)
        default:
            throw error("unexpected character")
        }
    }

    /// Skips one value of any kind, checking its syntax.
    mutating func skipValue() throws(JSONSyntaxError) {
        guard let b = peek() else { throw error("unexpected end of input") }
        switch b {
        case .quote:
            _ = try scanString()
        case .openBrace:
            if try beginObject() {
                repeat {
                    guard peek() == .quote else { throw error("expected a string key") }
                    _ = try scanString()
                    try expectColon()
                    try skipValue()
                } while try nextMember()
            }
        case .openBracket:
            if try beginArray() {
                repeat {
                    try skipValue()
                } while try nextElement()
            }
        case .lowerT, .lowerF:
            _ = try readBool()
        case .lowerN:
            try readNull()
        case .minus, 0x30...0x39:
            _ = try scanNumber()
        default:
            throw error("unexpected character")
        }
    }

    /// Parses a complete JSON text (one value, surrounded by whitespace only).
    static func parse(
        _ bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int = defaultMaxDepth
    ) throws(JSONSyntaxError) -> JSONValue {
        var reader = JSONReader(bytes, maxDepth: maxDepth)
        let value = try reader.readValue()
        try reader.expectEnd()
        if reader.sawUnrepresentableNumber {
            throw JSONSyntaxError(kind: .syntax, offset: 0, message: "number out of range")
        }
        return value
    }
}

private let powersOfTen: [Double] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
]

/// Maps the UTF-8 bytes of a known name (an object key, an enum's raw value) to its index in a
/// fixed list without creating a String: an open-addressing hash table built once.
final class JSONKeyTable: @unchecked Sendable {
    let names: [String]
    private let storage: UnsafeMutablePointer<UInt8>
    private let offsets: UnsafeMutablePointer<Int>
    private let lengths: UnsafeMutablePointer<Int>
    private let slots: UnsafeMutablePointer<Int16>
    private let mask: Int

    init(_ names: [String]) {
        precondition(names.count < Int(Int16.max))
        self.names = names
        let total = names.reduce(0) { $0 + $1.utf8.count }
        storage = .allocate(capacity: max(total, 1))
        offsets = .allocate(capacity: max(names.count, 1))
        lengths = .allocate(capacity: max(names.count, 1))
        var size = 8
        while size < names.count * 4 { size *= 2 }
        mask = size - 1
        slots = .allocate(capacity: size)
        slots.initialize(repeating: -1, count: size)
        var offset = 0
        for (index, name) in names.enumerated() {
            let utf8 = Array(name.utf8)
            for (k, b) in utf8.enumerated() { storage[offset + k] = b }
            offsets[index] = offset
            lengths[index] = utf8.count
            var slot = Self.hash(UnsafePointer(storage + offset), utf8.count) & mask
            while slots[slot] >= 0 {
                precondition(names[Int(slots[slot])] != name, "duplicate name \(name)")
                slot = (slot + 1) & mask
            }
            slots[slot] = Int16(index)
            offset += utf8.count
        }
    }

    deinit {
        storage.deallocate()
        offsets.deallocate()
        lengths.deallocate()
        slots.deallocate()
    }

    @inline(__always) private static func hash(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> Int {
        // FNV-1a.
        var h: UInt32 = 2_166_136_261
        for k in 0..<count { h = (h ^ UInt32(bytes[k])) &* 16_777_619 }
        return Int(h)
    }

    /// The index of `key` in `names`, or -1.
    func index(of key: UnsafeBufferPointer<UInt8>) -> Int {
        guard let base = key.baseAddress else { return -1 }
        let count = key.count
        var slot = Self.hash(base, count) & mask
        while true {
            let candidate = Int(slots[slot])
            if candidate < 0 { return -1 }
            if lengths[candidate] == count {
                let name = storage + offsets[candidate]
                var k = 0
                while k < count, name[k] == base[k] { k += 1 }
                if k == count { return candidate }
            }
            slot = (slot + 1) & mask
        }
    }
}

extension UInt8 {
    @inline(__always) static var tab: UInt8 { 0x09 }
    @inline(__always) static var newline: UInt8 { 0x0A }
    @inline(__always) static var carriageReturn: UInt8 { 0x0D }
    @inline(__always) static var space: UInt8 { 0x20 }
    @inline(__always) static var quote: UInt8 { 0x22 }
    @inline(__always) static var plus: UInt8 { 0x2B }
    @inline(__always) static var comma: UInt8 { 0x2C }
    @inline(__always) static var minus: UInt8 { 0x2D }
    @inline(__always) static var dot: UInt8 { 0x2E }
    @inline(__always) static var slash: UInt8 { 0x2F }
    @inline(__always) static var digitZero: UInt8 { 0x30 }
    @inline(__always) static var colon: UInt8 { 0x3A }
    @inline(__always) static var openBracket: UInt8 { 0x5B }
    @inline(__always) static var backslash: UInt8 { 0x5C }
    @inline(__always) static var closeBracket: UInt8 { 0x5D }
    @inline(__always) static var lowerB: UInt8 { 0x62 }
    @inline(__always) static var lowerE: UInt8 { 0x65 }
    @inline(__always) static var lowerF: UInt8 { 0x66 }
    @inline(__always) static var lowerN: UInt8 { 0x6E }
    @inline(__always) static var lowerR: UInt8 { 0x72 }
    @inline(__always) static var lowerT: UInt8 { 0x74 }
    @inline(__always) static var lowerU: UInt8 { 0x75 }
    @inline(__always) static var openBrace: UInt8 { 0x7B }
    @inline(__always) static var closeBrace: UInt8 { 0x7D }
}

/// Word-at-a-time tests on 8 bytes (SWAR), to skip runs of plain ASCII.
enum JSONSWAR {
    /// Flags (in their high bits) the bytes of `word` that are `"`, `\`, below 0x20 or, with
    /// `nonASCII`, above 0x7F; zero when there are none. Flags above the first flagged byte may be
    /// spurious, the first one never is.
    @inline(__always) static func special(_ word: UInt64, nonASCII: Bool) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highBits: UInt64 = 0x8080_8080_8080_8080
        let quotes = word ^ (ones &* 0x22)
        let backslashes = word ^ (ones &* 0x5C)
        // A byte is zero / below 0x20 exactly when the subtraction borrows into its high bit.
        let found = ((quotes &- ones) & ~quotes) | ((backslashes &- ones) & ~backslashes) | ((word &- ones &* 0x20) & ~word)
        return (found | (nonASCII ? word : 0)) & highBits
    }

    /// The index of the first byte flagged by `special` (not zero) in a word loaded little-endian.
    @inline(__always) static func firstFlaggedByte(_ flags: UInt64) -> Int {
        flags.trailingZeroBitCount >> 3
    }
}
