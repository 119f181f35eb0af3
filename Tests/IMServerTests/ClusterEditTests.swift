import Foundation
import HookbotTestSupport
import IMCore
import IMServer
import XCTest

/// Binary messages and edits between clients on different nodes of one PostgreSQL database: what the
/// nodes announce to each other carries the bytes and the edit. Skipped when no cluster runs.
final class ClusterEditTests: XCTestCase {
    func testBinaryMessagesAndEditsCrossNodes() async throws {
        let url = try TestDatabase.postgresURL(schema: TestDatabase.schemaName())
        var nodes: [ServerHarness] = []
        for _ in 0..<2 { nodes.append(try await ServerHarness.start { $0.databaseURL = url }) }
        let tom = try await nodes[0].login("Tom")
        let jerry = try await nodes[1].login("Jerry")
        let cid = try await tom.startConversation(members: ["Jerry"])
        var direct = Command(cmd: .direct)
        direct.cid = cid
        direct.binaryMsg = Data([0, 1, 2, 0xFF]).base64EncodedString()
        let ack = try await tom.request(direct, timeout: .seconds(10))
        let mid = try XCTUnwrap(ack.uid, "\(ack)")
        let received = try await jerry.nextMessage()
        XCTAssertEqual(received.id, mid)
        XCTAssertNil(received.msg)
        XCTAssertEqual(received.binaryMsg, direct.binaryMsg)

        let edited = try await tom.request(.edit(ack, in: cid, to: "now text"), timeout: .seconds(10))
        XCTAssertEqual(edited.op, .modified, "\(edited)")
        let event = try await jerry.next { $0.cmd == .patch && $0.op == .modify }
        XCTAssertEqual(event.patches?.first?.mid, mid)
        XCTAssertEqual(event.patches?.first?.data, "now text")
        XCTAssertEqual(event.patches?.first?.patchTimestamp, edited.t)
        for node in nodes { await node.stop() }
    }
}
