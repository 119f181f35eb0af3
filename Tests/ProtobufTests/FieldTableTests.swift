import Foundation
import IMCore
import SwiftProtobuf
import XCTest

@testable import IMProto

/// Every protobuf field of scripts/command-fields.json, checked against SwiftProtobuf's own generated types:
/// a command with that one field set (read from JSON) is encoded, and SwiftProtobuf's JSON form of the
/// `GenericCommand` must hold the value in the field the table names; SwiftProtobuf's parse of that JSON,
/// decoded again, must give the field back.
final class FieldTableTests: XCTestCase {
    let json = JSONCommandCodec()
    let protobuf = ProtobufCommandCodec()

    /// The command each message alias of the table belongs to, and that message's key in the JSON form.
    static let messages: [String: (cmd: String, key: String?)] = [
        "generic": ("session", nil), "session": ("session", "sessionMessage"), "error": ("error", "errorMessage"),
        "direct": ("direct", "directMessage"), "ack": ("ack", "ackMessage"), "rcp": ("rcp", "rcpMessage"),
        "unread": ("unread", "unreadMessage"), "logs": ("logs", "logsMessage"), "conv": ("conv", "convMessage"),
        "blacklist": ("blacklist", "blacklistMessage"), "patch": ("patch", "patchMessage"),
    ]

    /// The table, as Foundation reads it: struct name → its fields.
    /// Read once, never changed.
    nonisolated(unsafe) static let table: [String: [[String: Any]]] = {
        let root = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let data = try! Data(contentsOf: root.appendingPathComponent("scripts/command-fields.json"))
        let document = try! JSONSerialization.jsonObject(with: data) as! [String: Any]
        var structs: [String: [[String: Any]]] = [:]
        for entry in document["structs"] as! [[String: Any]] {
            structs[entry["name"] as! String] = entry["fields"] as? [[String: Any]]
        }
        return structs
    }()

    /// A value of a field's type, as JSON (what people send: Chinese, emoji, real-looking times).
    static func sample(_ field: [String: Any], protoIsBytes: Bool = false) -> Any {
        let type = field["type"] as! String
        if type.hasPrefix("["), type != "[String]", let nested = table[String(type.dropFirst().dropLast())] {
            var element: [String: Any] = [:]
            for inner in nested where inner["proto"] != nil { element[inner["name"] as! String] = sample(inner) }
            return [element]
        }
        switch type {
        case "String" where field["name"] as? String == "binaryMsg": return "5L2g5aW9IPCfkYs=" // "你好 👋" as base64
        case "String": return "你好 @Tom 👋 \(field["name"]!)"
        case "Int": return 4242
        case "Int64": return 1_764_031_200_123
        case "Bool": return true
        case "[String]": return ["Tom", "杰瑞"]
        default: fatalError("no sample for \(type)")
        }
    }

    /// A JSON value as one comparable text: numbers and their protobuf-JSON strings (int64) alike.
    static func text(_ value: Any) -> String {
        switch value {
        case let number as NSNumber where String(cString: number.objCType) == "c": return number.boolValue ? "true" : "false"
        case let number as NSNumber: return "\(number.int64Value)"
        case let string as String: return string
        case let array as [Any]: return "[" + array.map(text).joined(separator: ",") + "]"
        case let object as [String: Any]:
            return "{" + object.keys.sorted().map { "\($0):\(text(object[$0]!))" }.joined(separator: ",") + "}"
        default: return "\(value)"
        }
    }

    /// The key of `object` that is the Swift property `property` of a generated message (`peerID` is
    /// `peerId`, `hasMore_p` is `hasMore`, `tempConvTtl` is `tempConvTTL`).
    static func key(_ property: String, in object: [String: Any]) -> String? {
        let name = property.hasSuffix("_p") ? String(property.dropLast(2)) : property
        return object.keys.first { $0.lowercased() == name.lowercased() }
    }

    /// Where the protobuf JSON `object` lacks what the model's JSON `expected` has, field by field of the table.
    static func differences(_ expected: [String: Any], _ object: [String: Any], fields: [[String: Any]], alias: String?) -> [String] {
        var found: [String] = []
        for field in fields {
            let name = field["name"] as! String
            guard let value = expected[name] else { continue }
            let mapping = field["proto"]
            guard let property = alias.map({ (mapping as? [String: String])?[$0] }) ?? mapping as? String else { continue }
            guard let key = key(property, in: object), let actual = object[key] else {
                found.append("\(name): no \(property) in \(text(object))")
                continue
            }
            let type = field["type"] as! String
            if type.hasPrefix("["), type != "[String]", let nested = table[String(type.dropFirst().dropLast())] {
                let elements = value as! [[String: Any]]
                let others = actual as? [[String: Any]] ?? []
                guard elements.count == others.count else {
                    found.append("\(name): \(text(actual))")
                    continue
                }
                for (element, other) in zip(elements, others) {
                    found += differences(element, other, fields: nested, alias: nil).map { "\(name).\($0)" }
                }
            } else if text(actual) != text(value) {
                found.append("\(name): \(property) holds \(text(actual)), not \(text(value))")
            }
        }
        return found
    }

    func testEveryProtobufFieldOfTheTableIsTheFieldSwiftProtobufNames() throws {
        var checked = 0
        for field in Self.table["Command"]! {
            guard let mapping = field["proto"] as? [String: String] else { continue }
            let name = field["name"] as! String
            for alias in mapping.keys.sorted() {
                let (cmd, messageKey) = try XCTUnwrap(Self.messages[alias], alias)
                let frame: [String: Any] = ["cmd": cmd, name: Self.sample(field)]
                let text = String(decoding: try JSONSerialization.data(withJSONObject: frame), as: UTF8.self)
                let command = try json.decode(text)

                // Model → protobuf, read by SwiftProtobuf.
                let generic = try LCProtoGenericCommand(serializedBytes: try protobuf.encode(command) as [UInt8])
                let protoJSON = try JSONSerialization.jsonObject(with: Data(try generic.jsonString().utf8)) as! [String: Any]
                let message = messageKey.map { protoJSON[$0] as? [String: Any] ?? [:] } ?? protoJSON
                XCTAssertEqual(Self.differences(frame, message, fields: [field], alias: alias), [], "\(alias): \(text)")

                // SwiftProtobuf's parse of that JSON → model, without hookbotFields: the field comes back.
                var plain = try LCProtoGenericCommand(jsonString: try generic.jsonString())
                plain.clearHookbotFields()
                let decoded = try XCTUnwrap(try protobuf.decode(try plain.serializedBytes() as [UInt8]).first)
                let back = try JSONSerialization.jsonObject(with: Data(json.encode(decoded).utf8)) as! [String: Any]
                XCTAssertEqual(Self.text(back[name] as Any), Self.text(frame[name]!), "\(alias): \(text) → \(json.encode(decoded))")
                checked += 1
            }
        }
        XCTAssertEqual(checked, 102)
    }
}
