import Foundation
import IMCore

/// scripts/command-fields.json read with Foundation's `JSONSerialization`, and an oracle built on it: a
/// decoded `Command` is compared, field by field through the table, with what `JSONSerialization` (an
/// independent decoder) reads from the same text; the fields are read from the value by reflection.
struct CommandTable {
    struct Field {
        var name: String
        var type: String
        var required: Bool
        var textOrObject: Bool
    }

    /// Fields of each struct, in table order.
    var structs: [String: [Field]] = [:]

    static let root = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static let shared: CommandTable = {
        let data = try! Data(contentsOf: root.appendingPathComponent("scripts/command-fields.json"))
        let document = try! JSONSerialization.jsonObject(with: data) as! [String: Any]
        var table = CommandTable()
        for entry in document["structs"] as! [[String: Any]] {
            table.structs[entry["name"] as! String] = (entry["fields"] as! [[String: Any]]).map { field in
                Field(
                    name: field["name"] as! String, type: field["type"] as! String, required: field["required"] as? Bool ?? false,
                    textOrObject: field["jsonReader"] as? String == "decodeTextOrObject")
            }
        }
        return table
    }()

    func fields(_ structName: String) -> [Field] { structs[structName]! }

    // MARK: The oracle

    /// Where `value` (a `Command` or a nested struct) differs from `object`, as read by `JSONSerialization`:
    /// a field set in one and absent (or null) in the other, or holding another value. `exact`: `object` may
    /// have no keys outside the table (it is what the codec wrote).
    func differences(_ value: Any, _ object: [String: Any], as structName: String, exact: Bool = false, at path: String = "")
        -> [String]
    {
        var found: [String] = []
        let children = Dictionary(
            Mirror(reflecting: value).children.map { ($0.label!, $0.value) }, uniquingKeysWith: { first, _ in first })
        let fields = fields(structName)
        for field in fields {
            let actual = children[field.name].flatMap(Self.unwrapped)
            let expected = object[field.name].flatMap { $0 is NSNull ? nil : $0 }
            let where_ = path + field.name
            switch (actual, expected) {
            case (nil, nil): continue
            case (nil, _?): found.append("\(where_): absent, JSON has \(expected!)")
            case (_?, nil): found.append("\(where_): \(actual!), absent in JSON")
            case (let actual?, let expected?):
                found += differences(actual, expected, field: field, at: where_)
            }
        }
        if exact {
            let known = Set(fields.map(\.name))
            found += object.keys.filter { !known.contains($0) }.map { "\(path)\($0): not a field" }
        }
        return found
    }

    private func differences(_ actual: Any, _ expected: Any, field: Field, at path: String) -> [String] {
        let mismatch = ["\(path): \(actual) ≠ \(expected)"]
        if let item = field.type.wrappedElement, structs[item] != nil {
            guard let values = actual as? [Any], let objects = expected as? [[String: Any]], values.count == objects.count else {
                return mismatch
            }
            return zip(values, objects).enumerated().flatMap { index, pair in
                differences(pair.0, pair.1, as: item, at: "\(path).\(index).")
            }
        }
        switch field.type {
        case "CommandType", "OpType":
            let name = (actual as? CommandType)?.rawValue ?? (actual as? OpType)?.rawValue
            return name != nil && name == expected as? String ? [] : mismatch
        case "String" where field.textOrObject:
            // Text, or an object kept as its JSON text.
            if let text = expected as? String { return actual as? String == text ? [] : mismatch }
            guard let text = actual as? String, let reread = try? JSONSerialization.jsonObject(with: Data(text.utf8)) else {
                return mismatch
            }
            return Self.same(reread, expected) ? [] : mismatch
        case "String": return actual as? String == expected as? String ? [] : mismatch
        case "Int": return Self.sameInteger((actual as? Int).map(Int64.init), expected) ? [] : mismatch
        case "Int64": return Self.sameInteger(actual as? Int64, expected) ? [] : mismatch
        case "Bool":
            guard let number = expected as? NSNumber, Self.isBoolean(number) else { return mismatch }
            return actual as? Bool == number.boolValue ? [] : mismatch
        case "[String]": return actual as? [String] == expected as? [String] ? [] : mismatch
        case "JSONValue": return (actual as? JSONValue).map { Self.same($0, expected) } == true ? [] : mismatch
        case "[String: JSONValue]":
            return (actual as? [String: JSONValue]).map { Self.same(.object($0), expected) } == true ? [] : mismatch
        default: return ["\(path): the test knows no type \(field.type)"]
        }
    }

    static func unwrapped(_ value: Any) -> Any? {
        let mirror = Mirror(reflecting: value)
        guard mirror.displayStyle == .optional else { return value }
        return mirror.children.first.map(\.value)
    }

    static func isBoolean(_ number: NSNumber) -> Bool { String(cString: number.objCType) == "c" }

    static func sameInteger(_ actual: Int64?, _ expected: Any) -> Bool {
        guard let actual, let number = expected as? NSNumber, !isBoolean(number) else { return false }
        return number.int64Value == actual && number.doubleValue.rounded() == number.doubleValue
    }

