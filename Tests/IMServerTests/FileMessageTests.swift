import Foundation
import HookbotTestSupport
import IMCore
import XCTest

@testable import IMServer

/// Typed file messages (`_lcfile.objId`) get the stored file's url and metaData from the server.
final class FileMessageTests: XCTestCase {
    func fileObject(_ text: String?) throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(try XCTUnwrap(text).utf8)) as? [String: Any]
        return try XCTUnwrap(object?["_lcfile"] as? [String: Any])
    }

    func testImageMessageGetsTheStoredFilesURLAndMetadata() async throws {
        let server = try await startServer()
        let (tom, jerry) = try await server.login("Tom", "Jerry")
        let opener = try await TestClient.connect(port: server.port)
        var open = Command(cmd: .session, op: .open)
        open.peerId = "Tom"
        let token = try required(try await opener.request(open).st)
        let cid = try await tom.startConversation(members: ["Jerry", "Spike"])
        let png = Data(MediaFixtures.png(width: 320, height: 200, padding: 500))
        let up = try await MediaRouteTests.call(
            server.port, "POST", "/media?name=cat.png", token: token, body: png)
        XCTAssertEqual(up.status, 201, String(decoding: up.body, as: UTF8.self))
        let id = try XCTUnwrap(up.json["id"] as? String)

        // Only the objId and a wrong width (and a url elsewhere): the server's values replace them.
        let sent =
            #"{"_lctype":-2,"_lctext":"look","_lcfile":{"objId":"\#(id)","url":"http://127.0.0.1:\#(server.port)/x.png","#
            + #""metaData":{"width":9999,"name":"evil.exe","owner":"Jerry"}}}"#
        let ack = try await tom.sendAccepted(sent, to: cid)
        let received = try await jerry.nextMessage()
        let history = try required(try await jerry.history(cid).logs?.first)
        // Spike was offline: he gets the stored message when he logs in.
        let spike = try await server.login("Spike")
        let offline = try await spike.nextMessage()
        XCTAssertEqual(offline.offline, true)
        for text in [received.msg, history.data, offline.msg] {
            let file = try fileObject(text)
            XCTAssertEqual(file["objId"] as? String, id)
            XCTAssertEqual(file["url"] as? String, "http://127.0.0.1:\(server.port)/media/\(id)/cat.png")
            let meta = try XCTUnwrap(file["metaData"] as? [String: Any])
            XCTAssertEqual(meta["width"] as? Int, 320)
            XCTAssertEqual(meta["height"] as? Int, 200)
            XCTAssertEqual(meta["size"] as? Int, png.count)
            XCTAssertEqual(meta["format"] as? String, "png")
            XCTAssertEqual(meta["name"] as? String, "cat.png")
            // The uploader, as GET /1.1/files answers it, not the sender's claim.
            XCTAssertEqual(meta["owner"] as? String, "Tom")
            XCTAssertNil(meta["duration"])
            let object = try JSONSerialization.jsonObject(with: Data(try XCTUnwrap(text).utf8)) as? [String: Any]
            XCTAssertEqual(object?["_lctext"] as? String, "look")
        }
        // The url it names downloads the bytes.
        let file = try fileObject(received.msg)
        let path = try XCTUnwrap(URL(string: try XCTUnwrap(file["url"] as? String))?.path)
        let download = try await MediaRouteTests.call(server.port, "GET", path)
        XCTAssertEqual(download.body, png)

        // Only an objId: the url is the server's listening address and the download path.
        try await tom.sendAccepted(#"{"_lctype":-2,"_lcfile":{"objId":"\#(id)"}}"#, to: cid)
        let bare = try fileObject(try await jerry.nextMessage().msg)
        XCTAssertEqual(bare["url"] as? String, "http://127.0.0.1:\(server.port)/media/\(id)/cat.png")
        XCTAssertEqual((bare["metaData"] as? [String: Any])?["width"] as? Int, 320)

        // An edit that claims another size is corrected the same way.
        let edited = try await tom.request(
            .edit(ack, in: cid, to: #"{"_lctype":-2,"_lcfile":{"objId":"\#(id)","metaData":{"width":1,"height":1}}}"#))
        XCTAssertEqual(edited.op, .modified, "\(edited)")
        let event = try await jerry.next { $0.cmd == .patch && $0.op == .modify }
        let editedMeta = try fileObject(event.patches?.first?.data)["metaData"] as? [String: Any]
        XCTAssertEqual(editedMeta?["width"] as? Int, 320)
        XCTAssertEqual(editedMeta?["height"] as? Int, 200)
    }

    /// The pre-check that spares ordinary texts a parse: the key `"_lcfile"` anywhere in the UTF-8 bytes, and only it.
    func testThePreCheckFindsTheFileKeyAnywhereAndNothingElse() {
        let image = #"{"_lctype":-2,"_lctext":"日落 🌇","_lcfile":{"objId":"abc"}}"#
        XCTAssertTrue(FileMessageFill.mentionsFile(image))
        XCTAssertTrue(FileMessageFill.mentionsFile(#""_lcfile""#), "the whole text is the key")
        XCTAssertTrue(FileMessageFill.mentionsFile(#"{"_lctext":"猫","_lcfile""#), "at the very end")
        XCTAssertFalse(FileMessageFill.mentionsFile(#"{"_lctype":-1,"_lctext":"ping 42 @Jerry 🎉"}"#))
        XCTAssertFalse(FileMessageFill.mentionsFile(#"{"_lcfil":1,"_lcfiles":2,"lcfile":3}"#), "near misses")
        XCTAssertFalse(FileMessageFill.mentionsFile(#""_lcfile"#), "shorter than the key")
        XCTAssertFalse(FileMessageFill.mentionsFile(""))
        // A string that is not stored as contiguous UTF-8 (bridged from NSString) is searched too.
        XCTAssertTrue(FileMessageFill.mentionsFile(String(NSString(string: image))))
    }

    func testUnknownAndOrdinaryMessagesAreUntouched() async throws {
        let server = try await startServer()
        let (tom, jerry) = try await server.login("Tom", "Jerry")
        let cid = try await tom.startConversation(members: ["Jerry"])
        let texts = [
            #"{"_lctype":-2,"_lcfile":{"objId":"AAAAAAAAAAAAAAAAAAAAAA","url":"https://example.com/b.png","metaData":{"width":7}}}"#,
            // URL-only, but not a URL a record may name: left as sent.
            #"{"_lctype":-2,"_lcfile":{"url":"javascript:alert(1)","metaData":{"width":7}}}"#,
            #"{"_lctype":-2,"_lcfile":{"url":"/relative/a.png"}}"#,
            #"{"_lctype":-1,"_lcfile":{"url":"https://example.com/a.png"}}"#,
            #"{"_lctype":-1,"_lctext":"\"_lcfile\" is just text"}"#,
            #"not JSON "_lcfile""#,
        ]
        for text in texts {
            try await tom.sendAccepted(text, to: cid)
            let got = try await jerry.nextMessage().msg
            XCTAssertEqual(got, text)
        }
    }

    /// A URL-only file message gets the objId of an external file record (LeanCloud's typed-messages plugin
    /// cannot read an `_lcfile` without one); `GET /1.1/files/<objId>` answers the URL.
    func testAURLOnlyFileMessageGetsTheObjIdOfAnExternalFileRecord() async throws {
        let server = try await startServer()
        let (tom, jerry) = try await server.login("Tom", "Jerry")
        let cid = try await tom.startConversation(members: ["Jerry"])
        let sent =
            #"{"_lctype":-2,"_lctext":"look","_lcfile":{"url":"https://cdn.example.com/p/cat%20big.png","metaData":{"width":7,"height":5}}}"#
        try await tom.sendAccepted(sent, to: cid)
        let received = try await jerry.nextMessage()
        let file = try fileObject(received.msg)
        let objID = try XCTUnwrap(file["objId"] as? String)
        XCTAssertEqual(objID.count, 22)
        // Nothing else changes: the url and metaData are the sender's (nobody has the bytes).
        XCTAssertEqual(file["url"] as? String, "https://cdn.example.com/p/cat%20big.png")
        XCTAssertEqual(file["metaData"] as? [String: Int], ["width": 7, "height": 5])
        let history = try await jerry.history(cid)
        XCTAssertEqual(try fileObject(history.logs?.first?.data)["objId"] as? String, objID)
        // The storage API answers the record: the url, the name from the URL, the sender.
        let fetched = try await MediaRouteTests.call(server.port, "GET", "/1.1/files/\(objID)")
        XCTAssertEqual(fetched.status, 200)
        XCTAssertEqual(fetched.json["url"] as? String, "https://cdn.example.com/p/cat%20big.png")
        XCTAssertEqual(fetched.json["name"] as? String, "cat big.png")
        XCTAssertEqual(fetched.json["provider"] as? String, "external")
        XCTAssertEqual((fetched.json["metaData"] as? [String: String])?["owner"], "Tom")
        // No bytes behind it: /media/<objId> is not a way to reach the URL.
        let download = try await MediaRouteTests.call(server.port, "GET", "/media/\(objID)")
        XCTAssertEqual(download.status, 404)
        // The same URL from the same sender: the same record; from another sender: its own.
        try await tom.sendAccepted(sent, to: cid)
        let again = try await jerry.nextMessage()
        XCTAssertEqual(try fileObject(again.msg)["objId"] as? String, objID)
        try await jerry.sendAccepted(sent, to: cid)
        let fromJerry = try await tom.nextMessage()
        let jerrysID = try XCTUnwrap(try fileObject(fromJerry.msg)["objId"] as? String)
        XCTAssertNotEqual(jerrysID, objID)
    }

    /// The limit is checked on what the sender sent; the fill may then make the message longer, within
    /// `FileMessageFill.headroomBytes`: delivered and stored whole, not refused after the fact.
    func testAFilledMessageMayPassTheMessageLimitByTheFillsHeadroom() async throws {
        let server = try await startServer { $0.maxMessageBytes = 200 }
        let (tom, jerry) = try await server.login("Tom", "Jerry")
        let opener = try await TestClient.connect(port: server.port)
        var open = Command(cmd: .session, op: .open)
        open.peerId = "Tom"
        let token = try required(try await opener.request(open).st)
        let cid = try await tom.startConversation(members: ["Jerry"])
        let name = String(repeating: "n", count: 120) + ".png"
        let up = try await MediaRouteTests.call(
            server.port, "POST", "/media?name=\(name)", token: token, body: Data(MediaFixtures.png(width: 3, height: 2)))
        let id = try XCTUnwrap(up.json["id"] as? String)
        let head = #"{"_lctype":-2,"_lcfile":{"objId":"\#(id)"},"_lctext":""#
        let text = head + String(repeating: "x", count: 200 - head.utf8.count - 2) + #""}"#
        XCTAssertEqual(text.utf8.count, 200)
        try await tom.sendAccepted(text, to: cid)
        let message = try await jerry.nextMessage()
        let received = try XCTUnwrap(message.msg)
        XCTAssertGreaterThan(received.utf8.count, 400)
        XCTAssertLessThanOrEqual(received.utf8.count, 200 + 4096)
        let meta = try fileObject(received)["metaData"] as? [String: Any]
        XCTAssertEqual(meta?["name"] as? String, name)
        let history = try await jerry.history(cid)
        XCTAssertEqual(try required(history.logs?.first).data, received)
        // One byte over the limit as sent is refused as before (4109), fill or not.
        var direct = Command(cmd: .direct)
        direct.cid = cid
        direct.msg = text + " "
        let refused = try await tom.request(direct)
        XCTAssertEqual(refused.code, 4109)
    }
}
