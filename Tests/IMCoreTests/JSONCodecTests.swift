import Foundation
import IMCore
import XCTest

/// The hand-written JSON codec, checked against Foundation's JSONSerialization (an independent decoder and
/// encoder) through the field table (CommandTable.swift), and Foundation's Codable for `JSONValue`.
final class JSONCodecTests: XCTestCase {
    let codec = JSONCommandCodec()
    let table = CommandTable.shared

    private func failure(_ text: String) -> CommandDecodingError? {
        do {
            _ = try codec.decode(text)
            return nil
        } catch {
            return error
        }
    }

    private func failure(bytes: [UInt8]) -> CommandDecodingError? {
        do {
            _ = try codec.decode(bytes: bytes)
            return nil
        } catch {
            return error
        }
    }

    /// Where `command` differs from what JSONSerialization reads from `text` (empty: nowhere).
    private func differences(_ command: Command, _ text: String, exact: Bool = false) throws -> [String] {
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], text)
        return table.differences(command, object, as: "Command", exact: exact)
    }

    // MARK: docs/PROTOCOL.md

    func testEveryFrameInTheProtocolDocumentRoundTrips() throws {
        let root = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let markdown = try String(contentsOf: root.appendingPathComponent("docs/PROTOCOL.md"), encoding: .utf8)
        let frames = Self.extractFrames(markdown)
        XCTAssertGreaterThanOrEqual(frames.count, 10, "frames found in PROTOCOL.md: \(frames)")
        for template in frames {
            let text = Self.instantiate(template)
            XCTAssertNoThrow(try JSONSerialization.jsonObject(with: Data(text.utf8)), "not JSON after filling in: \(text)")
            let decoded: Command
            do {
                decoded = try codec.decode(text)
            } catch {
                XCTFail("\(text): \(error.error)")
                continue
            }
            XCTAssertEqual(try differences(decoded, text), [], text)
            let encoded = codec.encode(decoded)
            XCTAssertEqual(try codec.decode(encoded), decoded, encoded)
            XCTAssertEqual(try differences(decoded, encoded, exact: true), [], encoded)
        }
    }

    /// Every `{"cmd"…}` object in the text, up to its matching brace.
    static func extractFrames(_ text: String) -> [String] {
        let bytes = Array(text.utf8)
        let marker = Array(#"{"cmd""#.utf8)
        var frames: [String] = []
        var index = 0
        while index + marker.count <= bytes.count {
            guard bytes[index..<(index + marker.count)].elementsEqual(marker) else {
                index += 1
                continue
            }
            var depth = 0
            var inString = false
            var k = index
            scan: while k < bytes.count {
                let b = bytes[k]
                if inString {
                    if b == UInt8(ascii: "\\") { k += 1 } else if b == UInt8(ascii: "\"") { inString = false }
                } else if b == UInt8(ascii: "\"") {
                    inString = true
                } else if b == UInt8(ascii: "{") {
                    depth += 1
                } else if b == UInt8(ascii: "}") {
                    depth -= 1
                    if depth == 0 { break scan }
                }
                k += 1
            }
            frames.append(String(decoding: bytes[index...min(k, bytes.count - 1)], as: UTF8.self))
            index = k + 1
        }
        return frames
    }

    private static let integerKeys: Set<String> = [
        "i", "code", "appCode", "t", "timestamp", "serverTs", "stTtl", "limit", "skip", "count", "lm", "cdate",
        "udate", "tt", "unread", "ackAt", "readAt", "patchTimestamp", "createdAt", "updatedAt",
    ]
    private static let boolKeys: Set<String> = [
        "r", "transient", "offline", "hasMore", "mentionAll", "read", "unique", "reversed", "silent", "recall", "tr",
    ]
    private static let listKeys: Set<String> = ["m", "mu", "ids", "mentionPids"]

    private static func sample(for key: String) -> String {
        if integerKeys.contains(key) { return "1763700000000" }
        if boolKeys.contains(key) { return "true" }
        if listKeys.contains(key) { return #"["Tom","Jerry"]"# }
        return "\"\(key)-sample\""
    }

    /// Fills in the placeholders of a documented frame: `"code":…`, `"t":<time>`, the key lists
    /// `{"msgId","from"}` and the `, …` closing a list.
    static func instantiate(_ template: String) -> String {
        func replace(_ pattern: String, in text: String, with transform: ([String]) -> String) -> String {
            let regex = try! NSRegularExpression(pattern: pattern)
            var result = text
            for match in regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).reversed() {
                let groups = (0..<match.numberOfRanges).map { i -> String in
                    Range(match.range(at: i), in: text).map { String(text[$0]) } ?? ""
                }
                result.replaceSubrange(Range(match.range, in: result)!, with: transform(groups))
            }
            return result
        }
        var text = replace(#",\s*…\s*\]"#, in: template) { _ in "]" }
        text = replace(#"\{\s*("\w+"(?:\s*,\s*"\w+")*)\s*\}"#, in: text) { groups in
            let keys = groups[1].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: ["\""]) }
            return "{" + keys.map { "\"\($0)\":\(sample(for: $0))" }.joined(separator: ",") + "}"
        }
        text = replace(#""(\w+)"\s*:\s*(…|<[^>"]*>)"#, in: text) { groups in "\"\(groups[1])\":\(sample(for: groups[1]))" }
        return text
    }

    // MARK: Differential tests against Foundation

    /// Random frames written by JSONSerialization from the field table: the codec reads each field as
    /// JSONSerialization does, writes what JSONSerialization reads back as the same command, and reads
    /// its own output back to the same command.
    func testRandomCommandsAgreeWithFoundation() throws {
        var rng = SplitMix64(seed: 0x5EED_C0DEC)
        for round in 0..<400 {
            let frame = try table.randomFrame(&rng)
            let command = try codec.decode(frame.text)
            XCTAssertEqual(table.differences(command, frame.object, as: "Command"), [], "round \(round): \(frame.text)")
            let ours = codec.encode(command)
            XCTAssertEqual(try differences(command, ours, exact: true), [], "round \(round): \(ours)")
            XCTAssertEqual(try codec.decode(ours), command, "round \(round): \(ours)")
            var bytes: [UInt8] = Array("prefix".utf8)
            codec.encode(command, into: &bytes)
            XCTAssertEqual(bytes, Array("prefix".utf8) + Array(ours.utf8))
            XCTAssertEqual(try codec.decode(bytes: Data(ours.utf8)), command)
        }
    }

    func testRandomValuesAgreeWithFoundation() throws {
        var rng = SplitMix64(seed: 42)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        for round in 0..<400 {
            let value = Self.randomValue(&rng, depth: 0)
            let ours = value.jsonString()
            let theirs = String(decoding: try encoder.encode(value), as: UTF8.self)
            // Without integral doubles (which Foundation writes as integers) the texts are identical.
            XCTAssertEqual(ours, theirs, "round \(round)")
            XCTAssertEqual(JSONValue.parse(ours), value, "round \(round): \(ours)")
            XCTAssertEqual(try JSONDecoder().decode(JSONValue.self, from: Data(ours.utf8)), value, "round \(round)")
            XCTAssertEqual(JSONValue.parse(bytes: Array(ours.utf8)), value)
        }
    }

    // MARK: Error shapes

    func testCommandErrorsCarryTheRequestSerial() {
        let cmdNumber = failure(#"{"cmd":5,"i":3}"#)
        XCTAssertEqual(cmdNumber?.error.code, 4901)
        XCTAssertEqual(cmdNumber?.error.detail, "invalid value for field 'cmd'")
        XCTAssertEqual(cmdNumber?.requestSerial, 3)

        let opNumber = failure(#"{"i":4,"cmd":"conv","op":7}"#)
        XCTAssertEqual(opNumber?.error.code, 4901)
        XCTAssertEqual(opNumber?.error.detail, "invalid value for field 'op'")
        XCTAssertEqual(opNumber?.requestSerial, 4)

        XCTAssertEqual(failure(#"{"cmd":null,"i":2}"#)?.error.detail, "missing field 'cmd'")
        XCTAssertEqual(failure(#"{"cmd":null,"i":2}"#)?.requestSerial, 2)
        XCTAssertEqual(failure(#"{"cmd":"warp","i":4}"#)?.error.detail, "unknown cmd 'warp'")
        XCTAssertEqual(failure(#"{"cmd":"warp","i":4}"#)?.requestSerial, 4)
        XCTAssertEqual(failure(#"{"cmd":"conv","op":"warp","i":5}"#)?.error.code, 4902)
        XCTAssertEqual(failure(#"{"cmd":"conv","op":"warp","i":5}"#)?.error.detail, "unknown op 'warp'")
        // Unknown cmd comes before type errors, as before.
        XCTAssertEqual(failure(#"{"limit":"x","cmd":"warp","i":6}"#)?.error.code, 4902)
        XCTAssertEqual(failure(#"{"limit":"x","cmd":"warp","i":6}"#)?.requestSerial, 6)
        // An unreadable i: no serial.
        XCTAssertNil(failure(#"{"cmd":"warp","i":"6"}"#)?.requestSerial)
        XCTAssertEqual(failure(#"{"cmd":"direct","i":"6"}"#)?.error.detail, "invalid value for field 'i'")
        XCTAssertEqual(failure(#"{"cmd":"direct","i":1.5}"#)?.error.detail, "invalid value for field 'i'")
        XCTAssertNil(failure(#"{"cmd":"direct","i":1.5}"#)?.requestSerial)
        // Escaped names are names.
        XCTAssertEqual(try codec.decode(#"{"\u0063md":"\u0065cho","i":1}"#), Command(cmd: .echo, i: 1))

        let nested = failure(#"{"cmd":"conv","op":"results","i":8,"results":[{"objectId":"a"},{"objectId":"b","m":["x",5]}]}"#)
        XCTAssertEqual(nested?.error.detail, "invalid value for field 'results.1.m.1'")
        XCTAssertEqual(nested?.requestSerial, 8)
        XCTAssertEqual(failure(#"{"cmd":"conv","i":8,"results":[{"name":"a"}]}"#)?.error.detail, "missing field 'results.0.objectId'")
        XCTAssertEqual(failure(#"{"cmd":"conv","i":8,"results":[null]}"#)?.error.detail, "invalid value for field 'results.0'")
        XCTAssertEqual(
            failure(#"{"cmd":"logs","logs":[{"msgId":"a","from":"b","data":"c","timestamp":"1"}]}"#)?.error.detail,
            "invalid value for field 'logs.0.timestamp'")
        XCTAssertEqual(
            failure(#"{"cmd":"unread","convs":[{"cid":"a","unread":null}]}"#)?.error.detail,
            "invalid value for field 'convs.0.unread'")
        XCTAssertEqual(
            failure(#"{"cmd":"patch","patches":[{"cid":"a","mid":"b"}]}"#)?.error.detail,
            "missing field 'patches.0.timestamp'")
    }

    /// Values of the wrong type for every field of the table, by the field's type.
    static let wrongValues: [String: [String]] = [
        "String": ["5", "true", "[]", "{}"],
        "Int": [#""5""#, "true", "1.5", "[1]", "1e400", "{}", "99999999999999999999", "-9223372036854775809", "1e19"],
        "Bool": ["1", #""true""#, "[]"],
        "[String]": [#""a""#, "[1]", #"["a",null]"#, "{}"],
        "[String: JSONValue]": ["[]", #""x""#, "5", #"{"a":1e400}"#],
        "JSONValue": ["1e999", "[-1e309]"],
        "nested": ["{}", "[5]", #"["x"]"#, "true"],
        "textOrObject": ["5", "true", "[]", "1e999"],
    ]

    private func wrongValueKind(_ field: CommandTable.Field) -> String {
        if field.textOrObject { return "textOrObject" }
        if field.type == "Int64" { return "Int" }
        return table.structs[String(field.type.dropFirst().dropLast())] != nil ? "nested" : field.type
    }

    func testWrongTypesForEveryFieldKind() {
        let fields = table.fields("Command").filter { !["cmd", "op", "i"].contains($0.name) }
        var cases: [(field: String, value: String)] = []
        for field in fields {
            let values = Self.wrongValues[wrongValueKind(field)]
            XCTAssertNotNil(values, "no wrong values for \(field.name): \(field.type)")
            cases += (values ?? []).map { (field.name, $0) }
        }
        for (field, value) in cases {
            let text = #"{"cmd":"direct","i":9,"\#(field)":\#(value)}"#
            guard let error = failure(text) else {
                XCTFail("accepted: \(text)")
                continue
            }
            XCTAssertEqual(error.error.code, 4901, text)
            XCTAssertTrue(error.error.detail?.hasPrefix("invalid value for field '\(field)") == true, "\(text): \(error.error)")
            XCTAssertEqual(error.requestSerial, 9, text)
        }
        // null is "not set" for every optional field.
        for field in fields.map(\.name) + ["op"] {
            let text = #"{"cmd":"direct","i":9,"\#(field)":null}"#
            XCTAssertEqual(try codec.decode(text), Command(cmd: .direct, i: 9), text)
        }
    }

    func testMalformedFramesAreRefused() {
        let notJSON = [
            "", " ", "nope", "[1]", "5", #""x""#, "null", "{", "}", #"{"cmd""#, #"{"cmd":"#, #"{"cmd":"direct""#,
            #"{"cmd":"direct","i":1"#, #"{"cmd":"dir"#, #"{"cmd":"echo"} x"#, #"{"cmd":"echo"}{}"#, #"{"cmd":"echo"},"#,
            #"{"cmd":"echo",}"#, #"{"cmd":"direct","m":["a",]}"#, #"{"cmd":"direct","ext":{"a":1,}}"#, #"{,"cmd":"echo"}"#,
            #"{"cmd":"echo",,"i":1}"#, #"{"cmd" "echo"}"#, #"{"cmd":"echo" "i":1}"#, #"{cmd:"echo"}"#, "{'cmd':'echo'}",
            #"{"cmd":"echo"/*c*/}"#, "{\"cmd\":\"echo\"} // c", #"{"cmd":"direct","msg":"\x"}"#,
            #"{"cmd":"direct","msg":"\u12"}"#, #"{"cmd":"direct","msg":"\u12G4"}"#, #"{"cmd":"direct","msg":"\"#,
            #"{"cmd":"direct","msg":"\ud800"}"#, #"{"cmd":"direct","msg":"\udc00"}"#, #"{"cmd":"direct","msg":"\ud800\u0041"}"#,
            #"{"cmd":"direct","msg":"\ud800x"}"#, #"{"cmd":"direct","msg":"\udbff\udbff"}"#, #"{"cmd":"direct","msg":"\U0041"}"#,
            "{\"cmd\":\"direct\",\"msg\":\"a\u{1}b\"}", "{\"cmd\":\"direct\",\"msg\":\"a\nb\"}", "{\"cmd\":\"direct\",\"msg\":\"a\tb\"}",
            "{\"cmd\":\"direct\",\"msg\":\"a\u{0}b\"}",
            #"{"cmd":"direct","t":NaN}"#, #"{"cmd":"direct","t":Infinity}"#, #"{"cmd":"direct","t":-Infinity}"#,
            #"{"cmd":"direct","t":+1}"#, #"{"cmd":"direct","t":.5}"#, #"{"cmd":"direct","t":1.}"#, #"{"cmd":"direct","t":01}"#,
            #"{"cmd":"direct","t":-01}"#, #"{"cmd":"direct","t":00}"#, #"{"cmd":"direct","t":1e}"#, #"{"cmd":"direct","t":1e+}"#,
            #"{"cmd":"direct","t":-}"#, #"{"cmd":"direct","t":0x10}"#, #"{"cmd":"direct","t":1.5.5}"#, #"{"cmd":"direct","r":tru}"#,
            #"{"cmd":"direct","r":True}"#, #"{"cmd":"direct","r":nul}"#, #"{"cmd":"direct","r":truex}"#,
            #"{"cmd":"direct","zz":NaN}"#, #"{"cmd":"direct","zz":[1,]}"#, #"{"cmd":"direct","zz":{"a"}}"#,
            "\u{FEFF}{\"cmd\":\"echo\"}", "{\"cmd\":\"echo\"}\u{0}",
        ]
        for text in notJSON {
            let error = failure(text)
            XCTAssertEqual(error?.error.code, 4901, text)
            XCTAssertEqual(error?.error.detail, "frame is not a JSON object", text)
            XCTAssertNil(error?.requestSerial, text)
        }
        let prefix = Array(#"{"cmd":"direct","i":1,"msg":""#.utf8)
        let suffix = Array(#""}"#.utf8)
        let invalidUTF8: [[UInt8]] = [
            [0xFF], [0xFE], [0x80], [0xC0, 0x80], [0xC1, 0xBF], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80], [0xED, 0xBF, 0xBF],
            [0xF0, 0x80, 0x80, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80], [0xE4, 0xB8], [0xE4, 0xB8, 0x41],
            [0xF0, 0x9F, 0x98], [0xC3],
        ]
        for bad in invalidUTF8 {
            XCTAssertEqual(failure(bytes: prefix + bad + suffix)?.error.detail, "frame is not a JSON object", "\(bad)")
            XCTAssertEqual(failure(bytes: Array(#"{"cmd":"direct","#.utf8) + [0x22] + bad + Array(#"":1}"#.utf8))?.error.code, 4901)
            XCTAssertNil(JSONValue.parse(bytes: [0x22] + bad + [0x22]), "\(bad)")
        }
        // Valid multi-byte UTF-8 (2, 3 and 4 bytes, at the edges of their ranges) passes.
        for good: [UInt8] in [
            [0xC2, 0x80], [0xDF, 0xBF], [0xE0, 0xA0, 0x80], [0xEF, 0xBF, 0xBF], [0xF0, 0x90, 0x80, 0x80],
            [0xF4, 0x8F, 0xBF, 0xBF], [0xEE, 0x80, 0x80],
        ] {
            XCTAssertEqual(try codec.decode(bytes: prefix + good + suffix).msg, String(decoding: good, as: UTF8.self))
        }
    }

    func testDeepNestingIsRefusedQuickly() throws {
        // 48 KB, 500 levels deep.
        let padding = String(repeating: "x", count: 90)
        var text = #"{"cmd":"direct","i":7,"ext":{"a":"#
        for _ in 0..<500 { text += #"{"p":"\#(padding)","a":"# }
        text += "1" + String(repeating: "}", count: 502)
        XCTAssertGreaterThan(text.utf8.count, 48_000)
        let start = Date()
        let error = failure(text)
        XCTAssertLessThan(Date().timeIntervalSince(start), 0.05)
        XCTAssertEqual(error?.error.code, 4901)
        XCTAssertEqual(error?.error.detail, "nesting deeper than 64 levels")

        // Arrays, far deeper than any stack would allow recursion for.
        let arrays = #"{"cmd":"direct","where":"# + String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000) + "}"
        let arrayStart = Date()
        XCTAssertEqual(failure(arrays)?.error.detail, "nesting deeper than 64 levels")
        XCTAssertLessThan(Date().timeIntervalSince(arrayStart), 0.05)
        XCTAssertNil(JSONValue.parse(String(repeating: "[", count: 100_000)))

        // 64 levels (the frame's object included) pass; 65 do not.
        func frame(levels: Int) -> String {
            #"{"cmd":"direct","attr":"# + String(repeating: "[", count: levels - 1) + String(repeating: "]", count: levels - 1) + "}"
        }
        XCTAssertNoThrow(try codec.decode(frame(levels: 64)))
        XCTAssertEqual(failure(frame(levels: 65))?.error.detail, "nesting deeper than 64 levels")
        XCTAssertNotNil(JSONValue.parse(String(repeating: "[", count: 64) + String(repeating: "]", count: 64)))
        XCTAssertNil(JSONValue.parse(String(repeating: "[", count: 65) + String(repeating: "]", count: 65)))
        // Deep nesting in an ignored field counts too.
        XCTAssertEqual(
            failure(#"{"cmd":"direct","zz":"# + String(repeating: "[", count: 70) + String(repeating: "]", count: 70) + "}")?
                .error.detail, "nesting deeper than 64 levels")
    }

    func testLongFramesDecodeInLinearTime() throws {
        // A 1 MB message body full of escapes and a 50,000-element list.
        let body = String(repeating: #"\"\\\n\u00e9\ud83d\ude00"#, count: 40_000)
        let list = "[" + Array(repeating: #""member""#, count: 50_000).joined(separator: ",") + "]"
        let text = #"{"cmd":"direct","msg":"\#(body)","m":\#(list)}"#
        let start = Date()
        let command = try codec.decode(text)
        XCTAssertLessThan(Date().timeIntervalSince(start), 2)
        XCTAssertEqual(command.m?.count, 50_000)
        XCTAssertEqual(command.msg, String(repeating: "\"\\\né😀", count: 40_000))
        XCTAssertEqual(try differences(command, text), [])
    }

    func testRandomCorruptionNeverCrashes() throws {
        var rng = SplitMix64(seed: 7)
        let seeds = try (0..<40).map { _ in Array(try table.randomFrame(&rng).text.utf8) }
        let alphabet = Array(#"{}[]",:\u0123456789-+.eE truefalsnl"#.utf8) + [0x00, 0x1F, 0x80, 0xC3, 0xED, 0xF0, 0xFF]
        for round in 0..<3_000 {
            var bytes = seeds[round % seeds.count]
            switch rng.next() % 4 {
            case 0: bytes = Array(bytes.prefix(Int(rng.next() % UInt64(bytes.count))))
            case 1: bytes[Int(rng.next() % UInt64(bytes.count))] = alphabet[Int(rng.next() % UInt64(alphabet.count))]
            case 2: bytes.insert(alphabet[Int(rng.next() % UInt64(alphabet.count))], at: Int(rng.next() % UInt64(bytes.count)))
            default: bytes.remove(at: Int(rng.next() % UInt64(bytes.count)))
            }
            if let error = failure(bytes: bytes) {
                XCTAssertTrue([4901, 4902].contains(error.error.code))
            }
            _ = JSONValue.parse(bytes: bytes)
        }
    }

    // MARK: Numbers

    func testNumbers() throws {
        XCTAssertEqual(JSONValue.parse("2"), .int(2))
        XCTAssertEqual(JSONValue.parse("2.0"), .double(2))
        XCTAssertEqual(JSONValue.parse("1E2"), .double(100))
        XCTAssertEqual(JSONValue.parse("-0"), .int(0))
        XCTAssertEqual(JSONValue.parse("9223372036854775807"), .int(.max))
        XCTAssertEqual(JSONValue.parse("-9223372036854775808"), .int(.min))
        XCTAssertEqual(JSONValue.parse("9223372036854775808"), .double(9_223_372_036_854_775_808))
        XCTAssertEqual(JSONValue.parse("123456789012345678901234567890"), .double(1.2345678901234568e+29))
        XCTAssertEqual(JSONValue.parse("0.1"), .double(0.1))
        XCTAssertEqual(JSONValue.parse("1e-400"), .double(0))
        XCTAssertEqual(JSONValue.parse("2.2250738585072011e-308"), .double(Double("2.2250738585072011e-308")!))
        XCTAssertEqual(JSONValue.parse("1.7976931348623157e308"), .double(.greatestFiniteMagnitude))
        XCTAssertNil(JSONValue.parse("1e400"))
        XCTAssertNil(JSONValue.parse("[-1.8e308]"))
        XCTAssertEqual(JSONValue.parse(" [1, -2.5e-3 ,\n\t3] "), [1, -0.0025, 3])

        XCTAssertEqual(JSONValue.double(2).jsonString(), "2.0")
        XCTAssertEqual(JSONValue.double(-0.0).jsonString(), "-0.0")
        XCTAssertEqual(JSONValue.double(1e16).jsonString(), "1e+16")
        XCTAssertEqual(JSONValue.double(.nan).jsonString(), "null")
        XCTAssertEqual(JSONValue.array([.double(.infinity), .double(-.infinity)]).jsonString(), "[null,null]")
        XCTAssertEqual(JSONValue.int(.min).jsonString(), "-9223372036854775808")
        for d in [
            2.0, 0.1, 1e-7, Double.leastNonzeroMagnitude, 1e300, -123456.789, Double.greatestFiniteMagnitude, 1e15, 0.30000000000000004,
        ] {
            XCTAssertEqual(JSONValue.parse(JSONValue.double(d).jsonString()), .double(d), "\(d)")
        }
        // Shortest round trip of random doubles.
        var rng = SplitMix64(seed: 99)
        for _ in 0..<2_000 {
            let d = Double(bitPattern: rng.next())
            guard d.isFinite else { continue }
            XCTAssertEqual(JSONValue.parse(JSONValue.double(d).jsonString())?.doubleValue?.bitPattern, d.bitPattern, "\(d)")
        }

        // Integer fields take whole numbers however written, as Foundation does.
        for (literal, value) in [
            ("1.0", 1), ("1e2", 100), ("1E0", 1), ("-0.0", 0), ("100e-2", 1), ("0.5e1", 5),
            ("9.2e18", 9_200_000_000_000_000_000), ("4611686018427387904.0", 4_611_686_018_427_387_904),
            ("9007199254740993.0", 9_007_199_254_740_993), ("-9223372036854775808", Int.min),
            ("9223372036854775807", Int.max), ("0e5", 0),
        ] {
            let text = #"{"cmd":"logs","limit":\#(literal),"t":\#(literal)}"#
            let command = try codec.decode(text)
            XCTAssertEqual(command.limit, value, literal)
            XCTAssertEqual(command.t, Int64(value), literal)
        }
        for literal in ["1.5", "1e19", "9223372036854775808", "2.5e0", "-9223372036854775809", "100000000000000000000.0", "1e-1"] {
            let text = #"{"cmd":"logs","limit":\#(literal)}"#
            XCTAssertEqual(failure(text)?.error.detail, "invalid value for field 'limit'", literal)
        }
    }

    // MARK: Writing

    func testWriterEscapesOnlyWhatItMust() throws {
        let text = "a\"b\\c/d\u{1}\u{8}\u{c}\n\r\t\u{1f}\u{7f}é😀\u{2028}"
        XCTAssertEqual(JSONValue.string(text).jsonString(), #""a\"b\\c/d\u0001\b\f\n\r\t\u001f"# + "\u{7f}é😀\u{2028}\"")
        var direct = Command(cmd: .direct, i: 1)
        direct.msg = text
        direct.ext = ["z": 1, "a": ["x": .null, "b": 2.5], "é": "", "B": true]
        let encoded = codec.encode(direct)
        XCTAssertEqual(
            encoded,
            #"{"cmd":"direct","i":1,"msg":"a\"b\\c/d\u0001\b\f\n\r\t\u001f"# + "\u{7f}é😀\u{2028}"
                + #"","ext":{"B":true,"a":{"b":2.5,"x":null},"z":1,"é":""}}"#)
        XCTAssertEqual(try codec.decode(encoded), direct)
        XCTAssertEqual(try differences(direct, encoded, exact: true), [])
    }

    func testFieldsAreWrittenInDeclarationOrder() {
        var command = Command(cmd: .conv, op: .results, i: 2)
        command.kind = "k"
        command.results = [ConversationInfo(objectId: "o")]
        command.peerId = "p"
        command.`where` = ["m": "Tom"]
        command.limit = 3
        XCTAssertEqual(
            codec.encode(command),
            #"{"cmd":"conv","op":"results","i":2,"peerId":"p","where":{"m":"Tom"},"limit":3,"results":[{"objectId":"o"}],"kind":"k"}"#)
        XCTAssertEqual(codec.encode(Command(cmd: .goaway)), #"{"cmd":"goaway"}"#)
    }

    /// Every stored property of `Command` and its nested structs (found by reflection, so that a new one
    /// cannot be forgotten) is in the field table; a frame with every field is read in full, as
    /// JSONSerialization reads it, and written back in table order.
    func testEveryCommandFieldIsCovered() throws {
        var rng = SplitMix64(seed: 3)
        let frame = try table.randomFrame(&rng, everyField: true)
        let full = try codec.decode(frame.text)
        let labels = Mirror(reflecting: full).children.map { $0.label! }
        XCTAssertEqual(labels.count, 94)
        XCTAssertEqual(Set(labels), Set(table.fields("Command").map(\.name)))
        XCTAssertEqual(Mirror(reflecting: full).children.filter { Self.isNil($0.value) }.map(\.label), [])
        XCTAssertEqual(table.differences(full, frame.object, as: "Command"), [])
        let text = codec.encode(full)
        XCTAssertEqual(Self.topLevelKeys(text), table.fields("Command").map(\.name))
        XCTAssertEqual(try differences(full, text, exact: true), [])
        let nested: [(String, Any)] = [
            ("ConversationInfo", full.results![0]), ("MaxReadTuple", full.maxReadTuples![0]), ("FailedPids", full.failedPids![0]),
            ("LogItem", full.logs![0]), ("UnreadInfo", full.convs![0]), ("PatchItem", full.patches![0]),
        ]
        XCTAssertEqual(Set(nested.map(\.0)), Set(table.structs.keys).subtracting(["Command"]))
        for (name, value) in nested {
            let children = Mirror(reflecting: value).children
            XCTAssertEqual(Set(children.map { $0.label! }), Set(table.fields(name).map(\.name)), name)
            XCTAssertEqual(children.filter { Self.isNil($0.value) }.map(\.label), [], name)
        }
    }

    private static func isNil(_ value: Any) -> Bool {
        let mirror = Mirror(reflecting: value)
        return mirror.displayStyle == .optional && mirror.children.isEmpty
    }

    /// The keys of a compact JSON object, in order.
    private static func topLevelKeys(_ text: String) -> [String] {
        var keys: [String] = []
        var depth = 0
        var inString = false
        var escaped = false
        var current: String.UnicodeScalarView?
        var expectKey = false
        for ch in text.unicodeScalars {
            if inString {
                if escaped {
                    escaped = false
                } else if ch == "\\" {
                    escaped = true
                } else if ch == "\"" {
                    inString = false
                    if let key = current { keys.append(String(key)) }
                    current = nil
                    continue
                }
                current?.append(ch)
                continue
            }
            switch ch {
            case "\"":
                inString = true
                if depth == 1, expectKey { current = String.UnicodeScalarView() }
                expectKey = false
            case "{", "[":
                depth += 1
                expectKey = depth == 1
            case "}", "]": depth -= 1
            case ",": expectKey = depth == 1
            default: break
            }
        }
        return keys
    }

    func testDuplicateKeysLastWins() throws {
        XCTAssertEqual(try codec.decode(#"{"cmd":"echo","cmd":"direct"}"#).cmd, .direct)
        XCTAssertEqual(try codec.decode(#"{"cmd":"direct","limit":"x","limit":5}"#).limit, 5)
        XCTAssertEqual(failure(#"{"cmd":"direct","limit":5,"limit":"x"}"#)?.error.detail, "invalid value for field 'limit'")
        XCTAssertNil(try codec.decode(#"{"cmd":"direct","limit":5,"limit":null}"#).limit)
        XCTAssertEqual(JSONValue.parse(#"{"a":1,"a":2}"#), ["a": 2])
    }

    func testByteEntryPoints() throws {
        let text = #"{"cmd":"direct","i":3,"cid":"c","msg":"héllo"}"#
        let expected = try codec.decode(text)
        XCTAssertEqual(try Array(text.utf8).withUnsafeBytes { try codec.decode(bytes: $0) }, expected)
        XCTAssertEqual(try codec.decode(bytes: Array(text.utf8)), expected)
        XCTAssertEqual(try codec.decode(bytes: Data(text.utf8)), expected)
        XCTAssertEqual(try codec.decode(bytes: text.utf8), expected)
        XCTAssertEqual(try codec.decode(bytes: Array(text.utf8).lazy.map { $0 }), expected)
        XCTAssertEqual(failure(bytes: [])?.error.detail, "frame is not a JSON object")
        var buffer: [UInt8] = []
        JSONValue.object(["b": 1, "a": [true, .null]]).writeJSON(into: &buffer)
        XCTAssertEqual(String(decoding: buffer, as: UTF8.self), #"{"a":[true,null],"b":1}"#)
    }

    // MARK: Random commands

    static func randomBool(_ rng: inout SplitMix64) -> Bool { Bool.random(using: &rng) }

    static func randomInt64(_ rng: inout SplitMix64) -> Int64 {
        switch rng.next() % 6 {
        case 0: ([0, 1, -1, .max, .min, 1_763_700_000_000] as [Int64]).randomElement(using: &rng)!
        case 1: Int64(bitPattern: rng.next())
        case 2: -Int64.random(in: 0..<1_000_000, using: &rng)
        default: Int64.random(in: 0..<100_000, using: &rng)
        }
    }

    static func randomInt(_ rng: inout SplitMix64) -> Int { Int(randomInt64(&rng)) }

    static let stringPool = [
        "", "Tom", "5f1c0a9e2b7d4c11a0e4f2b1", #"{"_lctype":-1,"_lctext":"hi"}"#, "a/b", "\\", "\"",
        "旧金山", "😀👍🏽", "e\u{301}", "\u{0}", "\u{1f}\u{7f}", "line\nbreak\ttab", "\u{2028}\u{FEFF}",
    ]

    static func randomString(_ rng: inout SplitMix64) -> String {
        if Bool.random(using: &rng) { return stringPool.randomElement(using: &rng)! }
        var scalars = String.UnicodeScalarView()
        for _ in 0..<Int.random(in: 0..<20, using: &rng) {
            let range: ClosedRange<UInt32> = [
                0...0x1F, 0x20...0x7E, 0x20...0x7E, 0x80...0x7FF, 0x800...0xD7FF, 0xE000...0xFFFF,
                0x10000...0x10FFFF,
            ].randomElement(using: &rng)!
            scalars.append(Unicode.Scalar(UInt32.random(in: range, using: &rng))!)
        }
        return String(scalars)
    }

    static func randomStrings(_ rng: inout SplitMix64) -> [String] {
        (0..<Int.random(in: 0..<4, using: &rng)).map { _ in randomString(&rng) }
    }

    /// Doubles are never whole numbers within Int64 (Foundation reads those back as `.int`).
    static func randomDouble(_ rng: inout SplitMix64) -> Double {
        let pool = [
            0.1, -0.5, 1e-7, Double.leastNonzeroMagnitude, 1e300, -1.7976931348623157e308, 3.141592653589793, 1.2345678901234568e+29,
            0.30000000000000004, 2.5e-3,
        ]
        if Bool.random(using: &rng) { return pool.randomElement(using: &rng)! }
        while true {
            let d = Double(bitPattern: rng.next())
            if d.isFinite, d.rounded() != d || abs(d) >= 9.3e18 { return d }
        }
    }

    static func randomValue(_ rng: inout SplitMix64, depth: Int) -> JSONValue {
        switch rng.next() % (depth < 3 ? 8 : 6) {
        case 0: .null
        case 1: .bool(randomBool(&rng))
        case 2: .int(Int(randomInt64(&rng)))
        case 3: .double(randomDouble(&rng))
        case 4, 5: .string(randomString(&rng))
        case 6: .array((0..<Int.random(in: 0..<4, using: &rng)).map { _ in randomValue(&rng, depth: depth + 1) })
        default: .object(randomObject(&rng, depth: depth + 1))
        }
    }

    static func randomNonNullValue(_ rng: inout SplitMix64) -> JSONValue {
        let value = randomValue(&rng, depth: 1)
        return value == .null ? .string("null") : value
    }

    static func randomObject(_ rng: inout SplitMix64, depth: Int) -> [String: JSONValue] {
        var object: [String: JSONValue] = [:]
        for _ in 0..<Int.random(in: 0..<5, using: &rng) {
            object[randomString(&rng)] = randomValue(&rng, depth: depth)
        }
        return object
    }
}

/// A small seeded generator, so that failures reproduce.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
