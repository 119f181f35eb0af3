import Foundation
import GRDB
import HookbotTestSupport
import IMCore
import XCTest

@testable import IMServer

/// A SQLite file with garbage in its middle is refused at start (`PRAGMA quick_check`), with a message
/// that says what to do, instead of being served until a query reaches the damage (4200).
final class DamagedStoreTests: XCTestCase {
    func testADatabaseWithAGarbledPageIsRefusedAtStart() async throws {
        try XCTSkipIf(TestDatabase.backend == .postgres, "a SQLite file")
        let server = try await ServerHarness.start()
        let tom = try await server.login("Tom")
        let cid = try await tom.startConversation(members: ["Jerry"])
        let text = String(repeating: "lorem ipsum ", count: 40)
        for index in 0..<120 { try await tom.sendText("\(index) \(text)", to: cid) }
        await tom.close()
        await server.stop()

        // Everything into the main file, then garbage over a leaf page of the messages table in the middle.
        let path = server.databasePath
        let queue = try DatabaseQueue(path: path)
        let (pageSize, page) = try await queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            let leaves = try Int.fetchAll(
                db, sql: "SELECT pageno FROM dbstat WHERE name = 'messages' AND pagetype = 'leaf' ORDER BY pageno")
            return (try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 4096, leaves[leaves.count / 2])
        }
        try queue.close()
        XCTAssertGreaterThan(page, 1, "not the header page")
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        try handle.seek(toOffset: UInt64((page - 1) * pageSize))
        try handle.write(contentsOf: Data((0..<pageSize).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }))
        try handle.close()

        do {
            let served = try await ServerHarness.start(directory: server.directory)
            await served.stop()
            XCTFail("a damaged database was served")
            return
        } catch let error as DamagedDatabase {
            XCTAssertEqual(error.path, path)
            XCTAssertFalse(error.problems.isEmpty)
            XCTAssertTrue(error.description.hasPrefix("the database \(path) is damaged ("), error.description)
            XCTAssertTrue(error.description.contains("refusing to serve it"))
            XCTAssertTrue(error.description.contains("restore the newest backup"))
            XCTAssertTrue(error.description.contains("sqlite3 \(path) .recover | sqlite3 recovered.sqlite"))
            XCTAssertTrue(error.description.contains("--integrity-check-seconds 0"))
        }

        // The command-line server exits with that message.
        let binary = try XCTUnwrap(ServerProcess.binaryURL(), "build the hookbot executable first (swift build)")
        let process = try ChildProcess(
            binary, ["server", "--port", "\(ServerProcess.freePort())", "--log-level", "warning", "--db", path], output: .discarded)
        let status = try await process.waitForExit(timeout: .seconds(30)).status
        let output = process.printed
        XCTAssertNotEqual(status, 0)
        XCTAssertTrue(output.contains("the database \(path) is damaged"), output)

        // With the check skipped the file is served (the operator's choice), and it was not modified: in
        // process, and by the command line with the option the message names.
        let unchecked = try await ServerHarness.start(directory: server.directory) { $0.integrityCheckSeconds = 0 }
        await unchecked.stop()
        let skipped = try await ServerProcess.launch(binary: binary, store: ["--db", path, "--integrity-check-seconds", "0"])
        skipped.kill()
    }
}
