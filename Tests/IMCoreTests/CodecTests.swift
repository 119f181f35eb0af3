import IMCore
import XCTest

final class CodecTests: XCTestCase {
    let codec = JSONCommandCodec()

    func testCommandRoundTripsAndOmitsUnsetFields() throws {
        var direct = Command(cmd: .direct, i: 7)
        direct.cid = "c1"
        direct.msg = TypedMessage.text("hi").encoded()
        direct.r = true
        direct.ext = ["n": 1, "flag": true, "s": "x"]
        let text = codec.encode(direct)
        XCTAssertFalse(text.contains("null"), text)
        XCTAssertFalse(text.contains("peerId"), text)
        XCTAssertEqual(try codec.decode(text), direct)

        var membersJoined = Command(cmd: .conv, op: .membersJoined)
        membersJoined.m = ["a", "b"]
        XCTAssertTrue(codec.encode(membersJoined).contains(#""op":"members-joined""#))
    }

    func testDecodingErrorsCarryCodesAndTheRequestSerial() {
        func failure(_ text: String) -> CommandDecodingError? {
            do {
                _ = try codec.decode(text)
                return nil
            } catch { return error }
        }
        XCTAssertEqual(failure("nope")?.error.code, 4901)
        XCTAssertNil(failure("nope")?.requestSerial)
        XCTAssertEqual(failure(#"{"i":3}"#)?.error.code, 4901)
        XCTAssertEqual(failure(#"{"i":3}"#)?.requestSerial, 3)
        XCTAssertEqual(failure(#"{"cmd":"warp","i":4}"#)?.error.code, 4902)
        XCTAssertEqual(failure(#"{"cmd":"conv","op":"warp","i":5}"#)?.error.reason, "UNKNOWN_COMMAND")
        XCTAssertEqual(failure(#"{"cmd":"direct","i":6,"limit":"ten"}"#)?.error.detail, "invalid value for field 'limit'")
    }

    func testTypedMessagesUseLeanCloudFields() throws {
        let image = TypedMessage(
            type: MessageType.image.rawValue, text: "look", attributes: ["location": "旧金山"],
            file: FileInfo(
                url: "http://example.invalid/a.png", objId: "f1", name: "a.png", format: "png", size: 1024, width: 640, height: 480))
        let body = image.encoded()
        let object = try XCTUnwrap(JSONValue.parse(body)?.objectValue)
        XCTAssertEqual(object["_lctype"], -2)
        XCTAssertEqual(object["_lctext"], "look")
        XCTAssertEqual(object["_lcattrs"]?["location"], "旧金山")
        XCTAssertEqual(object["_lcfile"]?["metaData"]?["width"], 640)
        XCTAssertEqual(TypedMessage.decode(body), image)

        let location = TypedMessage(type: -5, location: Location(latitude: 31.3753285, longitude: 120.9664658))
        XCTAssertEqual(TypedMessage.decode(location.encoded())?.location, location.location)

        let poll = TypedMessage(type: 7, text: "lunch?", fields: ["options": ["rice", "noodles"]])
        let decoded = try XCTUnwrap(TypedMessage.decode(poll.encoded()))
        XCTAssertNil(decoded.builtinType)
        XCTAssertEqual(decoded.fields["options"], ["rice", "noodles"])

        XCTAssertNil(TypedMessage.decode("plain text"))
        XCTAssertNil(TypedMessage.decode(#"{"_lctype":"text"}"#))
    }

    /// A message with only a type, a text and attributes is written directly: the same bytes as its `jsonValue`'s
    /// text (the general path), whatever the text and attributes hold, and the same without them; any other field
    /// takes the general path.
    func testATypeAndATextAreWrittenAsTheirJSONValueIs() throws {
        let texts = [
            "pong 17", "", "周末一起吃火锅吗？🍲 @Jerry", "quote \" and backslash \\ and /", "line\nbreak\ttab\r\u{8}\u{C}",
            "nul \u{0} and \u{1F} and \u{7F}", "👨‍👩‍👧‍👦🇫🇷", String(repeating: "长", count: 2_000),
        ]
        for type in [MessageType.text.rawValue, -2, 0, 7, Int(Int32.max), Int(Int32.min)] {
            for text in texts {
                let message = TypedMessage(type: type, text: text)
                XCTAssertEqual(message.encoded(), message.jsonValue.jsonString(), "\(type) \(text.prefix(20))")
                XCTAssertEqual(TypedMessage.decode(message.encoded()), message)
                for attributes: [String: JSONValue] in [
                    [:], ["hookbot.hop": 1], ["z": "最后", "a": [1, 2.5, .null, true], "m": ["nested": ["k": .string(text)]], "": false],
                ] {
                    let attributed = TypedMessage(type: type, text: text, attributes: attributes)
                    XCTAssertEqual(attributed.encoded(), attributed.jsonValue.jsonString(), "\(type) \(attributes)")
                    XCTAssertEqual(TypedMessage.decode(attributed.encoded()), attributed)
                    let untexted = TypedMessage(type: type, attributes: attributes)
                    XCTAssertEqual(untexted.encoded(), untexted.jsonValue.jsonString())
                }
            }
            let bare = TypedMessage(type: type)
            XCTAssertEqual(bare.encoded(), bare.jsonValue.jsonString())
            XCTAssertEqual(bare.encoded(), "{\"_lctype\":\(type)}")
        }
        XCTAssertEqual(TypedMessage.text("hi 👋").encoded(), #"{"_lctext":"hi 👋","_lctype":-1}"#)
        let withAttributes = TypedMessage(type: -1, text: "hi", attributes: ["k": 1, "b": "x"])
        XCTAssertEqual(withAttributes.encoded(), #"{"_lcattrs":{"b":"x","k":1},"_lctext":"hi","_lctype":-1}"#)
        let withFields = TypedMessage(type: 7, text: "lunch?", fields: ["a": true, "z": "last"])
        XCTAssertEqual(withFields.encoded(), #"{"_lctext":"lunch?","_lctype":7,"a":true,"z":"last"}"#)
    }

    func testClientIDRules() {
        XCTAssertNil(ClientID.validate("Tom"))
        XCTAssertNil(ClientID.validate(String(repeating: "猫", count: 64)))
        XCTAssertEqual(ClientID.validate(String(repeating: "猫", count: 65))?.code, 4103)
        XCTAssertEqual(ClientID.validate("")?.code, 4103)
        XCTAssertEqual(ClientID.validate(nil)?.code, 4103)
    }
}
