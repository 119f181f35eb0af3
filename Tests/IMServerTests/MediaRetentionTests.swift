import Foundation
import GRDB
import HookbotTestSupport
import IMCore
import Logging
import XCTest

@testable import IMServer

/// Retention (docs/MEDIA.md, "Retention"): files no stored message or conversation references are deleted
/// once older than the grace period; recalls and edits drop a message's references, the file goes at the next
/// run. On SQLite and, in make test's PostgreSQL pass, on PostgreSQL. The clock is the `now` given to the
/// collection (two hours ahead stands for "past a one-hour grace"), never a sleep.
final class MediaRetentionTests: XCTestCase {
    static let hour: Int64 = 3_600_000
    var nowMillis: Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    /// A logged-in raw client and its session token (for `/media`).
    /// Uploads a PNG of `padding` extra bytes (a distinct content per size) and answers its id.
    func upload(_ server: ServerHarness, token: String, padding: Int) async throws -> String {
        let png = Data(MediaFixtures.png(width: 8, height: 8, padding: padding))
        let reply = try await MediaRouteTests.call(server.port, "POST", "/media?name=f\(padding).png", token: token, body: png)
        XCTAssertEqual(reply.status, 201, String(decoding: reply.body, as: UTF8.self))
        return try XCTUnwrap(reply.json["id"] as? String)
    }

    func exists(_ server: ServerHarness, _ id: String) async throws -> Bool {
        try await MediaRouteTests.call(server.port, "HEAD", "/media/\(id)").status == 200
    }

    func patch(_ client: TestClient, cid: String, ack: Command, recall: Bool = false, data: String? = nil) async throws {
        let reply = try await client.request(recall ? .recall(ack, in: cid) : .edit(ack, in: cid, to: data ?? ""))
        XCTAssertEqual(reply.op, .modified, "\(reply)")
    }

