import Foundation
import HookbotTestSupport
import IMCore
import XCTest

@testable import IMServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The file URLs the server writes (public URL, listening address) and signed, expiring URLs, on a real server.
final class MediaURLTests: XCTestCase {
    static let masterKey = "media-url-master"

    func send(_ text: String, from client: TestClient, to cid: String) async throws {
        var direct = Command(cmd: .direct)
        direct.cid = cid
        direct.msg = text
        let ack = try await client.request(direct)
        XCTAssertNil(ack.code, ack.reason ?? "")
    }

    func fileURL(_ text: String?) throws -> String {
        let object = try JSONSerialization.jsonObject(with: Data(try XCTUnwrap(text).utf8)) as? [String: Any]
        return try XCTUnwrap((object?["_lcfile"] as? [String: Any])?["url"] as? String)
    }

    /// Tom uploads a PNG and sends an image message naming it with a url on `claimed`; answers the upload's
    /// JSON and what Jerry received and reads back from history.
    func sendImage(on server: ServerHarness, claiming claimed: String) async throws -> (
        upload: [String: Any], live: String, history: String
    ) {
        let (tom, jerry) = try await server.login("Tom", "Jerry")
        let cid = try await tom.startConversation(members: ["Jerry"])
        let up = try await MediaRouteTests.call(
            server.port, "POST", "/media?name=cat.png", token: try await server.sessionToken("Tom"),
            body: TestPNG.make(width: 12, height: 8))
        XCTAssertEqual(up.status, 201, String(decoding: up.body, as: UTF8.self))
        let id = try XCTUnwrap(up.json["id"] as? String)
        try await send(
            #"{"_lctype":-2,"_lcfile":{"objId":"\#(id)","url":"\#(claimed)/media/\#(id)/cat.png","metaData":{"width":1}}}"#, from: tom,
            to: cid)
        let live = try fileURL(try await jerry.nextMessage().msg)
        let history = try fileURL(try required(try await jerry.history(cid).logs?.first).data)
        return (up.json, live, history)
    }

