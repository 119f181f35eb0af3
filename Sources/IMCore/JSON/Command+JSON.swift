// Mapping between `Command` (and its nested structs) and JSON bytes, without Codable: the decoder
// walks the frame with `JSONReader` and matches keys as bytes (see JSONReader.swift for why this is
// hand-written). The code for each field (key tables, the decoders' switches, the writers) is
// generated from scripts/command-fields.json into Command+JSON.generated.swift; this file holds what
// is not a field: the readers of each kind of value, the errors, and the frame's entry point.

/// Where a field's value was wrong, as the path below that field (`["0", "m"]`).
struct JSONFieldFailure: Sendable, Equatable {
    var path: [String]
    /// A required field was absent (rather than of the wrong type).
    var missing: Bool

    static let here = JSONFieldFailure(path: [], missing: false)

    static func missing(_ field: String) -> JSONFieldFailure {
        JSONFieldFailure(path: [field], missing: true)
    }

    func below(_ component: String) -> JSONFieldFailure {
        JSONFieldFailure(path: [component] + path, missing: missing)
    }

    /// The detail of the 4901 error.
    var detail: String {
        let dotted = path.joined(separator: ".")
        return missing ? "missing field '\(dotted)'" : "invalid value for field '\(dotted)'"
    }
}

/// A field value as decoded: the value, or where it was wrong (the value has been skipped then).
enum JSONDecoded<Value> {
    case value(Value)
    case invalid(JSONFieldFailure)
}

/// Maps null to an error: for fields that are not optional.
@inline(__always) func requiredValue<T>(_ decoded: JSONDecoded<T?>) -> JSONDecoded<T?> {
    if case .value(nil) = decoded { return .invalid(.here) }
    return decoded
}

/// The type errors of one object's fields, by field number. As with values, the last occurrence of
/// a duplicated key decides.
struct JSONFieldErrors {
    private var failures: [(field: Int, failure: JSONFieldFailure)] = []

    @inline(__always) mutating func take<T>(_ decoded: JSONDecoded<T?>, _ field: Int) -> T? {
        if !failures.isEmpty { failures.removeAll { $0.field == field } }
        switch decoded {
        case .value(let value):
            return value
        case .invalid(let failure):
            failures.append((field, failure))
            return nil
        }
    }

    func has(_ field: Int) -> Bool {
        failures.contains { $0.field == field }
    }

    /// The first failure in the object, with its field's name in front.
    func first(in keys: JSONKeyTable) -> JSONFieldFailure? {
        failures.first.map { $0.failure.below(keys.names[$0.field]) }
    }
}

/// The state of `cmd` or `op` after reading a frame.
enum JSONEnumField<Value> {
    case absent
    case invalid
    case unknown(String)
    case known(Value)
}

let commandTypes = CommandType.allCases
let commandTypeKeys = JSONKeyTable(commandTypes.map(\.rawValue))
let opTypes = OpType.allCases
let opTypeKeys = JSONKeyTable(opTypes.map(\.rawValue))

extension JSONReader {
    @inline(__always) private static func startsNumber(_ b: UInt8) -> Bool {
        b == .minus || b &- 0x30 < 10
    }

    /// A value that is not of the field's type: null is nil (not set), anything else is skipped, invalid.
    @inline(__always) private mutating func nullOrInvalid<Value>() throws(JSONSyntaxError) -> JSONDecoded<Value?> {
        if peek() == .lowerN {
            try readNull()
            return .value(nil)
        }
        try skipValue()
        return .invalid(.here)
    }

    /// A string, or null (nil).
    mutating func decodeString() throws(JSONSyntaxError) -> JSONDecoded<String?> {
        guard peek() == .quote else { return try nullOrInvalid() }
        return .value(try readString())
    }

    /// A whole number within Int64 (however written: `3`, `3.0`, `3e0`), or null (nil).
    mutating func decodeInt64() throws(JSONSyntaxError) -> JSONDecoded<Int64?> {
        guard let b = peek() else { throw error("unexpected end of input") }
        guard Self.startsNumber(b) else { return try nullOrInvalid() }
        let token = try scanNumber()
        if let value = exactInteger(token) { return .value(value) }
        return .invalid(.here)
    }

    mutating func decodeInt() throws(JSONSyntaxError) -> JSONDecoded<Int?> {
        switch try decodeInt64() {
        case .value(nil): return .value(nil)
        case .value(let value?):
            guard let int = Int(exactly: value) else { return .invalid(.here) }
            return .value(int)
        case .invalid(let failure): return .invalid(failure)
        }
    }

    mutating func decodeBool() throws(JSONSyntaxError) -> JSONDecoded<Bool?> {
        let first = peek()
        guard first == .lowerT || first == .lowerF else { return try nullOrInvalid() }
        return .value(try readBool())
    }

