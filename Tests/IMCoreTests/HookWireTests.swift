import Foundation
import IMCore
import XCTest

/// Hook requests and verdicts on the wire, checked against JSON read and written by Foundation's
/// `JSONSerialization` (an independent oracle: not our codec), the way a remote interceptor sees them.
final class HookWireTests: XCTestCase {
    let codec = JSONCommandCodec()

    /// The wire JSON of a command, as Foundation reads it.
    private func wire(_ command: Command) throws -> NSDictionary {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(codec.encode(command).utf8)) as? NSDictionary)
    }

    /// The command a remote peer's JSON (written by Foundation) decodes to.
    private func command(_ json: [String: Any]) throws -> Command {
        try codec.decode(String(decoding: try JSONSerialization.data(withJSONObject: json), as: UTF8.self))
    }

    func testRequestsEncodeToTheWireFieldsAndBack() throws {
        let typed = TypedMessage.text("周末一起吃火锅吗？🍲 @Jerry").encoded()
        let cases: [(HookRequest, [String: Any])] = [
            (
                .message(cid: "lobby", from: "Tom", content: .text(typed), priority: "high", mentionPids: ["Jerry"]),
                [
                    "cmd": "hook", "op": "request", "id": "h1", "kind": "message", "cid": "lobby", "fromPeerId": "Tom",
                    "msg": typed, "priority": "high", "mentionPids": ["Jerry"],
                ]
            ),
            (
                .message(cid: "lobby", from: "Tom", content: .binary(base64: "AAEC/w=="), priority: nil, mentionPids: nil),
                [
                    "cmd": "hook", "op": "request", "id": "h1", "kind": "message", "cid": "lobby", "fromPeerId": "Tom",
                    "binaryMsg": "AAEC/w==",
                ]
            ),
            (
                .edit(cid: "lobby", messageID: "m9", from: "Tom", content: .text("改一下 ✏️"), mentionPids: ["Jerry"]),
                [
                    "cmd": "hook", "op": "request", "id": "h1", "kind": "edit", "cid": "lobby", "mid": "m9", "fromPeerId": "Tom",
                    "msg": "改一下 ✏️", "mentionPids": ["Jerry"],
                ]
            ),
            (
                .membership(cid: "lobby", actor: "Tom", members: ["Jerry", "小明"], action: .invite),
                [
                    "cmd": "hook", "op": "request", "id": "h1", "kind": "membership", "cid": "lobby", "initBy": "Tom",
                    "m": ["Jerry", "小明"], "action": "invite",
                ]
            ),
            (
                .offline(
                    cid: "lobby", messageID: "m9", from: "Tom", timestamp: 1_700_000_000_123, mentionPids: ["Jerry"], mentionAll: true,
                    content: .text("晚安 🌙"), receivers: ["Jerry", "Bob"],
                    notification: ["title": "Tom", "body": "晚安 🌙", "data": .object(["cid": "lobby"])], deadlineMillis: 800),
                [
                    "cmd": "hook", "op": "request", "id": "h1", "kind": "offline", "cid": "lobby", "mid": "m9", "fromPeerId": "Tom",
                    "timestamp": 1_700_000_000_123, "mentionPids": ["Jerry"], "mentionAll": true, "msg": "晚安 🌙", "m": ["Jerry", "Bob"],
                    "attr": ["notification": ["title": "Tom", "body": "晚安 🌙", "data": ["cid": "lobby"]], "deadline": 800],
                ]
            ),
        ]
        for (request, expected) in cases {
            XCTAssertEqual(try wire(request.command(id: "h1")), expected as NSDictionary, "\(request.kind)")
            XCTAssertEqual(HookRequest(command: try command(expected)), request, "\(request.kind)")
        }
    }

    func testRequestsMissingWhatTheirKindNeedsAreNotRequests() throws {
        let base: [String: Any] = ["cmd": "hook", "op": "request", "id": "h1", "cid": "lobby", "fromPeerId": "Tom"]
        let broken: [[String: Any]] = [
            base.merging(["kind": "message"]) { $1 }, // no content
            base.merging(["kind": "warp", "msg": "hi"]) { $1 },
            base.merging(["kind": "edit", "msg": "hi"]) { $1 }, // no mid
            base.merging(["kind": "membership", "initBy": "Tom", "action": "dance"]) { $1 },
            ["cmd": "hook", "op": "request", "kind": "message", "fromPeerId": "Tom", "msg": "hi"], // no cid
        ]
        for json in broken { XCTAssertNil(HookRequest(command: try command(json)), "\(json)") }
    }

    func testVerdictsEncodeToTheWireFieldsAndBack() throws {
        let cases: [(HookVerdict, HookRequest.Kind, [String: Any])] = [
            (.allow, .message, ["verdict": "allow"]),
            (.drop(reason: "包含违禁词 🚫", appCode: 42), .message, ["verdict": "drop", "reason": "包含违禁词 🚫", "appCode": 42]),
            (.drop(silent: true), .edit, ["verdict": "drop", "silent": true]),
            (.modify(body: "oh ****", recipients: nil), .message, ["verdict": "modify", "msg": "oh ****"]),
            (.modify(body: nil, recipients: ["Jerry"]), .message, ["verdict": "modify", "m": ["Jerry"]]),
            (
                .declined(reason: "review budget of 150 ms exhausted"), .message,
                ["verdict": "none", "reason": "review budget of 150 ms exhausted"]
            ),
            (.unhooked, .offline, ["verdict": "unhooked"]),
            (.drop(), .offline, ["verdict": "drop"]),
        ]
        for (verdict, kind, fields) in cases {
            let expected = fields.merging(["cmd": "hook", "op": "verdict", "id": "h7"]) { $1 }
            XCTAssertEqual(try wire(verdict.command(id: "h7")), expected as NSDictionary, "\(verdict)")
            XCTAssertEqual(HookVerdict(command: try command(expected), answering: kind), verdict, "\(verdict)")
        }
    }

    func testOfflineChangesTravelAsAJSONObjectInMsg() throws {
        let verdict = HookVerdict.pushes(
            ["Jerry": .change(["title": "Tom 提到了你", "badge": 3, "sound": .null]), "Bob": .drop], others: .drop)
        let sent = verdict.command(id: "h2")
        let body = try XCTUnwrap(sent.msg)
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? NSDictionary)
        let expected: [String: Any] = [
            "Jerry": ["title": "Tom 提到了你", "badge": 3, "sound": NSNull()], "Bob": false, "*": false,
        ]
        XCTAssertEqual(object, expected as NSDictionary)
        XCTAssertEqual(sent.verdict, "modify")
        XCTAssertEqual(HookVerdict(command: sent, answering: .offline), verdict)
        // The same `modify` answering a message is a content change, not pushes.
        XCTAssertEqual(HookVerdict(command: sent, answering: .message), .modify(body: body, recipients: nil))
    }

    func testAnswersThatAreNotVerdicts() throws {
        func verdict(_ fields: [String: Any], _ kind: HookRequest.Kind = .message) throws -> HookVerdict? {
            HookVerdict(command: try command(fields.merging(["cmd": "hook", "op": "verdict", "id": "h3"]) { $1 }), answering: kind)
        }
        XCTAssertNil(try verdict(["verdict": "maybe"]))
        XCTAssertNil(try verdict([:]))
        XCTAssertNil(try verdict(["verdict": "modify"]), "a modify that changes nothing")
        XCTAssertNil(try verdict(["verdict": "modify", "msg": "not json"], .offline))
        XCTAssertNil(try verdict(["verdict": "modify", "msg": #"{"Jerry": {"badge": -1}}"#], .offline))
        XCTAssertNil(try verdict(["verdict": "modify", "msg": #"{"Jerry": {"colour": "red"}}"#], .offline))
        XCTAssertNil(try verdict(["verdict": "modify", "msg": #"{"Jerry": true}"#], .offline))
        // A drop's reason may come as `detail`, as LeanCloud's errors carry it.
        XCTAssertEqual(try verdict(["verdict": "drop", "detail": "spam"]), .drop(reason: "spam"))
    }
}