    func testASendersHostIsNeverWhatReceiversGet() async throws {
        // No public URL: the server's listening address, whatever the sender claimed.
        let plain = try await startServer()
        let (upload, live, history) = try await sendImage(on: plain, claiming: "https://evil.example")
        let id = try XCTUnwrap(upload["id"] as? String)
        XCTAssertEqual(live, "http://127.0.0.1:\(plain.port)/media/\(id)/cat.png")
        XCTAssertEqual(history, live)
        XCTAssertEqual(upload["url"] as? String, "/media/\(id)/cat.png")

        // A public URL: every absolute URL starts with it (the fill, POST /media, fileTokens, /1.1/files).
        let public_ = try await startServer { $0.media.publicURL = "https://chat.example.com/im" }
        let named = try await sendImage(on: public_, claiming: "https://evil.example")
        let namedID = try XCTUnwrap(named.upload["id"] as? String)
        XCTAssertEqual(named.live, "https://chat.example.com/im/media/\(namedID)/cat.png")
        XCTAssertEqual(named.history, named.live)
        XCTAssertEqual(named.upload["url"] as? String, named.live)
        let tokenReply = try await call(
            public_.port, "POST", "/1.1/fileTokens", headers: ["X-LC-Session": try await public_.sessionToken("Tom")],
            body: Data(#"{"name":"a.png"}"#.utf8))
        XCTAssertEqual(tokenReply.status, 200, "\(tokenReply.json)")
        let objectID = try XCTUnwrap(tokenReply.json["objectId"] as? String)
        XCTAssertEqual(tokenReply.json["url"] as? String, "https://chat.example.com/im/media/\(objectID)/a.png")
        XCTAssertTrue(
            (tokenReply.json["upload_url"] as? String)?.hasPrefix("https://chat.example.com/im/1.1/fileUploads/\(objectID)?token=") == true,
            "\(tokenReply.json)")
        let fetched = try await call(public_.port, "GET", "/1.1/files/\(namedID)")
        XCTAssertEqual(fetched.json["url"] as? String, named.live)

        // Listening on every address the server cannot name itself: the bare path, never the sender's host.
        let wildcard = try await startServer { $0.host = "0.0.0.0" }
        let bare = try await sendImage(on: wildcard, claiming: "https://evil.example")
        XCTAssertEqual(bare.live, "/media/\(try XCTUnwrap(bare.upload["id"] as? String))/cat.png")
    }

    func testSignedURLsAreNeededAndExpireAndThumbnailsWorkOnThem() async throws {
        let server = try await startServer { configuration in
            configuration.masterKey = Self.masterKey
            configuration.media.signedURLs = true
            configuration.media.urlTTL = 600
        }
        let png = TestPNG.make(width: 40, height: 20)
        let up = try await MediaRouteTests.call(
            server.port, "POST", "/media?name=cat.png", headers: ["X-LC-Key": "\(Self.masterKey),master"], body: png)
        XCTAssertEqual(up.status, 201, String(decoding: up.body, as: UTF8.self))
        let id = try XCTUnwrap(up.json["id"] as? String)
        let url = try XCTUnwrap(up.json["url"] as? String)
        // /media/<id>/<expires>-<mac>/cat.png, the expiry about url_ttl from now.
        let parts = url.split(separator: "/").map(String.init)
        XCTAssertEqual(parts.count, 4, url)
        XCTAssertEqual([parts[0], parts[1], parts[3]], ["media", id, "cat.png"])
        let expires = try XCTUnwrap(Int64(parts[2].split(separator: "-").first ?? ""))
        XCTAssertEqual(Double(expires), Date().timeIntervalSince1970 + 600, accuracy: 5)

        let download = try await MediaRouteTests.call(server.port, "GET", url)
        XCTAssertEqual(download.status, 200)
        XCTAssertEqual(download.body, png)
        let head = try await MediaRouteTests.call(server.port, "HEAD", url)
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.headers["content-length"], String(png.count))
        // LeanCloud's thumbnailURL() appends ?imageView/… to the url: the signature is in the path, so it holds.
        let thumbnail = try await MediaRouteTests.call(server.port, "GET", url + "?imageView/2/w/10/h/10/q/100/format/png")
        XCTAssertEqual(thumbnail.status, 200, String(decoding: thumbnail.body, as: UTF8.self))
        XCTAssertEqual(thumbnail.headers["content-type"], "image/png")

        // Unsigned, tampered, another file's signature, expired: 403 with a code; HEAD too.
        var other = ServerConfiguration()
        other.masterKey = Self.masterKey
        other.media.signedURLs = true
        other.media.urlTTL = 600
        let expired = MediaURLs(other).path(id: id, name: "cat.png", now: Int64(Date().timeIntervalSince1970) - 700)
        let mac = String(parts[2].split(separator: "-", maxSplits: 1)[1])
        let tampered = "/media/\(id)/\(expires)-\(mac.first == "A" ? "B" : "A")\(mac.dropFirst())/cat.png"
        let longer = "/media/\(id)/\(expires + 86400)-\(mac)/cat.png"
        let otherID = "/media/\(MediaIDs.make())/\(parts[2])/cat.png"
        for (path, code) in [
            ("/media/\(id)/cat.png", 4610), ("/media/\(id)", 4610), (tampered, 4610), (longer, 4610), (expired, 4611),
            (expired + "?imageView/2/w/10", 4611),
        ] {
            let refused = try await MediaRouteTests.call(server.port, "GET", path)
            XCTAssertEqual(refused.status, 403, path)
            XCTAssertEqual(refused.json["code"] as? Int, code, path)
            XCTAssertNotEqual(refused.body, png)
            let headRefused = try await MediaRouteTests.call(server.port, "HEAD", path)
            XCTAssertEqual(headRefused.status, 403, path)
        }
        // An id the server does not know is refused for its signature before the lookup says anything.
        let reply1 = try await MediaRouteTests.call(server.port, "GET", otherID)
        XCTAssertEqual(reply1.status, 403)

        // What receivers of a file message get is signed too, and downloads.
        let (tom, jerry) = try await server.login("Tom", "Jerry")
        let cid = try await tom.startConversation(members: ["Jerry"])
        try await send(#"{"_lctype":-2,"_lcfile":{"objId":"\#(id)"}}"#, from: tom, to: cid)
        let message = try await jerry.nextMessage()
        let received = try XCTUnwrap(URL(string: try fileURL(message.msg)))
        XCTAssertEqual(received.host, "127.0.0.1")
        XCTAssertEqual(received.pathComponents.count, 5, "\(received)")
        let reply2 = try await MediaRouteTests.call(server.port, "GET", received.path)
        XCTAssertEqual(reply2.body, png)

        // GET /1.1/files hands out a fresh URL, so it needs a caller the storage API knows.
        let anonymous = try await call(server.port, "GET", "/1.1/files/\(id)")
        XCTAssertEqual(anonymous.status, 401)
        let operator_ = try await call(server.port, "GET", "/1.1/files/\(id)", headers: ["X-LC-Key": "\(Self.masterKey),master"])
        XCTAssertEqual(operator_.status, 200)
        let fresh = try XCTUnwrap(URL(string: try XCTUnwrap(operator_.json["url"] as? String)))
        let reply3 = try await MediaRouteTests.call(server.port, "GET", fresh.path)
        XCTAssertEqual(reply3.status, 200)
    }

    func testASignedURLKeepsWorkingOnAnotherNodeWithTheSameKeyAndAfterSigningIsTurnedOff() async throws {
        let first = try await ServerHarness.start { configuration in
            configuration.masterKey = Self.masterKey
            configuration.media.signedURLs = true
        }
        let png = TestPNG.make(width: 4, height: 4)
        let up = try await MediaRouteTests.call(
            first.port, "POST", "/media?name=a.png", headers: ["X-LC-Key": "\(Self.masterKey),master"], body: png)
        let url = try XCTUnwrap(up.json["url"] as? String)
        await first.stop()
        // The same files and master key: the key is derived from it, so the URL holds.
        let second = try await ServerHarness.start(directory: first.directory) { configuration in
            configuration.masterKey = Self.masterKey
            configuration.media.signedURLs = true
        }
        let reply4 = try await MediaRouteTests.call(second.port, "GET", url)
        XCTAssertEqual(reply4.body, png)
        await second.stop()
        // Another master key: refused.
        let stranger = try await ServerHarness.start(directory: first.directory) { configuration in
            configuration.masterKey = "another key"
            configuration.media.signedURLs = true
        }
        let reply5 = try await MediaRouteTests.call(stranger.port, "GET", url)
        XCTAssertEqual(reply5.status, 403)
        await stranger.stop()
        // Signing off: the signed URL written earlier still downloads, and so does the plain one.
        let unsigned = try await startServer(directory: first.directory) { $0.masterKey = Self.masterKey }
        let reply6 = try await MediaRouteTests.call(unsigned.port, "GET", url)
        XCTAssertEqual(reply6.body, png)
        let plain = "/media/\(try XCTUnwrap(up.json["id"] as? String))/a.png"
        let reply7 = try await MediaRouteTests.call(unsigned.port, "GET", plain)
        XCTAssertEqual(reply7.body, png)
    }

    /// `AV.File.withURL(name, url).save()`: `POST /1.1/files/<name>` `{name, ACL, metaData, mime_type, url}`
    /// (the SDK's `src/file.js`) makes an external file record; fetch and destroy work on it.
    func testTheStorageSDKsWithURLSaveMakesARecordOfAFileKeptElsewhere() async throws {
        let server = try await startServer()
        let tom = try await server.sessionToken("Tom")
        let jerry = try await server.sessionToken("Jerry")
        let body = Data(
            #"{"name":"logo.png","ACL":null,"metaData":{"__source":"external","owner":"unknown"},"mime_type":"image/png","url":"https://cdn.example.com/logo.png"}"#
                .utf8)
        let saved = try await call(server.port, "POST", "/1.1/files/logo.png", headers: ["X-LC-Session": tom], body: body)
        XCTAssertEqual(saved.status, 201, "\(saved.json)")
        let id = try XCTUnwrap(saved.json["objectId"] as? String)
        XCTAssertEqual(saved.json["url"] as? String, "https://cdn.example.com/logo.png")
        XCTAssertEqual(saved.json["name"] as? String, "logo.png")
        let fetched = try await call(server.port, "GET", "/1.1/files/\(id)")
        XCTAssertEqual(fetched.status, 200)
        XCTAssertEqual(fetched.json["mime_type"] as? String, "image/png")
        XCTAssertEqual((fetched.json["metaData"] as? [String: Any])?["owner"] as? String, "Tom")
        // Not a URL a record may name; no caller at all.
        let bad = try await call(
            server.port, "POST", "/1.1/files/x", headers: ["X-LC-Session": tom],
            body: Data(#"{"name":"x","url":"file:///etc/passwd"}"#.utf8))
        XCTAssertEqual(bad.status, 400)
        XCTAssertEqual(bad.json["code"] as? Int, 142)
        let anonymous = try await call(server.port, "POST", "/1.1/files", body: body)
        XCTAssertEqual(anonymous.status, 401)
        // Destroy: not by another client; by its owner.
        let refused = try await call(server.port, "DELETE", "/1.1/files/\(id)", headers: ["X-LC-Session": jerry])
        XCTAssertEqual(refused.status, 403)
        let deleted = try await call(server.port, "DELETE", "/1.1/files/\(id)", headers: ["X-LC-Session": tom])
        XCTAssertEqual(deleted.status, 200)
        let gone = try await call(server.port, "GET", "/1.1/files/\(id)")
        XCTAssertEqual(gone.status, 404)
    }

    func call(_ port: Int, _ method: String, _ path: String, headers: [String: String] = [:], body: Data? = nil) async throws
        -> (status: Int, json: [String: Any])
    {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        request.httpBody = body
        let (data, response) = try await URLSession.shared.data(for: request)
        let status = try XCTUnwrap(response as? HTTPURLResponse).statusCode
        return (status, (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:])
    }
}
