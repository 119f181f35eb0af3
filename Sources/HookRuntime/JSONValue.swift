import Foundation

/// A JSON-compatible value: plugin config, state values, message attributes
/// and command extras. Integers and floating point numbers are kept apart so
/// that Lua integers round-trip as integers. Code importing IMCore as well
/// must qualify it as `HookRuntime.JSONValue`.
public enum JSONValue: Sendable, Hashable, Codable {
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null; return }
        if let b = try? c.decode(Bool.self) { self = .bool(b); return }
        if let i = try? c.decode(Int.self) { self = .int(i); return }
        if let d = try? c.decode(Double.self) { self = .double(d); return }
        if let s = try? c.decode(String.self) { self = .string(s); return }
        if let a = try? c.decode([JSONValue].self) { self = .array(a); return }
        if let o = try? c.decode([String: JSONValue].self) { self = .object(o); return }
        throw DecodingError.dataCorruptedError(in: c, debugDescription: "not a JSON value")
    }

    public func encode(to encoder: Encoder) throws {
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

    public subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    public var stringValue: String? { if case .string(let s) = self { return s }; return nil }
    public var intValue: Int? {
        switch self {
        case .int(let i): return i
        case .double(let d): return d.rounded() == d && abs(d) < 9e15 ? Int(d) : nil
        default: return nil
        }
    }
    public var doubleValue: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }
    public var boolValue: Bool? { if case .bool(let b) = self { return b }; return nil }
    public var objectValue: [String: JSONValue]? { if case .object(let o) = self { return o }; return nil }
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { return a }; return nil }

    /// Compact JSON text. Floats that happen to be integral keep a ".0" so they
    /// decode as floats again.
    public var jsonText: String {
        var out = ""
        write(into: &out)
        return out
    }

    func write(into out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .int(let i): out += String(i)
        case .double(let d):
            if !d.isFinite { out += "null" }
            else if d.rounded() == d && abs(d) < 1e15 { out += String(Int(d)); out += ".0" }
            else { out += "\(d)" }
        case .string(let s): JSONValue.writeString(s, into: &out)
        case .array(let a):
            out += "["
            for (i, v) in a.enumerated() { if i > 0 { out += "," }; v.write(into: &out) }
            out += "]"
        case .object(let o):
            out += "{"
            for (i, k) in o.keys.sorted().enumerated() {
                if i > 0 { out += "," }
                JSONValue.writeString(k, into: &out)
                out += ":"
                o[k]!.write(into: &out)
            }
            out += "}"
        }
    }

    static func writeString(_ s: String, into out: inout String) {
        out += "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if u.value < 0x20 {
                    let h = String(u.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - h.count) + h
                } else {
                    out.unicodeScalars.append(u)
                }
            }
        }
        out += "\""
    }

    /// Parses JSON text (as produced by `jsonText` or any JSON encoder).
    public init(jsonText: String) throws {
        var p = JSONParser(Array(jsonText.utf8))
        self = try p.parseDocument()
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, b in b }))
    }
    public init(nilLiteral: ()) { self = .null }
}

struct JSONParseError: Error, CustomStringConvertible {
    var description: String
}

/// Small strict JSON parser (keeps the int/double distinction).
struct JSONParser {
    let b: [UInt8]
    var i = 0
    init(_ b: [UInt8]) { self.b = b }

    mutating func parseDocument() throws -> JSONValue {
        let v = try parseValue(depth: 0)
        skipWS()
        if i != b.count { throw JSONParseError(description: "trailing characters at \(i)") }
        return v
    }

    mutating func skipWS() {
        while i < b.count, b[i] == 0x20 || b[i] == 0x0A || b[i] == 0x0D || b[i] == 0x09 { i += 1 }
    }

    mutating func expect(_ s: String) throws {
        for c in s.utf8 {
            guard i < b.count, b[i] == c else { throw JSONParseError(description: "expected \(s) at \(i)") }
            i += 1
        }
    }