    func testReferencedFilesSurviveUnreferencedOnesGoAfterTheGraceAndTheQuotaFreesUp() async throws {
        let server = try await startServer { $0.media.quotaBytes = 2_000 }
        let (tom, token) = try await server.session("Tom")
        let cid = try await tom.startConversation(members: ["Jerry"])
        let byObjID = try await upload(server, token: token, padding: 400)
        let byURL = try await upload(server, token: token, padding: 401)
        let loose = try await upload(server, token: token, padding: 402)
        // 3 × ~450 bytes of a 2,000-byte quota: a fourth upload of 733 bytes does not fit.
        let over = try await MediaRouteTests.call(
            server.port, "POST", "/media?name=big.png", token: token, body: Data(MediaFixtures.png(width: 8, height: 8, padding: 700)))
        XCTAssertEqual(over.status, 413)
        XCTAssertEqual(over.json["code"] as? Int, 4602)

        try await tom.sendAccepted(#"{"_lctype":-2,"_lcfile":{"objId":"\#(byObjID)"}}"#, to: cid)
        // JSON's escaped slashes, as NSJSONSerialization writes them, in an ordinary text message.
        try await tom.sendAccepted(#"{"_lctype":-1,"_lctext":"see https:\/\/chat.example.com\/media\/\#(byURL)\/f.png"}"#, to: cid)
        try await tom.sendText("an ordinary message", to: cid)

        // Younger than the grace: nothing goes, referenced or not.
        let young = try await server.server.collectUnreferencedMedia(grace: .seconds(3600))
        XCTAssertEqual(young.files, [])
        // Past the grace (and across a restart: the references are in the database, written with the messages).
        let restarted = try await server.restarted()
        addTeardownBlock(releasing: restarted) { await $0.stop() }
        let dry = try await restarted.server.collectUnreferencedMedia(grace: .seconds(3600), now: nowMillis + 2 * Self.hour, dryRun: true)
        XCTAssertEqual(dry.files.map(\.id), [loose])
        let dryKept = try await exists(restarted, loose)
        XCTAssertTrue(dryKept, "a dry run deletes nothing")
        let usedBefore = try await XCTUnwrap(restarted.server.media).usage(owner: "Tom")
        let run = try await restarted.server.collectUnreferencedMedia(grace: .seconds(3600), now: nowMillis + 2 * Self.hour)
        XCTAssertEqual(run.files.map(\.id), [loose])
        XCTAssertEqual(run.bytes, Int64(MediaFixtures.png(width: 8, height: 8, padding: 402).count))
        let looseLeft = try await exists(restarted, loose)
        XCTAssertFalse(looseLeft)
        let objIDKept = try await exists(restarted, byObjID)
        XCTAssertTrue(objIDKept)
        let urlKept = try await exists(restarted, byURL)
        XCTAssertTrue(urlKept)
        let usedAfter = try await XCTUnwrap(restarted.server.media).usage(owner: "Tom")
        XCTAssertEqual(usedBefore - usedAfter, run.bytes)
        // The freed quota takes the upload refused before.
        let (_, token2) = try await restarted.session("Tom")
        let fits = try await MediaRouteTests.call(
            restarted.port, "POST", "/media?name=big.png", token: token2, body: Data(MediaFixtures.png(width: 8, height: 8, padding: 700)))
        XCTAssertEqual(fits.status, 201, String(decoding: fits.body, as: UTF8.self))
        // A second run finds nothing more of the old files.
        let again = try await restarted.server.collectUnreferencedMedia(grace: .seconds(3600), now: nowMillis + 2 * Self.hour)
        XCTAssertFalse(again.files.map(\.id).contains(byObjID))
    }

    func testRecallAndEditDropReferencesAndTheFileGoesAtTheNextRun() async throws {
        let server = try await startServer()
        let (tom, token) = try await server.session("Tom")
        let cid = try await tom.startConversation(members: ["Jerry"])
        let shared = try await upload(server, token: token, padding: 500)
        let edited = try await upload(server, token: token, padding: 501)
        let first = try await tom.sendAccepted(#"{"_lctype":-2,"_lcfile":{"objId":"\#(shared)"}}"#, to: cid)
        let second = try await tom.sendAccepted(#"{"_lctype":-6,"_lcfile":{"objId" : "\#(shared)"}}"#, to: cid)
        let third = try await tom.sendAccepted(#"{"_lctype":-2,"_lcfile":{"objId":"\#(edited)"}}"#, to: cid)
        let later = nowMillis + 2 * Self.hour

        // One of two messages recalled: the file stays (the other still names it), and is not deleted at once.
        try await patch(tom, cid: cid, ack: first, recall: true)
        let stillThere = try await exists(server, shared)
        XCTAssertTrue(stillThere)
        let afterOneRecall = try await server.server.collectUnreferencedMedia(grace: .seconds(3600), now: later).files
        XCTAssertEqual(afterOneRecall, [])
        // The second recalled too: still there until a run past the grace, which removes it.
        try await patch(tom, cid: cid, ack: second, recall: true)
        let notAtOnce = try await exists(server, shared)
        XCTAssertTrue(notAtOnce)
        let withinGrace = try await server.server.collectUnreferencedMedia(grace: .seconds(3600)).files
        XCTAssertEqual(withinGrace, [])
        let pastGrace = try await server.server.collectUnreferencedMedia(grace: .seconds(3600), now: later).files.map(\.id)
        XCTAssertEqual(pastGrace, [shared])
        let sharedLeft = try await exists(server, shared)
        XCTAssertFalse(sharedLeft)

        // An edit that drops the file: collected; one that names it keeps it.
        try await patch(tom, cid: cid, ack: third, data: TypedMessage.text("never mind").encoded())
        try await patch(tom, cid: cid, ack: third, data: #"{"_lctype":-2,"_lcfile":{"objId":"\#(edited)"}}"#)
        try await patch(tom, cid: cid, ack: third, data: #"{"_lctype":-2,"_lctext":"again","_lcfile":{"objId":"\#(edited)"}}"#)
        let keptByEdit = try await server.server.collectUnreferencedMedia(grace: .seconds(3600), now: later).files
        XCTAssertEqual(keptByEdit, [])
        try await patch(tom, cid: cid, ack: third, data: TypedMessage.text("never mind").encoded())
        let afterDrop = try await server.server.collectUnreferencedMedia(grace: .seconds(3600), now: later).files.map(\.id)
        XCTAssertEqual(afterDrop, [edited])
    }

    func testConversationAttributesKeepTheirFiles() async throws {
        let server = try await startServer()
        let (tom, token) = try await server.session("Tom")
        let avatar = try await upload(server, token: token, padding: 600)
        let banner = try await upload(server, token: token, padding: 601)
        let cid = try await tom.startConversation(members: ["Jerry"], attr: ["avatar": .string("/media/\(avatar)/a.png")])
        var update = Command.conv(.update, cid)
        update.attr = ["attr.banner": .string("http://127.0.0.1/media/\(banner)")]
        let added = try await tom.request(update).op
        XCTAssertEqual(added, .updated)
        let later = nowMillis + 2 * Self.hour
        let bothNamed = try await server.server.collectUnreferencedMedia(grace: .zero, now: later).files
        XCTAssertEqual(bothNamed, [])
        // The avatar replaced by another host's picture: its file goes, the banner stays.
        update.attr = ["attr.avatar": .string("https://elsewhere.example/a.png")]
        let replaced = try await tom.request(update).op
        XCTAssertEqual(replaced, .updated)
        let afterReplace = try await server.server.collectUnreferencedMedia(grace: .zero, now: later).files.map(\.id)
        XCTAssertEqual(afterReplace, [avatar])
        let bannerKept = try await exists(server, banner)
        XCTAssertTrue(bannerKept)
    }

    func testTheServerCollectsPeriodicallyAndCountsIt() async throws {
        // Files stored first (a grace of zero would race the message that names one), then a server that collects.
        let first = try await ServerHarness.start()
        let (tom, token) = try await first.session("Tom")
        let cid = try await tom.startConversation(members: ["Jerry"])
        let kept = try await upload(first, token: token, padding: 700)
        try await tom.sendAccepted("look: /media/\(kept)", to: cid)
        let loose = try await upload(first, token: token, padding: 701)
        await first.stop()
        let server = try await startServer(directory: first.directory) {
            $0.media.retentionGrace = .zero
            $0.media.retentionInterval = .milliseconds(50)
        }
        var gone = false
        for _ in 0..<200 where !gone {
            gone = try await !exists(server, loose)
            if !gone { try await Task.sleep(for: .milliseconds(25)) }
        }
        XCTAssertTrue(gone, "the periodic run did not remove the unreferenced file")
        let keptThere = try await exists(server, kept)
        XCTAssertTrue(keptThere)
        let metrics = String(decoding: try await MediaRouteTests.call(server.port, "GET", "/metrics").body, as: UTF8.self)
        let files = metrics.split(separator: "\n").first { $0.hasPrefix("hookbot_media_gc_files_total ") }
        XCTAssertEqual(files.flatMap { Int($0.split(separator: " ").last ?? "") }, 1, metrics)
    }

    func testTheCommandLineCollectsOnARealDatabase() async throws {
        let binary = try XCTUnwrap(ServerProcess.binaryURL(), "hookbot is not built")
        let server = try await ServerHarness.start()
        let (tom, token) = try await server.session("Tom")
        let cid = try await tom.startConversation(members: ["Jerry"])
        let kept = try await upload(server, token: token, padding: 800)
        try await tom.sendAccepted(#"{"_lctype":-2,"_lcfile":{"objId":"\#(kept)"}}"#, to: cid)
        let loose = try await upload(server, token: token, padding: 801)
        await server.stop()
        // The SQLite file, or the PostgreSQL schema, the server used.
        let database =
            TestDatabase.backend == .sqlite
            ? ["--db", server.databasePath]
            : ["--database", try TestDatabase.postgresURL(schema: TestDatabase.schemaName(for: server.directory))]

        func gc(_ arguments: String...) throws -> (status: Int32, output: String) {
            try runProcess(binary, ["media", "gc"] + database + arguments)
        }
        let size = MediaFixtures.png(width: 8, height: 8, padding: 801).count

        let young = try gc()
        XCTAssertEqual(young.status, 0, young.output)
        XCTAssertTrue(young.output.hasSuffix("removed 0 files, 0 bytes\n"), young.output)
        let dry = try gc("--grace", "0", "--dry-run")
        XCTAssertEqual(dry.status, 0, dry.output)
        XCTAssertTrue(dry.output.hasPrefix("\(loose)\t\(size)\t"), dry.output)
        XCTAssertTrue(dry.output.contains("would remove 1 file, \(size) bytes (dry run)"), dry.output)
        let run = try gc("--grace", "0s")
        XCTAssertTrue(run.output.contains("removed 1 file, \(size) bytes"), run.output)
        XCTAssertFalse(run.output.contains(kept), run.output)
        let bad = try gc("--grace", "soon")
        XCTAssertEqual(bad.status, 64, bad.output)
        XCTAssertTrue(bad.output.contains("--grace takes seconds"), bad.output)
        if TestDatabase.backend == .sqlite {
            let missing = try gc("--db", server.directory.appendingPathComponent("nope.sqlite").path)
            XCTAssertEqual(missing.status, 64, missing.output)
            XCTAssertTrue(missing.output.contains("no database at"), missing.output)
        }

        // A server on the same database serves the kept file and no longer knows the other.
        let restarted = try await server.restarted()
        addTeardownBlock(releasing: restarted) { await $0.stop() }
        let keptServed = try await exists(restarted, kept)
        XCTAssertTrue(keptServed)
        let looseServed = try await exists(restarted, loose)
        XCTAssertFalse(looseServed)
    }

    func testFilesNamedBeforeTheMigrationAreFound() async throws {
        let server = try await ServerHarness.start()
        let (tom, token) = try await server.session("Tom")
        let kept = try await upload(server, token: token, padding: 900)
        let avatar = try await upload(server, token: token, padding: 901)
        let escaped = try await upload(server, token: token, padding: 902)
        let loose = try await upload(server, token: token, padding: 903)
        let cid = try await tom.startConversation(members: ["Jerry"], attr: ["avatar": .string("/media/\(avatar)")])
        try await tom.sendAccepted(#"{"_lctype":-2,"_lcfile":{"objId":"\#(kept)"}}"#, to: cid)
        try await tom.sendAccepted(#"{"_lctype":-1,"_lctext":"https:\/\/h\/media\/\#(escaped)"}"#, to: cid)
        let recalled = try await tom.sendAccepted(#"{"_lctype":-1,"_lctext":"/media/\#(loose)"}"#, to: cid)
        try await patch(tom, cid: cid, ack: recalled, recall: true)
        await server.stop()
        // The database as a server from before retention left it: no media_refs, its migration not applied.
        switch TestDatabase.backend {
        case .sqlite:
            let pool = try DatabasePool(path: server.databasePath)
            try await pool.write { db in
                try db.execute(sql: "DROP TABLE media_refs; DROP INDEX media_files_by_created_at")
                try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'v11-media-refs'")
            }
            try pool.close()
        case .postgres:
            var logger = Logger(label: "media-refs-upgrade")
            logger.logLevel = .warning
            let store = try PostgresStore(
                url: try TestDatabase.postgresURL(schema: TestDatabase.schemaName(for: server.directory)), logger: logger)
            try await store.migrate()
            try await store.execute(unsafeSQL: [
                "DROP TABLE media_refs", "DROP INDEX media_files_by_created_at", "DELETE FROM schema_migrations WHERE version = 8",
            ])
            await store.shutdown()
        }
        let restarted = try await server.restarted()
        addTeardownBlock(releasing: restarted) { await $0.stop() }
        // The migration found the file message, the escaped URL and the avatar; the recalled message names nothing.
        let run = try await restarted.server.collectUnreferencedMedia(grace: .zero, now: nowMillis + Self.hour)
        XCTAssertEqual(run.files.map(\.id), [loose])
    }

    func testACollectionPagesThroughManyFiles() async throws {
        let server = try await startServer()
        let (tom, token) = try await server.session("Tom")
        let cid = try await tom.startConversation(members: ["Jerry"])
        var loose: [String] = []
        for padding in 1000..<1007 {
            let id = try await upload(server, token: token, padding: padding)
            if padding == 1003 {
                try await tom.sendAccepted("/media/\(id)", to: cid)
            } else {
                loose.append(id)
            }
        }
        let media = try XCTUnwrap(server.server.media)
        let later = nowMillis + Self.hour
        var heard: [String] = []
        let dry = try await MediaRetention.collect(
            store: server.server.service.store, media: media, grace: .zero, now: later, dryRun: true, page: 2
        ) { heard.append($0.id) }
        XCTAssertEqual(Set(dry.files.map(\.id)), Set(loose))
        XCTAssertEqual(heard, dry.files.map(\.id))
        XCTAssertEqual(dry.count, 6)
        let run = try await MediaRetention.collect(
            store: server.server.service.store, media: media, grace: .zero, now: later, dryRun: false, page: 2)
        XCTAssertEqual(Set(run.files.map(\.id)), Set(loose))
        XCTAssertEqual(
            run.bytes, (0..<7).filter { $0 != 3 }.reduce(0) { $0 + Int64(MediaFixtures.png(width: 8, height: 8, padding: 1000 + $1).count) }
        )
        let left = try await server.server.collectUnreferencedMedia(grace: .zero, now: later, dryRun: true)
        XCTAssertEqual(left.count, 0)
    }

    /// A manager may delete a picture posted in the group they manage, but only while every conversation that
    /// shows it is one they manage: a member who forwards it into a conversation of their own cannot delete it,
    /// and that forward keeps the manager from deleting it too until it is recalled.
    func testAManagerOfEveryConversationShowingAFileMayDeleteIt() async throws {
        let server = try await startServer()
        let (tom, tomToken) = try await server.session("Tom")
        let (jerry, jerryToken) = try await server.session("Jerry")
        let (_, spikeToken) = try await server.session("Spike")
        let group = try await tom.startConversation(members: ["Jerry", "Spike"])
        var promote = Command.conv(.memberInfoUpdate, group)
        promote.targetClientId = "Spike"
        promote.role = "Manager"
        let promoted = try await tom.request(promote)
        XCTAssertEqual(promoted.op, .memberInfoUpdated, "\(promoted)")
        let picture = try await upload(server, token: tomToken, padding: 500)
        let image = #"{"_lctype":-2,"_lcfile":{"objId":"\#(picture)"}}"#
        try await tom.sendAccepted(image, to: group)

        // Jerry is a member of the group: no.
        var reply = try await MediaRouteTests.call(server.port, "DELETE", "/media/\(picture)", token: jerryToken)
        XCTAssertEqual(reply.status, 403)
        XCTAssertEqual(reply.json["code"] as? Int, 4607)
        // Jerry forwards it into a conversation he owns: still no (the group shows it too).
        let own = try await jerry.startConversation(members: ["Tyke"])
        let forward = try await jerry.sendAccepted(image, to: own)
        reply = try await MediaRouteTests.call(server.port, "DELETE", "/media/\(picture)", token: jerryToken)
        XCTAssertEqual(reply.status, 403)
        // Spike manages the group but not Jerry's conversation: no, through either API.
        reply = try await MediaRouteTests.call(server.port, "DELETE", "/media/\(picture)", token: spikeToken)
        XCTAssertEqual(reply.status, 403)
        reply = try await MediaRouteTests.call(server.port, "DELETE", "/1.1/files/\(picture)", headers: ["X-LC-Session": spikeToken])
        XCTAssertEqual(reply.status, 403, String(decoding: reply.body, as: UTF8.self))
        let kept = try await exists(server, picture)
        XCTAssertTrue(kept)

        // Once the forward is recalled only the group shows it, and its manager removes it.
        try await patch(jerry, cid: own, ack: forward, recall: true)
        reply = try await MediaRouteTests.call(server.port, "DELETE", "/1.1/files/\(picture)", headers: ["X-LC-Session": spikeToken])
        XCTAssertEqual(reply.status, 200, String(decoding: reply.body, as: UTF8.self))
        let gone = try await exists(server, picture)
        XCTAssertFalse(gone)
        // The owner of the group may delete a file shown only there, through /media as well.
        let second = try await upload(server, token: tomToken, padding: 501)
        try await jerry.sendAccepted(#"{"_lctype":-2,"_lcfile":{"objId":"\#(second)"}}"#, to: group)
        reply = try await MediaRouteTests.call(server.port, "DELETE", "/media/\(second)", token: tomToken)
        XCTAssertEqual(reply.status, 200)
        // A file no conversation shows stays its uploader's alone.
        let loose = try await upload(server, token: jerryToken, padding: 502)
        reply = try await MediaRouteTests.call(server.port, "DELETE", "/media/\(loose)", token: tomToken)
        XCTAssertEqual(reply.status, 403)
    }

    func testReferencesAreFoundWithoutParsing() {
        let id = "abcDEF012_-xyzXYZ789abc"
        XCTAssertEqual(MediaReferences.ids(in: "plain text, no file"), [])
        XCTAssertEqual(MediaReferences.ids(in: "https://h/media/\(id)/x.png and /media/\(id)"), [id])
        XCTAssertEqual(MediaReferences.ids(in: #"{"url":"http:\/\/h\/media\/\#(id)\/x.png"}"#), [id])
        XCTAssertEqual(MediaReferences.ids(in: "{\"objId\" :\n \"\(id)\"}"), [id])
        XCTAssertEqual(MediaReferences.ids(in: #"{"t":"{\"u\":\"\\\/media\\\/\#(id)\"}"}"#), [id])
        XCTAssertEqual(MediaReferences.ids(in: #"{"objId":"a","b":"/media/b?imageView/2/w/10"}"#), ["a", "b"])
        // Not ids: too long, empty, another path, objId not a string.
        XCTAssertEqual(MediaReferences.ids(in: "/media/" + String(repeating: "a", count: 65)), [])
        XCTAssertEqual(MediaReferences.ids(in: "/media//x /multimedia/x /medias/x"), [])
        XCTAssertEqual(MediaReferences.ids(in: #"{"objId":12,"objId":"unterminated"#), [])
        XCTAssertEqual(MediaReferences.ids(in: "/media/"), [])
    }
}
