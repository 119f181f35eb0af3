// The writing half of the hand-written JSON codec (see JSONReader.swift for why it is hand-written).

/// Compact JSON output, written into a growable byte buffer (on the stack while it fits).
///
/// Strings: `"`, `\` and control characters are escaped (`\n`, `\t`, `\r`, `\b`, `\f`, else
/// `\u00XX`); `/` and non-ASCII characters are written as they are (raw UTF-8). Doubles use Swift's
/// shortest round-trip `description`, which always has a `.` or an exponent, so they read back as
/// doubles (`2.0`, not `2`); non-finite doubles, which JSON cannot express, are written as `null`.
/// Objects of a `JSONValue` are written with their keys sorted by UTF-8 bytes.
struct JSONOutput: ~Copyable {
    private var start: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    private var ownsStorage: Bool
    private(set) var count = 0

    private init(stack: UnsafeMutableBufferPointer<UInt8>) {
        start = stack.baseAddress!
        capacity = stack.count
        ownsStorage = false
    }

    deinit {
        if ownsStorage { start.deallocate() }
    }

    /// Runs `body` with an empty output whose first kilobyte lives on the stack.
    static func with<R>(_ body: (inout JSONOutput) -> R) -> R {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1024) { stack in
            var output = JSONOutput(stack: stack)
            return body(&output)
        }
    }

    /// The bytes written so far.
    var bytes: UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(start: start, count: count) }

    @inline(__always) private mutating func reserve(_ extra: Int) {
        if capacity - count < extra { grow(extra) }
    }

    @inline(never) private mutating func grow(_ extra: Int) {
        let newCapacity = max(capacity * 2, count + extra)
        let storage = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        storage.update(from: start, count: count)
        if ownsStorage { start.deallocate() }
        start = storage
        capacity = newCapacity
        ownsStorage = true
    }

    @inline(__always) mutating func append(_ byte: UInt8) {
        reserve(1)
        start[count] = byte
        count += 1
    }

    @inline(__always) mutating func append(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let source = bytes.baseAddress else { return }
        reserve(bytes.count)
        (start + count).update(from: source, count: bytes.count)
        count += bytes.count
    }

    @inline(__always) mutating func appendJSONRaw(_ text: StaticString) {
        append(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    mutating func appendJSONString(_ string: String) {
        append(.quote)
        let done: Void? = string.utf8.withContiguousStorageIfAvailable { appendJSONEscaped($0) }
        if done == nil {
            var copy = string
            copy.withUTF8 { appendJSONEscaped($0) }
        }
        append(.quote)
    }

    private mutating func appendJSONEscaped(_ utf8: UnsafeBufferPointer<UInt8>) {
        guard let base = utf8.baseAddress else { return }
        var run = 0
        var index = 0
        while index < utf8.count {
            // Bytes that need no escape go 8 at a time, up to the first one that does.
            while utf8.count - index >= 8 {
                let word = UInt64(littleEndian: UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self))
                let special = JSONSWAR.special(word, nonASCII: false)
                if special == 0 {
                    index += 8
                } else {
                    index += JSONSWAR.firstFlaggedByte(special)
                    break
                }
            }
            guard index < utf8.count else { break }
            let b = utf8[index]
            if b >= 0x20, b != .quote, b != .backslash {
                index += 1
                continue
            }
            append(UnsafeBufferPointer(rebasing: utf8[run..<index]))
            reserve(6)
            start[count] = .backslash
            switch b {
            case .quote, .backslash: start[count + 1] = b
            case .newline: start[count + 1] = .lowerN
            case .tab: start[count + 1] = .lowerT
            case .carriageReturn: start[count + 1] = .lowerR
            case 0x08: start[count + 1] = .lowerB
            case 0x0C: start[count + 1] = .lowerF
            default:
                start[count + 1] = .lowerU
                start[count + 2] = 0x30
                start[count + 3] = 0x30
                start[count + 4] = Self.hexDigit(b >> 4)
                start[count + 5] = Self.hexDigit(b & 0x0F)
                count += 4
            }
            count += 2
            index += 1
            run = index
        }
        append(UnsafeBufferPointer(rebasing: utf8[run...]))
    }

    @inline(__always) private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? 0x30 + nibble : 0x61 + nibble - 10
    }

    mutating func appendJSONInt(_ value: Int64) {
        var magnitude = value.magnitude
        var digits = 1
        var rest = magnitude
        while rest >= 10 {
            rest /= 10
            digits += 1
        }
        let length = digits + (value < 0 ? 1 : 0)
        reserve(length)
        var index = count + length - 1
        repeat {
            start[index] = 0x30 + UInt8(magnitude % 10)
            magnitude /= 10
            index -= 1
        } while magnitude > 0
        if value < 0 { start[count] = .minus }
        count += length
    }

    @inline(__always) mutating func appendJSONInt(_ value: Int) {
        appendJSONInt(Int64(value))
    }

    mutating func appendJSONDouble(_ value: Double) {
        guard value.isFinite else {
            appendJSONRaw("null")
            return
        }
        var text = value.description
        text.withUTF8 { append($0) }
    }

    @inline(__always) mutating func appendJSONBool(_ value: Bool) {
        if value { appendJSONRaw("true") } else { appendJSONRaw("false") }
    }

    mutating func appendJSONStrings(_ strings: [String]) {
        append(.openBracket)
        for (index, string) in strings.enumerated() {
            if index > 0 { append(.comma) }
            appendJSONString(string)
        }
        append(.closeBracket)
    }

    mutating func appendJSONArray<T>(_ elements: [T], _ write: (T, inout JSONOutput) -> Void) {
        append(.openBracket)
        for (index, element) in elements.enumerated() {
            if index > 0 { append(.comma) }
            write(element, &self)
        }
        append(.closeBracket)
    }

    /// Writes an object's members sorted by key (UTF-8 byte order).
    mutating func appendJSONObject(_ object: [String: JSONValue]) {
        append(.openBrace)
        if object.count == 1, let (key, value) = object.first {
            appendJSONString(key)
            append(.colon)
            appendJSONValue(value)
        } else if object.count > 1 {
            let members = object.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
            for (index, member) in members.enumerated() {
                if index > 0 { append(.comma) }
                appendJSONString(member.key)
                append(.colon)
                appendJSONValue(member.value)
            }
        }
        append(.closeBrace)
    }

    mutating func appendJSONValue(_ value: JSONValue) {
        switch value {
        case .null: appendJSONRaw("null")
        case .bool(let b): appendJSONBool(b)
        case .int(let i): appendJSONInt(i)
        case .double(let d): appendJSONDouble(d)
        case .string(let s): appendJSONString(s)
        case .array(let elements):
            append(.openBracket)
            for (index, element) in elements.enumerated() {
                if index > 0 { append(.comma) }
                appendJSONValue(element)
            }
            append(.closeBracket)
        case .object(let object):
            appendJSONObject(object)
        }
    }

    /// One member of an object, its key written with the `{` or `,` before it: the generated writers
    /// (Command+JSON.generated.swift) write each field with one call.
    @inline(__always) mutating func appendJSONMember<Value: JSONWritable>(_ key: StaticString, _ value: Value) {
        appendJSONRaw(key)
        value.writeJSON(into: &self)
    }
}

/// A value of a field: what the generated writers write after a key.
protocol JSONWritable {
    func writeJSON(into out: inout JSONOutput)
}

extension String: JSONWritable {
    @inline(__always) func writeJSON(into out: inout JSONOutput) { out.appendJSONString(self) }
}

extension Int: JSONWritable {
    @inline(__always) func writeJSON(into out: inout JSONOutput) { out.appendJSONInt(self) }
}

extension Int64: JSONWritable {
    @inline(__always) func writeJSON(into out: inout JSONOutput) { out.appendJSONInt(self) }
}

extension Bool: JSONWritable {
    @inline(__always) func writeJSON(into out: inout JSONOutput) { out.appendJSONBool(self) }
}

extension JSONValue: JSONWritable {
    @inline(__always) func writeJSON(into out: inout JSONOutput) { out.appendJSONValue(self) }
}

extension Dictionary: JSONWritable where Key == String, Value == JSONValue {
    @inline(__always) func writeJSON(into out: inout JSONOutput) { out.appendJSONObject(self) }
}

extension Array: JSONWritable where Element: JSONWritable {
    @inline(__always) func writeJSON(into out: inout JSONOutput) {
        out.appendJSONArray(self) { $0.writeJSON(into: &$1) }
    }
}
