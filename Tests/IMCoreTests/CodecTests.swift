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

    func testClientIDRules() {
        XCTAssertNil(ClientID.validate("Tom"))
        XCTAssertNil(ClientID.validate(String(repeating: "猫", count: 64)))
        XCTAssertEqual(ClientID.validate(String(repeating: "猫", count: 65))?.code, 4103)
        XCTAssertEqual(ClientID.validate("")?.code, 4103)
        XCTAssertEqual(ClientID.validate(nil)?.code, 4103)
    }
}