    /// Foundation on Linux reads some doubles a unit in the last place off (through `Decimal`), so doubles
    /// agree within a few of those; the codec's exact round trip of doubles is tested in `testNumbers`.
    static func sameDouble(_ actual: Double, _ expected: Any) -> Bool {
        guard let number = expected as? NSNumber, !isBoolean(number) else { return false }
        let other = number.doubleValue
        return actual == other || abs(actual - other) <= 1e-14 * max(abs(actual), abs(other))
    }

    /// A `JSONValue` and what `JSONSerialization` read; numbers are equal when they are the same number.
    static func same(_ value: JSONValue, _ any: Any) -> Bool {
        switch value {
        case .null: return any is NSNull
        case .bool(let b): return (any as? NSNumber).map { isBoolean($0) && $0.boolValue == b } ?? false
        case .int(let i): return sameInteger(Int64(i), any)
        case .double(let d): return sameDouble(d, any)
        case .string(let s): return any as? String == s
        case .array(let elements):
            guard let others = any as? [Any], others.count == elements.count else { return false }
            return zip(elements, others).allSatisfy { same($0, $1) }
        case .object(let members):
            guard let others = any as? [String: Any], Set(others.keys) == Set(members.keys) else { return false }
            return members.allSatisfy { key, member in same(member, others[key]!) }
        }
    }

    /// Two values read by `JSONSerialization`.
    static func same(_ a: Any, _ b: Any) -> Bool {
        switch (a, b) {
        case (is NSNull, is NSNull): return true
        case (let x as String, let y as String): return x == y
        case (let x as NSNumber, let y as NSNumber) where isBoolean(x) || isBoolean(y):
            return isBoolean(x) && isBoolean(y) && x.boolValue == y.boolValue
        case (let x as NSNumber, let y as NSNumber): return sameDouble(x.doubleValue, y)
        case (let x as [Any], let y as [Any]): return x.count == y.count && zip(x, y).allSatisfy { same($0, $1) }
        case (let x as [String: Any], let y as [String: Any]):
            return Set(x.keys) == Set(y.keys) && x.allSatisfy { key, value in same(value, y[key]!) }
        default: return false
        }
    }

    // MARK: Random frames

    /// A random object of `structName` as `JSONSerialization` writes it: each optional field with
    /// probability 1/3 (all of them when `everyField`), the required ones always, now and then an unknown key.
    func randomObject(_ structName: String, _ rng: inout SplitMix64, everyField: Bool = false) -> [String: Any] {
        var object: [String: Any] = [:]
        for field in fields(structName) where everyField || field.required || Int.random(in: 0..<3, using: &rng) == 0 {
            object[field.name] = randomValue(field, &rng, everyField: everyField)
        }
        if !everyField, Int.random(in: 0..<8, using: &rng) == 0 {
            object["hookbot-unknown-\(rng.next() % 100)"] = Self.any(JSONCodecTests.randomValue(&rng, depth: 1))
        }
        return object
    }

    private func randomValue(_ field: Field, _ rng: inout SplitMix64, everyField: Bool) -> Any {
        if let item = field.type.wrappedElement, structs[item] != nil {
            return (0..<Int.random(in: everyField ? 1..<3 : 0..<3, using: &rng)).map { _ in
                randomObject(item, &rng, everyField: everyField)
            }
        }
        switch field.type {
        case "CommandType": return CommandType.allCases.randomElement(using: &rng)!.rawValue
        case "OpType": return OpType.allCases.randomElement(using: &rng)!.rawValue
        case "String" where field.textOrObject && Bool.random(using: &rng):
            return Self.any(.object(JSONCodecTests.randomObject(&rng, depth: 1)))
        case "String": return JSONCodecTests.randomString(&rng)
        case "Int", "Int64": return JSONCodecTests.randomInt64(&rng)
        case "Bool": return Bool.random(using: &rng)
        case "[String]": return JSONCodecTests.randomStrings(&rng)
        case "JSONValue": return Self.any(JSONCodecTests.randomNonNullValue(&rng))
        case "[String: JSONValue]": return Self.any(.object(JSONCodecTests.randomObject(&rng, depth: 1)))
        default: fatalError("the test knows no type \(field.type)")
        }
    }

    /// A `JSONValue` as the objects `JSONSerialization` writes.
    static func any(_ value: JSONValue) -> Any {
        switch value {
        case .null: NSNull()
        case .bool(let b): b
        case .int(let i): i
        case .double(let d): d
        case .string(let s): s
        case .array(let elements): elements.map(any)
        case .object(let members): members.mapValues(any)
        }
    }

    /// A random frame's text and what `JSONSerialization` reads back from it.
    func randomFrame(_ rng: inout SplitMix64, everyField: Bool = false) throws -> (text: String, object: [String: Any]) {
        let data = try JSONSerialization.data(withJSONObject: randomObject("Command", &rng, everyField: everyField))
        return (String(decoding: data, as: UTF8.self), try JSONSerialization.jsonObject(with: data) as! [String: Any])
    }
}

extension String {
    /// `LogItem` for `[LogItem]`.
    fileprivate var wrappedElement: String? {
        hasPrefix("[") && hasSuffix("]") && !contains(":") ? String(dropFirst().dropLast()) : nil
    }
}
