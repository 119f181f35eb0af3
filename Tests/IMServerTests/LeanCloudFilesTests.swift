import Foundation
import HookbotTestSupport
import IMCore
import XCTest

@testable import IMServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// LeanCloud's storage SDK flow on the server's port, request by request as `AV.File#save()` (provider
/// `s3`), `fetch()` and `destroy()` send them (leancloud/javascript-sdk `src/file.js`, `src/uploader/s3.js`,
/// `src/request.js`): signed with `X-LC-Sign: md5(timestamp + appKey),timestamp`, the upload a bare `PUT` to
/// `upload_url`, `fileCallback` with the token.
final class LeanCloudFilesTests: XCTestCase {
    static let appID = "hookbot-app"
    static let appKey = "the-app-key"
    static let masterKey = "the-master-key"

    struct Answer {
        var status: Int
        var json: [String: Any]
        var headers: [String: String]
    }

    /// One HTTP request over loopback.
    func call(
        _ method: String, _ url: String, headers: [String: String] = [:], json: [String: Any]? = nil, body: Data? = nil
    ) async throws -> Answer {
        var request = URLRequest(url: try XCTUnwrap(URL(string: url)))
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        if let json { request.httpBody = try JSONSerialization.data(withJSONObject: json) }
        if let body { request.httpBody = body }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = try XCTUnwrap(response as? HTTPURLResponse)
        let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
        var answerHeaders: [String: String] = [:]
        for (name, value) in http.allHeaderFields { answerHeaders[String(describing: name).lowercased()] = String(describing: value) }
        return Answer(status: http.statusCode, json: object, headers: answerHeaders)
    }

    /// md5 written out from RFC 1321 (ReferenceDigest), so the test does not check the server's MD5 with itself.
    func md5(_ text: String) -> String { ReferenceDigest.md5(Array(text.utf8)) }

    /// The headers `src/request.js` sets: the app id, `X-LC-Sign` with the app (or master) key, JSON, and
    /// `X-LC-Session` when the call names a session token.
    func sdkHeaders(key: String = appKey, master: Bool = false, session: String? = nil, millis: Int64? = nil) throws -> [String: String] {
        let now = millis ?? Int64(Date().timeIntervalSince1970 * 1000)
        var headers = [
            "X-LC-Id": Self.appID, "Content-Type": "application/json;charset=UTF-8",
            "X-LC-Sign": "\(md5("\(now)\(key)")),\(now)\(master ? ",master" : "")",
        ]
        if let session { headers["X-LC-Session"] = session }
        return headers
    }

    /// A server with this file's app id and key that stops when the test ends.
    func startFilesServer(signatures: Bool = false, maxUploadBytes: Int64 = 1 << 20) async throws -> ServerHarness {
        try await startServer { configuration in
            configuration.appID = Self.appID
            configuration.appKey = Self.appKey
            if signatures { configuration.masterKey = Self.masterKey }
            configuration.media.maxUploadBytes = maxUploadBytes
        }
    }

