import Foundation
import HookbotTestSupport
import IMCore
import XCTest

@testable import IMServer

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Uploaded files on two nodes of one PostgreSQL database, each node with a media directory of its own: the
/// bytes are in the database, so what one node took the other serves, ranges and thumbnails included.
/// Runs in the PostgreSQL pass (`HOOKBOT_TEST_BACKEND=postgres` beside `scripts/with-postgres.sh`).
final class MediaClusterTests: XCTestCase {
    static let (appID, appKey) = ("hookbot-app", "the-app-key")

    struct Reply {
        var status: Int
        var headers: [String: String]
        var body: Data
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: body) as? [String: Any]) ?? [:] }
    }

    func call(_ url: String, _ method: String = "GET", headers: [String: String] = [:], body: Data? = nil) async throws -> Reply {
        var request = URLRequest(url: try XCTUnwrap(URL(string: url)))
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) =
            if let body { try await URLSession.shared.upload(for: request, from: body) } else {
                try await URLSession.shared.data(for: request)
            }
        let http = try XCTUnwrap(response as? HTTPURLResponse)
        var fields: [String: String] = [:]
        for (name, value) in http.allHeaderFields { fields[String(describing: name).lowercased()] = String(describing: value) }
        return Reply(status: http.statusCode, headers: fields, body: data)
    }

    /// Two nodes on a fresh schema, each with its own media directory.
    func nodes() async throws -> [ServerHarness] {
        try XCTSkipUnless(TestDatabase.backend == .postgres, "the PostgreSQL pass runs it (HOOKBOT_TEST_BACKEND=postgres)")
        let url = try TestDatabase.postgresURL(schema: TestDatabase.schemaName())
        var nodes: [ServerHarness] = []
        for _ in 0..<2 {
            nodes.append(
                try await ServerHarness.start { configuration in
                    configuration.databaseURL = url
                    configuration.appID = Self.appID
                    configuration.appKey = Self.appKey
                })
        }
        let directories = nodes.map { $0.server.configuration.media.resolvedDirectory(databasePath: $0.server.configuration.databasePath) }
        XCTAssertNotEqual(directories[0], directories[1])
        return nodes
    }

    func base(_ node: ServerHarness) -> String { "http://127.0.0.1:\(node.port)" }

    func inventory(_ node: ServerHarness) async throws -> MediaContentInventory {
        try await MediaRouteTests.inventory(node)
    }

    /// Nothing of a file is in a node's media directory: the bytes are in the database.
    func assertNoBytesOnDisk(_ nodes: [ServerHarness], file: StaticString = #filePath, line: UInt = #line) {
        for node in nodes {
            let directory = node.server.configuration.media.resolvedDirectory(databasePath: node.server.configuration.databasePath)
            for part in ["objects", "tmp"] {
                let kept = FileManager.default.subpaths(atPath: (directory as NSString).appendingPathComponent(part)) ?? []
                XCTAssertEqual(kept, [], "\(directory)/\(part)", file: file, line: line)
            }
        }
    }

    func testAnUploadOnOneNodeIsDownloadedRangedAndThumbnailedOnAnother() async throws {
        let cluster = try await nodes()
        addTeardownBlock { for node in cluster { await node.stop() } }
        let (a, b) = (cluster[0], cluster[1])
        let tom = try await a.sessionToken("Tom")
        // A real PNG of 720 KB (stored deflate blocks): two chunks of the database.
        let png = TestPNG.make(width: 600, height: 400)
        XCTAssertGreaterThan(png.count, PostgresMediaContent.chunkSize)
        let up = try await call("\(base(a))/media?name=wide.png", "POST", headers: ["X-LC-IM-Session-Token": tom], body: png)
        XCTAssertEqual(up.status, 201, String(decoding: up.body, as: UTF8.self))
        XCTAssertEqual(up.json["width"] as? Int, 600, "sniffed from the chunks in the database")
        let id = try XCTUnwrap(up.json["id"] as? String)
        let path = try XCTUnwrap(up.json["url"] as? String)

        let onA = try await call(base(a) + path)
        let onB = try await call(base(b) + path)
        XCTAssertEqual(onB.status, 200)
        XCTAssertEqual(onB.body, png)
        XCTAssertEqual(onB.headers["etag"], onA.headers["etag"])
        XCTAssertEqual(onB.headers["etag"], "\"\(TestPNG.sha256Hex(png))\"")
        XCTAssertEqual(onB.headers["content-type"], "image/png")
        // A range across the boundary of the first two chunks, and the tail.
        let boundary = PostgresMediaContent.chunkSize
        let across = try await call(base(b) + "/media/\(id)", headers: ["Range": "bytes=\(boundary - 100)-\(boundary + 99)"])
        XCTAssertEqual(across.status, 206)
        XCTAssertEqual(across.body, png[(boundary - 100)..<(boundary + 100)])
        let tail = try await call(base(b) + "/media/\(id)", headers: ["Range": "bytes=-1000"])
        XCTAssertEqual(tail.body, png.suffix(1000))

        let thumbnail = try await call(base(b) + path + "?imageView/2/w/64/h/64")
        XCTAssertEqual(thumbnail.status, 200, String(decoding: thumbnail.body, as: UTF8.self))
        let sniffed = MediaSniffer.sniff(bytes: Array(thumbnail.body))
        XCTAssertEqual([sniffed.width, sniffed.height], [64, 43], "\(sniffed)")

        // LeanCloud's storage flow: fileTokens and the PUT on A, the file on B.
        // Signatures are off: the app key may upload, as LeanCloud allows.
        let appKey = ["X-LC-Id": Self.appID, "X-LC-Key": Self.appKey, "Content-Type": "application/json"]
        let token = try await call(
            "\(base(a))/1.1/fileTokens", "POST", headers: appKey, body: try JSONSerialization.data(withJSONObject: ["name": "lc.png"]))
        XCTAssertEqual(token.status, 200, "\(token.json)")
        let objectID = try XCTUnwrap(token.json["objectId"] as? String)
        let small = TestPNG.make(width: 30, height: 20)
        let put = try await call(
            try XCTUnwrap(token.json["upload_url"] as? String), "PUT", headers: ["Content-Type": "image/png"], body: small)
        XCTAssertEqual(put.status, 200, "\(put.json)")
        let fetched = try await call("\(base(b))/1.1/files/\(objectID)")
        XCTAssertEqual(fetched.status, 200, "\(fetched.json)")
        XCTAssertEqual((fetched.json["metaData"] as? [String: Any])?["width"] as? Int, 30)
        let fileURL = try XCTUnwrap(fetched.json["url"] as? String)
        let lcPath = try XCTUnwrap(URL(string: fileURL)).path
        let downloaded = try await call(base(b) + lcPath)
        XCTAssertEqual(downloaded.body, small)
        XCTAssertEqual(downloaded.headers["etag"], put.headers["etag"])
        let lcThumbnail = try await call(base(b) + lcPath + "?imageView/2/w/15/h/15")
        XCTAssertEqual(lcThumbnail.status, 200)
        XCTAssertEqual(MediaSniffer.sniff(bytes: Array(lcThumbnail.body)).width, 15)

        assertNoBytesOnDisk(cluster)
        let kept = try await inventory(b)
        XCTAssertEqual(kept.contents.count, 2)
        XCTAssertEqual(kept.pending, 0)
    }

    func testDeletesAndDeduplicationHoldAcrossNodes() async throws {
        let cluster = try await nodes()
        addTeardownBlock { for node in cluster { await node.stop() } }
        let (a, b) = (cluster[0], cluster[1])
        let tom = try await a.sessionToken("Tom")
        let jerry = try await b.sessionToken("Jerry")
        let bytes = Data((0..<700_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 9) })
        let tomsUpload = try await call("\(base(a))/media?name=t.bin", "POST", headers: ["X-LC-IM-Session-Token": tom], body: bytes)
        let jerrysUpload = try await call("\(base(b))/media?name=j.bin", "POST", headers: ["X-LC-IM-Session-Token": jerry], body: bytes)
        let (toms, jerrys) = (try XCTUnwrap(tomsUpload.json["id"] as? String), try XCTUnwrap(jerrysUpload.json["id"] as? String))
        XCTAssertEqual(tomsUpload.json["sha256"] as? String, jerrysUpload.json["sha256"] as? String)
        let shared = try await inventory(a)
        XCTAssertEqual(shared.contents, [try XCTUnwrap(tomsUpload.json["sha256"] as? String)], "one content for both records")

        // Tom deletes his on B: gone on A; Jerry's, the same bytes, still served by A.
        let deleted = try await call("\(base(b))/media/\(toms)", "DELETE", headers: ["X-LC-IM-Session-Token": tom])
        XCTAssertEqual(deleted.status, 200)
        let gone = try await call("\(base(a))/media/\(toms)")
        XCTAssertEqual(gone.status, 404)
        XCTAssertEqual(gone.json["code"] as? Int, 4604)
        let stillThere = try await call("\(base(a))/media/\(jerrys)")
        XCTAssertEqual(stillThere.body, bytes)
        let afterOne = try await inventory(b)
        XCTAssertEqual(afterOne.contents.count, 1)

        // The last record goes on A: the content goes, B answers 404.
        let last = try await call("\(base(a))/media/\(jerrys)", "DELETE", headers: ["X-LC-IM-Session-Token": jerry])
        XCTAssertEqual(last.status, 200)
        let goneOnB = try await call("\(base(b))/media/\(jerrys)")
        XCTAssertEqual(goneOnB.status, 404)
        let afterBoth = try await inventory(a)
        XCTAssertEqual(afterBoth, MediaContentInventory(contents: [], pending: 0))
        assertNoBytesOnDisk(cluster)
    }

    /// The sniffer reads past the first chunk through the database: an MP4 whose `moov` (with the duration)
    /// comes after 700 KB of `mdat`, as most recorders write it.
    func testMetadataPastTheFirstChunkIsReadFromTheDatabase() async throws {
        let cluster = try await nodes()
        addTeardownBlock { for node in cluster { await node.stop() } }
        let f = MediaFixtures.self
        let mvhd = f.box("mvhd", [0, 0, 0, 0] + f.be32(0) + f.be32(0) + f.be32(600) + f.be32(600 * 42) + [UInt8](repeating: 0, count: 80))
        let video = Data(
            f.box("ftyp", f.ascii("isom") + f.be32(0) + f.ascii("isom")) + f.box("mdat", [UInt8](repeating: 9, count: 700_000))
                + f.box("moov", mvhd))
        let tom = try await cluster[0].sessionToken("Tom")
        let up = try await call("\(base(cluster[0]))/media?name=clip.mp4", "POST", headers: ["X-LC-IM-Session-Token": tom], body: video)
        XCTAssertEqual(up.status, 201, String(decoding: up.body, as: UTF8.self))
        XCTAssertEqual(up.json["mime"] as? String, "video/mp4")
        XCTAssertEqual(try XCTUnwrap(up.json["duration"] as? Double), 42, accuracy: 0.001)
        let got = try await call("\(base(cluster[1]))/media/\(try XCTUnwrap(up.json["id"] as? String))")
        XCTAssertEqual(got.body, video)
    }

    /// A pending upload a crashed node left behind (its chunks written, never committed, untouched for
    /// hours) is swept by the next upload on any node; a live one is not.
    func testACrashedNodesPendingUploadIsSwept() async throws {
        let cluster = try await nodes()
        addTeardownBlock { for node in cluster { await node.stop() } }
        let content = try XCTUnwrap((cluster[1].server.media as? ContentAddressedMediaStore)?.content as? PostgresMediaContent)
        let old = Identifiers.nowMillis() - PostgresMediaContent.abandonedAfter - 60_000
        let inserted = try await content.store.fetch("INSERT INTO media_blobs (chunk_size, touched_at) VALUES (16, \(old)) RETURNING id")
        let blob = try XCTUnwrap(try inserted.first?.decode(Int64.self))
        _ = try await content.store.fetch("INSERT INTO media_chunks (blob, seq, data) VALUES (\(blob), 0, decode('6c656674', 'hex'))")
        let before = try await inventory(cluster[0])
        XCTAssertEqual(before.pending, 1)

        let tom = try await cluster[0].sessionToken("Tom")
        let up = try await call("\(base(cluster[0]))/media?name=x", "POST", headers: ["X-LC-IM-Session-Token": tom], body: Data("new".utf8))
        XCTAssertEqual(up.status, 201)
        var left = try await inventory(cluster[0]).pending
        for _ in 0..<100 where left > 0 {
            try await Task.sleep(for: .milliseconds(50))
            left = try await inventory(cluster[0]).pending
        }
        XCTAssertEqual(left, 0)
        let chunks = try await content.store.fetch("SELECT COUNT(*) FROM media_chunks WHERE blob = \(blob)").first?.decode(Int64.self)
        XCTAssertEqual(chunks, 0)
    }
}