    mutating func parseValue(depth: Int) throws -> JSONValue {
        if depth > 200 { throw JSONParseError(description: "nesting too deep") }
        skipWS()
        guard i < b.count else { throw JSONParseError(description: "unexpected end") }
        switch b[i] {
        case UInt8(ascii: "n"): try expect("null"); return .null
        case UInt8(ascii: "t"): try expect("true"); return .bool(true)
        case UInt8(ascii: "f"): try expect("false"); return .bool(false)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "["):
            i += 1
            var arr: [JSONValue] = []
            skipWS()
            if i < b.count, b[i] == UInt8(ascii: "]") { i += 1; return .array(arr) }
            while true {
                arr.append(try parseValue(depth: depth + 1))
                skipWS()
                guard i < b.count else { throw JSONParseError(description: "unexpected end") }
                if b[i] == UInt8(ascii: ",") { i += 1; continue }
                if b[i] == UInt8(ascii: "]") { i += 1; return .array(arr) }
                throw JSONParseError(description: "expected , or ] at \(i)")
            }
        case UInt8(ascii: "{"):
            i += 1
            var obj: [String: JSONValue] = [:]
            skipWS()
            if i < b.count, b[i] == UInt8(ascii: "}") { i += 1; return .object(obj) }
            while true {
                skipWS()
                guard i < b.count, b[i] == UInt8(ascii: "\"") else { throw JSONParseError(description: "expected key at \(i)") }
                let k = try parseString()
                skipWS()
                try expect(":")
                obj[k] = try parseValue(depth: depth + 1)
                skipWS()
                guard i < b.count else { throw JSONParseError(description: "unexpected end") }
                if b[i] == UInt8(ascii: ",") { i += 1; continue }
                if b[i] == UInt8(ascii: "}") { i += 1; return .object(obj) }
                throw JSONParseError(description: "expected , or } at \(i)")
            }
        default:
            return try parseNumber()
        }
    }

    mutating func parseNumber() throws -> JSONValue {
        let start = i
        var isFloat = false
        while i < b.count {
            let c = b[i]
            if (c >= 0x30 && c <= 0x39) || c == UInt8(ascii: "-") || c == UInt8(ascii: "+") { i += 1 }
            else if c == UInt8(ascii: ".") || c == UInt8(ascii: "e") || c == UInt8(ascii: "E") { isFloat = true; i += 1 }
            else { break }
        }
        guard i > start, let s = String(bytes: b[start..<i], encoding: .utf8) else {
            throw JSONParseError(description: "bad value at \(start)")
        }
        if !isFloat, let v = Int(s) { return .int(v) }
        guard let d = Double(s) else { throw JSONParseError(description: "bad number \(s)") }
        return .double(d)
    }

    mutating func parseHex4() throws -> UInt32 {
        guard i + 4 <= b.count, let s = String(bytes: b[i..<i + 4], encoding: .ascii), let v = UInt32(s, radix: 16) else {
            throw JSONParseError(description: "bad \\u escape")
        }
        i += 4
        return v
    }

    mutating func parseString() throws -> String {
        i += 1  // opening quote
        var bytes: [UInt8] = []
        while i < b.count {
            let c = b[i]
            if c == UInt8(ascii: "\"") {
                i += 1
                return String(decoding: bytes, as: UTF8.self)
            }
            if c == UInt8(ascii: "\\") {
                i += 1
                guard i < b.count else { break }
                let e = b[i]
                i += 1
                switch e {
                case UInt8(ascii: "n"): bytes.append(0x0A)
                case UInt8(ascii: "t"): bytes.append(0x09)
                case UInt8(ascii: "r"): bytes.append(0x0D)
                case UInt8(ascii: "b"): bytes.append(0x08)
                case UInt8(ascii: "f"): bytes.append(0x0C)
                case UInt8(ascii: "u"):
                    var v = try parseHex4()
                    if v >= 0xD800 && v < 0xDC00, i + 6 <= b.count, b[i] == UInt8(ascii: "\\"), b[i + 1] == UInt8(ascii: "u") {
                        i += 2
                        let lo = try parseHex4()
                        v = 0x10000 + ((v - 0xD800) << 10) + (lo &- 0xDC00)
                    }
                    let scalar = Unicode.Scalar(v) ?? "\u{FFFD}"
                    bytes.append(contentsOf: Array(String(Character(scalar)).utf8))
                default: bytes.append(e)
                }
                continue
            }
            bytes.append(c)
            i += 1
        }
        throw JSONParseError(description: "unterminated string")
    }
}