    func testTheStorageSDKsSaveFetchAndDestroy() async throws {
        let server = try await startFilesServer()
        let base = "http://127.0.0.1:\(server.port)"
        let (tom, tomToken) = try await server.session("Tom")
        let (jerry, jerryToken) = try await server.session("Jerry")
        let png = TestPNG.make(width: 7, height: 5)

        // 1. fileTokens: what _fileToken() posts for `new AV.File("pixel.png", buffer)` — no mime_type (undefined
        // is dropped by JSON), the SDK's own metaData.
        let token = try await call(
            "POST", "\(base)/1.1/fileTokens", headers: try sdkHeaders(session: tomToken),
            json: ["name": "pixel.png", "metaData": ["size": png.count, "owner": "unknown"]])
        XCTAssertEqual(token.status, 200, "\(token.json)")
        let objectID = try XCTUnwrap(token.json["objectId"] as? String)
        let uploadURL = try XCTUnwrap(token.json["upload_url"] as? String)
        let fileURL = try XCTUnwrap(token.json["url"] as? String)
        let uploadToken = try XCTUnwrap(token.json["token"] as? String)
        XCTAssertEqual(token.json["provider"] as? String, "s3")
        XCTAssertEqual(token.json["mime_type"] as? String, "image/png", "guessed from the name, so the SDK PUTs with it")
        XCTAssertTrue(uploadURL.hasPrefix("\(base)/"), uploadURL)
        XCTAssertEqual(fileURL, "\(base)/media/\(objectID)/pixel.png")
        XCTAssertFalse(fileURL.contains(TestPNG.sha256Hex(png)), "the public URL is not the content hash")

        // 2. The s3 uploader's PUT: exactly upload_url, Content-Type from the answer, its Cache-Control, nothing else.
        let put = try await call(
            "PUT", uploadURL, headers: ["Content-Type": "image/png", "Cache-Control": "public, max-age=31536000"], body: png)
        XCTAssertEqual(put.status, 200, "\(put.json)")

        // The upload URL is good for one upload: a replay cannot replace the file (4605, the id is taken).
        let replay = try await call("PUT", uploadURL, headers: ["Content-Type": "image/png"], body: Data("other".utf8))
        XCTAssertEqual(replay.status, 409, "\(replay.json)")
        XCTAssertEqual(replay.json["code"] as? Int, 4605)

        // 3. fileCallback: sent by _callback(true) with the app's headers and no session.
        let callback = try await call(
            "POST", "\(base)/1.1/fileCallback", headers: try sdkHeaders(), json: ["token": uploadToken, "result": true])
        XCTAssertEqual(callback.status, 200, "\(callback.json)")

        // fetch(): GET /1.1/files/<id> with the metadata the server computed, not the client's word.
        let fetched = try await call("GET", "\(base)/1.1/files/\(objectID)", headers: try sdkHeaders())
        XCTAssertEqual(fetched.status, 200, "\(fetched.json)")
        XCTAssertEqual(fetched.json["objectId"] as? String, objectID)
        XCTAssertEqual(fetched.json["url"] as? String, fileURL)
        XCTAssertEqual(fetched.json["name"] as? String, "pixel.png")
        XCTAssertEqual(fetched.json["mime_type"] as? String, "image/png")
        let meta = try XCTUnwrap(fetched.json["metaData"] as? [String: Any])
        XCTAssertEqual(meta["size"] as? Int, png.count)
        XCTAssertEqual(meta["width"] as? Int, 7)
        XCTAssertEqual(meta["height"] as? Int, 5)
        XCTAssertEqual(meta["format"] as? String, "png")
        XCTAssertEqual(meta["owner"] as? String, "Tom")
        XCTAssertEqual(meta["sha256"] as? String, TestPNG.sha256Hex(png))

        // The url the SDK got before sending a byte serves the bytes, typed by what they are.
        let (downloaded, response) = try await URLSession.shared.data(from: try XCTUnwrap(URL(string: fileURL)))
        XCTAssertEqual((response as? HTTPURLResponse)?.statusCode, 200)
        XCTAssertEqual(downloaded, png)
        XCTAssertEqual((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Content-Type"), "image/png")

        // destroy(): only the uploader (or the master key).
        let byJerry = try await call("DELETE", "\(base)/1.1/files/\(objectID)", headers: try sdkHeaders(session: jerryToken))
        XCTAssertEqual(byJerry.status, 403)
        XCTAssertEqual(byJerry.json["code"] as? Int, 119)
        let byTom = try await call("DELETE", "\(base)/1.1/files/\(objectID)", headers: try sdkHeaders(session: tomToken))
        XCTAssertEqual(byTom.status, 200, "\(byTom.json)")
        let gone = try await call("GET", "\(base)/1.1/files/\(objectID)", headers: try sdkHeaders())
        XCTAssertEqual(gone.status, 404)
        XCTAssertEqual(gone.json["code"] as? Int, 101)
        await tom.close()
        await jerry.close()
    }

    /// A web app on another origin: the browser's preflight is answered, and the answers may be read.
    func testBrowsersOnAnotherOriginMayCall() async throws {
        let server = try await startFilesServer()
        let base = "http://127.0.0.1:\(server.port)"
        let preflight = try await call(
            "OPTIONS", "\(base)/1.1/fileTokens",
            headers: [
                "Origin": "https://app.example", "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "x-lc-id,x-lc-sign,x-lc-ua,content-type",
            ])
        XCTAssertEqual(preflight.status, 204)
        XCTAssertEqual(preflight.headers["access-control-allow-origin"], "*")
        let allowed = Set(
            (preflight.headers["access-control-allow-headers"] ?? "").lowercased().split(separator: ",").map {
                $0.trimmingCharacters(in: .whitespaces)
            })
        XCTAssertTrue(
            Set(["x-lc-id", "x-lc-sign", "x-lc-ua", "x-lc-session", "content-type", "cache-control"]).isSubset(of: allowed), "\(allowed)")
        let upload = try await call("OPTIONS", "\(base)/1.1/fileUploads/abc?token=x", headers: ["Origin": "https://app.example"])
        XCTAssertEqual(upload.status, 204)
        XCTAssertTrue(upload.headers["access-control-allow-methods"]?.contains("PUT") == true)
        let token = try await call("POST", "\(base)/1.1/fileTokens", headers: try sdkHeaders(), json: ["name": "a.png"])
        XCTAssertEqual(token.status, 200)
        XCTAssertEqual(token.headers["access-control-allow-origin"], "*")
        let refused = try await call("POST", "\(base)/1.1/fileTokens", json: ["name": "a.png"])
        XCTAssertEqual(refused.status, 401)
        XCTAssertEqual(refused.headers["access-control-allow-origin"], "*", "errors are readable too")
    }

    /// Names with path parts lose them; names with spaces and other scripts are escaped in the url, which works.
    func testFileNamesAreCleanedAndTheirURLsEscaped() async throws {
        let server = try await startFilesServer()
        let base = "http://127.0.0.1:\(server.port)"
        let tricky = try await call("POST", "\(base)/1.1/fileTokens", headers: try sdkHeaders(), json: ["name": "../../etc/passwd"])
        XCTAssertEqual(tricky.status, 200, "\(tricky.json)")
        XCTAssertEqual(tricky.json["key"] as? String, "\(try XCTUnwrap(tricky.json["objectId"] as? String))/passwd")
        XCTAssertTrue((tricky.json["url"] as? String ?? "").hasSuffix("/passwd"), "\(tricky.json)")

        let token = try await call("POST", "\(base)/1.1/fileTokens", headers: try sdkHeaders(), json: ["name": "猫 #1?.png"])
        let url = try XCTUnwrap(token.json["url"] as? String)
        XCTAssertTrue(url.hasSuffix("/%E7%8C%AB%20%231%3F.png"), url)
        let png = TestPNG.make(width: 2, height: 3)
        let put = try await call(
            "PUT", try XCTUnwrap(token.json["upload_url"] as? String), headers: ["Content-Type": "image/png"], body: png)
        XCTAssertEqual(put.status, 200, "\(put.json)")
        let (downloaded, response) = try await URLSession.shared.data(from: try XCTUnwrap(URL(string: url)))
        XCTAssertEqual((response as? HTTPURLResponse)?.statusCode, 200)
        XCTAssertEqual(downloaded, png)
        let fetched = try await call("GET", "\(base)/1.1/files/\(try XCTUnwrap(token.json["objectId"] as? String))")
        XCTAssertEqual(fetched.json["name"] as? String, "猫 #1?.png")
        let tooLong = try await call(
            "POST", "\(base)/1.1/fileTokens", headers: try sdkHeaders(),
            body: Data("{\"name\": \"\(String(repeating: "a", count: 70_000))\"}".utf8))
        XCTAssertEqual(tooLong.status, 400, "\(tooLong.json)")
        XCTAssertEqual(tooLong.json["code"] as? Int, 107)
    }

    /// Nodes of one PostgreSQL database: an upload URL one node gave is good on another (a load balancer may send
    /// the PUT anywhere) because the ticket's key comes from the shared master key; a node with another key
    /// refuses it. The nodes share a media directory here, as the bytes stay on the node's disk for now.
    func testAnUploadURLFromOneNodeIsGoodOnAnotherWithTheSameMasterKey() async throws {
        try XCTSkipIf(TestDatabase.backend == .postgres, "starts its own nodes on the cluster (once, in the SQLite pass)")
        let url = try TestDatabase.postgresURL(schema: TestDatabase.schemaName())
        let media = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-media-\(UUID().uuidString)").path
        var nodes: [ServerHarness] = []
        for key in [Self.masterKey, Self.masterKey, "another-master-key"] {
            nodes.append(
                try await ServerHarness.start { configuration in
                    configuration.databaseURL = url
                    configuration.appID = Self.appID
                    configuration.appKey = Self.appKey
                    configuration.masterKey = key
                    configuration.media.directory = media
                })
        }
        let started = nodes
        defer {
            Task {
                for node in started { await node.stop() }
                try? FileManager.default.removeItem(atPath: media)
            }
        }
        let master = ["X-LC-Id": Self.appID, "X-LC-Key": "\(Self.masterKey),master", "Content-Type": "application/json"]
        let token = try await call("POST", "http://127.0.0.1:\(nodes[0].port)/1.1/fileTokens", headers: master, json: ["name": "n.png"])
        XCTAssertEqual(token.status, 200, "\(token.json)")
        let id = try XCTUnwrap(token.json["objectId"] as? String)
        let uploadURL = try XCTUnwrap(token.json["upload_url"] as? String)
        let png = TestPNG.make(width: 4, height: 4)
        let onOther = uploadURL.replacingOccurrences(of: ":\(nodes[0].port)/", with: ":\(nodes[2].port)/")
        let refused = try await call("PUT", onOther, headers: ["Content-Type": "image/png"], body: png)
        XCTAssertEqual(refused.status, 401, "a node with another master key: \(refused.json)")
        let onSecond = uploadURL.replacingOccurrences(of: ":\(nodes[0].port)/", with: ":\(nodes[1].port)/")
        let put = try await call("PUT", onSecond, headers: ["Content-Type": "image/png"], body: png)
        XCTAssertEqual(put.status, 200, "\(put.json)")
        let fetched = try await call("GET", "http://127.0.0.1:\(nodes[0].port)/1.1/files/\(id)")
        XCTAssertEqual(fetched.status, 200, "\(fetched.json)")
        XCTAssertEqual((fetched.json["metaData"] as? [String: Any])?["width"] as? Int, 4)
        let (downloaded, _) = try await URLSession.shared.data(
            from: try XCTUnwrap(URL(string: try XCTUnwrap(fetched.json["url"] as? String))))
        XCTAssertEqual(downloaded, png)
    }

    func testWrongKeysTokensAndOversizeUploadsAreRefused() async throws {
        let server = try await startFilesServer(maxUploadBytes: 1000)
        let base = "http://127.0.0.1:\(server.port)"
        let (tom, tomToken) = try await server.session("Tom")
        let name = ["name": "a.bin"]

        let unsigned = try await call("POST", "\(base)/1.1/fileTokens", json: name)
        XCTAssertEqual(unsigned.status, 401)
        XCTAssertEqual(unsigned.json["code"] as? Int, 401)
        let wrongKey = try await call("POST", "\(base)/1.1/fileTokens", headers: try sdkHeaders(key: "not-the-key"), json: name)
        XCTAssertEqual(wrongKey.status, 401, "\(wrongKey.json)")
        let stale = try await call(
            "POST", "\(base)/1.1/fileTokens", headers: try sdkHeaders(millis: Int64(Date().timeIntervalSince1970 * 1000) - 3_600_000),
            json: name)
        XCTAssertEqual(stale.status, 401, "\(stale.json)")
        let unknownSession = try await call("POST", "\(base)/1.1/fileTokens", headers: try sdkHeaders(session: "nope"), json: name)
        XCTAssertEqual(unknownSession.status, 401)
        XCTAssertEqual(unknownSession.json["code"] as? Int, 211)
        let notJSON = try await call(
            "POST", "\(base)/1.1/fileTokens", headers: try sdkHeaders(session: tomToken), body: Data("name=a".utf8))
        XCTAssertEqual(notJSON.status, 400)
        XCTAssertEqual(notJSON.json["code"] as? Int, 107)

        // AV.File.withURL(...).save(): a record of a file kept elsewhere (MediaURLTests has the rest); a URL that is
        // not http(s) is refused with 142.
        let external = try await call(
            "POST", "\(base)/1.1/files", headers: try sdkHeaders(session: tomToken),
            json: ["name": "a.png", "url": "ftp://example.invalid/a.png", "metaData": ["__source": "external"]])
        XCTAssertEqual(external.status, 400)
        XCTAssertEqual(external.json["code"] as? Int, 142)

        // With signatures off the app key alone may upload (owner "unknown"), as LeanCloud allows.
        let first = try await call("POST", "\(base)/1.1/fileTokens", headers: try sdkHeaders(), json: name)
        XCTAssertEqual(first.status, 200, "\(first.json)")
        let firstURL = try XCTUnwrap(first.json["upload_url"] as? String)
        let firstID = try XCTUnwrap(first.json["objectId"] as? String)
        // A forged token, and a genuine one used for another file, are refused before any byte is kept.
        let forged = firstURL.replacingOccurrences(of: "token=", with: "token=x")
        let forgedPut = try await call("PUT", forged, body: Data("hello".utf8))
        XCTAssertEqual(forgedPut.status, 401, "\(forgedPut.json)")
        let second = try await call("POST", "\(base)/1.1/fileTokens", headers: try sdkHeaders(session: tomToken), json: name)
        let secondID = try XCTUnwrap(second.json["objectId"] as? String)
        let swapped = firstURL.replacingOccurrences(of: "/\(firstID)?", with: "/\(secondID)?")
        let swappedPut = try await call("PUT", swapped, body: Data("hello".utf8))
        XCTAssertEqual(swappedPut.status, 401, "\(swappedPut.json)")
        let none = try await call("GET", "\(base)/1.1/files/\(secondID)")
        XCTAssertEqual(none.status, 404)
        // A size the SDK declares (metaData.size, a Buffer's or Blob's) over the cap is refused before any upload URL.
        let declaredBig = try await call(
            "POST", "\(base)/1.1/fileTokens", headers: try sdkHeaders(session: tomToken),
            json: ["name": "big.bin", "metaData": ["size": 5000, "owner": "unknown"]])
        XCTAssertEqual(declaredBig.status, 413, "\(declaredBig.json)")
        XCTAssertEqual(declaredBig.json["code"] as? Int, 4601)
        XCTAssertNil(declaredBig.json["upload_url"])
        // Over the cap: refused by its Content-Length with 413 and the store's code, nothing kept.
        let big = try await call("PUT", firstURL, body: Data(repeating: 7, count: 1500))
        XCTAssertEqual(big.status, 413, "\(big.json)")
        XCTAssertEqual(big.json["code"] as? Int, 4601)
        let afterRefusal = try await call("GET", "\(base)/1.1/files/\(firstID)").status
        XCTAssertEqual(afterRefusal, 404)

        // fileCallback with result false (the upload failed on the client's side) removes what was stored.
        let small = try await call("PUT", firstURL, body: Data("hello".utf8))
        XCTAssertEqual(small.status, 200, "\(small.json)")
        let stored = try await call("GET", "\(base)/1.1/files/\(firstID)")
        XCTAssertEqual(stored.status, 200)
        XCTAssertEqual((stored.json["metaData"] as? [String: Any])?["owner"] as? String, "unknown")
        let failed = try await call(
            "POST", "\(base)/1.1/fileCallback", headers: try sdkHeaders(),
            json: ["token": try XCTUnwrap(first.json["token"] as? String), "result": false])
        XCTAssertEqual(failed.status, 200)
        let afterFailedCallback = try await call("GET", "\(base)/1.1/files/\(firstID)").status
        XCTAssertEqual(afterFailedCallback, 404)
        let badCallback = try await call(
            "POST", "\(base)/1.1/fileCallback", headers: try sdkHeaders(), json: ["token": "x.y", "result": false])
        XCTAssertEqual(badCallback.status, 401)
        await tom.close()
    }

    func testWithSignaturesOnTheAppKeyAloneCannotUploadAndTheMasterKeyDeletesAnyFile() async throws {
        let server = try await startFilesServer(signatures: true)
        let base = "http://127.0.0.1:\(server.port)"
        let appOnly = try await call("POST", "\(base)/1.1/fileTokens", headers: try sdkHeaders(), json: ["name": "a.txt"])
        XCTAssertEqual(appOnly.status, 401, "\(appOnly.json)")
        XCTAssertEqual(appOnly.json["code"] as? Int, 401)

        let master = try await call(
            "POST", "\(base)/1.1/fileTokens", headers: try sdkHeaders(key: Self.masterKey, master: true), json: ["name": "a.txt"])
        XCTAssertEqual(master.status, 200, "\(master.json)")
        let id = try XCTUnwrap(master.json["objectId"] as? String)
        let put = try await call(
            "PUT", try XCTUnwrap(master.json["upload_url"] as? String), headers: ["Content-Type": "text/plain"], body: Data("notes".utf8))
        XCTAssertEqual(put.status, 200, "\(put.json)")
        // An upload URL past its hour is refused, though its signature holds (the key comes from the master key,
        // so a ticket minted here for this configuration is one the server would have given).
        var configuration = ServerConfiguration()
        configuration.masterKey = Self.masterKey
        let expired = LeanCloudUploadTicket(
            objectID: MediaIDs.make(), uploader: nil, name: "late.txt", mimeType: nil, expires: Int64(Date().timeIntervalSince1970) - 1)
        let late = try await call(
            "PUT",
            "\(base)/1.1/fileUploads/\(expired.objectID)?token=\(expired.encoded(key: LeanCloudUploadTicket.signingKey(configuration)))",
            body: Data("late".utf8))
        XCTAssertEqual(late.status, 401, "\(late.json)")
        XCTAssertTrue((late.json["error"] as? String ?? "").contains("expired"), "\(late.json)")
        let byApp = try await call("DELETE", "\(base)/1.1/files/\(id)", headers: try sdkHeaders())
        XCTAssertEqual(byApp.status, 401, "\(byApp.json)")
        let byMaster = try await call(
            "DELETE", "\(base)/1.1/files/\(id)", headers: ["X-LC-Id": Self.appID, "X-LC-Key": "\(Self.masterKey),master"])
        XCTAssertEqual(byMaster.status, 200, "\(byMaster.json)")
        let afterDelete = try await call("GET", "\(base)/1.1/files/\(id)").status
        XCTAssertEqual(afterDelete, 404)
    }
}

/// Real PNG files (PNGFile) with this suite's pixels, and SHA-256.
enum TestPNG {
    static func make(width: Int, height: Int) -> Data {
        Data(PNGFile.make(width: width, height: height) { x, y in [UInt8(x * 30 & 0xFF), UInt8(y * 40 & 0xFF), 200] })
    }

    /// SHA-256 written out from FIPS 180-4 (ReferenceDigest).
    static func sha256Hex(_ data: Data) -> String { ReferenceDigest.sha256(data) }
}
