/// A JSON value: attributes, query conditions and cmd-message extensions travel as this type, and so do
/// plugin config, state values and message attributes in the hook runtime.
public enum JSONValue: Sendable, Hashable, Codable {
    case null
    case bool(Bool)
    /// Integers (64-bit: this package targets 64-bit platforms) are kept apart from doubles, so that Lua
    /// integers and JSON integer literals round-trip as integers.
    case int(Int)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let b = try? c.decode(Bool.self) {
            self = .bool(b)
        } else if let i = try? c.decode(Int.self) {
            self = .int(i)
        } else if let d = try? c.decode(Double.self) {
            self = .double(d)
        } else if let s = try? c.decode(String.self) {
            self = .string(s)
        } else if let a = try? c.decode([JSONValue].self) {
            self = .array(a)
        } else if let o = try? c.decode([String: JSONValue].self) {
            self = .object(o)
        } else {
            throw DecodingError.dataCorruptedError(in: c, debugDescription: "not a JSON value")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .int(let i): try c.encode(i)
        case .double(let d): try c.encode(d)
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }

    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }
    public var boolValue: Bool? { if case .bool(let b) = self { b } else { nil } }
    public var objectValue: [String: JSONValue]? { if case .object(let o) = self { o } else { nil } }
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { a } else { nil } }
    /// Numeric value as a Double (ints widen).
    public var doubleValue: Double? {
        switch self {
        case .int(let i): Double(i)
        case .double(let d): d
        default: nil
        }
    }
    public var intValue: Int? {
        switch self {
        case .int(let i): i
        case .double(let d) where d.rounded() == d && abs(d) < 9.0e15: Int(d)
        default: nil
        }
    }

    public subscript(key: String) -> JSONValue? { objectValue?[key] }

    /// Compact JSON text with sorted keys (stable for storage and comparison). Doubles keep a `.` or
    /// an exponent (`2.0`), so they read back as doubles; non-finite ones are written as `null`.
    public func jsonString() -> String {
        JSONOutput.with { output in
            output.appendJSONValue(self)
            return String(decoding: output.bytes, as: UTF8.self)
        }
    }

    /// Appends the compact JSON text of `jsonString()` to `buffer`.
    public func writeJSON(into buffer: inout [UInt8]) {
        JSONOutput.with { output in
            output.appendJSONValue(self)
            buffer.append(contentsOf: output.bytes)
        }
    }

    /// Parses JSON text; returns nil when the text is not JSON (RFC 8259, containers nested at most
    /// 64 deep, numbers within Double's range). Integer literals within Int64 read as `.int`, other
    /// numbers (`2.0`, `1e3`, larger integers) as `.double`; of duplicate keys the last one wins.
    public static func parse(_ text: String) -> JSONValue? {
        var text = text
        return text.withUTF8 { try? JSONReader.parse($0) }
    }

    /// Parses JSON text like `parse(_:)`, throwing an error that says what is wrong and where.
    public init(parsing text: String) throws {
        var text = text
        self = try text.withUTF8 { bytes throws(JSONSyntaxError) in try JSONReader.parse(bytes) }
    }

    /// Parses JSON text given as UTF-8 bytes, like `parse(_:)`.
    public static func parse<Bytes: Collection<UInt8>>(bytes: Bytes) -> JSONValue? {
        if let value = bytes.withContiguousStorageIfAvailable({ try? JSONReader.parse($0) }) { return value }
        return Array(bytes).withUnsafeBufferPointer { try? JSONReader.parse($0) }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByFloatLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}