    /// An array of elements decoded by `element`, or null (nil). The first bad element is reported
    /// (by index); the rest of the array is still read.
    mutating func decodeArray<Element>(
        _ element: (inout JSONReader) throws(JSONSyntaxError) -> JSONDecoded<Element>
    ) throws(JSONSyntaxError) -> JSONDecoded<[Element]?> {
        guard peek() == .openBracket else { return try nullOrInvalid() }
        var elements: [Element] = []
        var failure: JSONFieldFailure?
        if try beginArray() {
            repeat {
                switch try element(&self) {
                case .value(let value):
                    if failure == nil { elements.append(value) }
                case .invalid(let bad):
                    if failure == nil { failure = bad.below(String(elements.count)) }
                }
            } while try nextElement()
        }
        if let failure { return .invalid(failure) }
        return .value(elements)
    }

    mutating func decodeStrings() throws(JSONSyntaxError) -> JSONDecoded<[String]?> {
        try decodeArray { (reader: inout JSONReader) throws(JSONSyntaxError) -> JSONDecoded<String> in
            guard reader.peek() == .quote else {
                try reader.skipValue()
                return .invalid(.here)
            }
            return .value(try reader.readString())
        }
    }

    /// Any JSON value but null (nil); a number beyond Double's range is invalid.
    mutating func decodeAny() throws(JSONSyntaxError) -> JSONDecoded<JSONValue?> {
        if peek() == .lowerN {
            try readNull()
            return .value(nil)
        }
        sawUnrepresentableNumber = false
        let value = try readValue()
        return sawUnrepresentableNumber ? .invalid(.here) : .value(value)
    }

    /// An object of JSON values, or null (nil).
    mutating func decodeObject() throws(JSONSyntaxError) -> JSONDecoded<[String: JSONValue]?> {
        guard peek() == .openBrace else { return try nullOrInvalid() }
        sawUnrepresentableNumber = false
        guard case .object(let object) = try readValue(), !sawUnrepresentableNumber else { return .invalid(.here) }
        return .value(object)
    }

    /// Text, or an object taken as its JSON text; null is nil, anything else invalid. Hand-kept because it is
    /// not a plain field: LeanCloud's SDKs send `pushData` as the JSON object's text, Hookbot's clients may
    /// send the object itself.
    mutating func decodeTextOrObject() throws(JSONSyntaxError) -> JSONDecoded<String?> {
        switch try decodeAny() {
        case .invalid(let failure): return .invalid(failure)
        case .value(nil): return .value(nil)
        case .value(let value?):
            if let text = value.stringValue { return .value(text) }
            if value.objectValue != nil { return .value(value.jsonString()) }
            return .invalid(.here)
        }
    }

    /// A string naming one of `cases` (by their keys in `table`), or null (absent).
    mutating func decodeEnum<Value>(
        _ table: JSONKeyTable, _ cases: [Value]
    ) throws(JSONSyntaxError) -> JSONEnumField<Value> {
        switch peek() {
        case .quote?:
            let start = position
            let index = try readStringIndex(in: table)
            if index >= 0 { return .known(cases[index]) }
            // Read it again as a String, for the error message.
            position = start
            return .unknown(try readString())
        case .lowerN?:
            try readNull()
            return .absent
        default:
            try skipValue()
            return .invalid
        }
    }
}

extension Command {
    /// Decodes one frame into `command` (a fresh one: only the frame's fields are set). Errors, in
    /// this order: not a JSON object (4901, no serial), `cmd` missing or not a string (4901), unknown
    /// `cmd` or `op` (4902), `op` not a string or a field of the wrong type (4901, naming the field).
    /// The serial is the frame's `i` whenever that is an integer.
    static func decodeJSON(_ bytes: UnsafeBufferPointer<UInt8>, into command: inout Command) -> CommandDecodingError? {
        var reader = JSONReader(bytes)
        var cmd = JSONEnumField<CommandType>.absent
        var op = JSONEnumField<OpType>.absent
        var errors = JSONFieldErrors()
        do throws(JSONSyntaxError) {
            guard reader.peek() == .openBrace else { throw reader.error("not an object") }
            if try reader.beginObject() {
                try command.decodeJSONMembers(&reader, cmd: &cmd, op: &op, errors: &errors)
            }
            try reader.expectEnd()
        } catch {
            let detail = error.kind == .tooDeep ? error.message : "frame is not a JSON object"
            return CommandDecodingError(error: IMError(.malformedCommand, detail), requestSerial: nil)
        }
        let serial = errors.has(serialJSONField) ? nil : command.i
        func fail(_ code: IMErrorCode, _ detail: String) -> CommandDecodingError {
            CommandDecodingError(error: IMError(code, detail), requestSerial: serial)
        }
        switch cmd {
        case .absent: return fail(.malformedCommand, "missing field 'cmd'")
        case .invalid: return fail(.malformedCommand, "invalid value for field 'cmd'")
        case .unknown(let name): return fail(.unknownCommand, "unknown cmd '\(name)'")
        case .known(let type): command.cmd = type
        }
        switch op {
        case .absent: break
        case .invalid: return fail(.malformedCommand, "invalid value for field 'op'")
        case .unknown(let name): return fail(.unknownCommand, "unknown op '\(name)'")
        case .known(let type): command.op = type
        }
        if let failure = errors.first(in: jsonKeys) { return fail(.malformedCommand, failure.detail) }
        return nil
    }
}
