import HookbotTestSupport
import IMCore
import XCTest

/// Who may see and change what: members see and change their conversations, anybody sees chat rooms,
/// changing a chat room takes being in it, and receipts come only from members.
final class AccessTests: XCTestCase {
    func testOutsidersNeitherSeeNorChangeNorForgeReceipts() async throws {
        let server = try await startServer()
        let (tom, jerry, mallory) = try await server.login("Tom", "Jerry", "Mallory")
        let secret = try await tom.startConversation(members: ["Jerry"], name: "secret", attr: ["code": "1234"])
        var room = Command(cmd: .conv, op: .start)
        room.transient = true
        room.name = "hall"
        let roomReply = try await tom.request(room)
        let hall = try XCTUnwrap(roomReply.cid)

        func names(_ client: TestClient, _ condition: JSONValue) async throws -> [String] {
            var query = Command(cmd: .conv, op: .query)
            query.where = condition
            return try await client.request(query).results?.compactMap(\.name) ?? []
        }
        let mallorySees = try await names(mallory, ["name": ["$in": ["secret", "hall"]]])
        XCTAssertEqual(mallorySees, ["hall"])
        let probe = try await names(mallory, ["attr.code": ["$regex": "^12"]])
        XCTAssertEqual(probe, [])
        let jerrySees = try await names(jerry, ["name": ["$in": ["secret", "hall"]]])
        XCTAssertEqual(Set(jerrySees), ["secret", "hall"])
        // A conversation marked public is found by anybody, without its member list.
        _ = try await tom.startConversation(members: ["Jerry"], name: "open house", attr: ["public": true])
        var openQuery = Command(cmd: .conv, op: .query)
        openQuery.where = ["name": "open house"]
        let found = try await mallory.request(openQuery).results?.first
        XCTAssertEqual(found?.name, "open house")
        XCTAssertNil(found?.m)
        let foundByMember = try await jerry.request(openQuery).results?.first
        XCTAssertEqual(Set(foundByMember?.m ?? []), ["Tom", "Jerry"])

        // Counting members is for members (chat rooms count who is in them, for anybody).
        var count = Command.conv(.count, secret)
        let refusedCount = try await mallory.request(count)
        XCTAssertEqual(refusedCount.code, 4317)
        count.cid = hall
        let hallCount = try await mallory.request(count)
        XCTAssertEqual(hallCount.count, 1)

        // Changing a chat room takes being in it; those in it hear of the change.
        var rename = Command.conv(.update, hall)
        rename.attr = ["name": "mine now"]
        let refusedRename = try await mallory.request(rename)
        XCTAssertEqual(refusedRename.code, 4309)
        let join = Command.conv(.join, hall)
        _ = try await mallory.request(join)
        let renamed = try await mallory.request(rename)
        XCTAssertEqual(renamed.op, .updated)
        let heard = try await tom.next(where: { $0.cmd == .conv && $0.op == .updated })
        XCTAssertEqual(heard.cid, hall)
        XCTAssertEqual(heard.initBy, "Mallory")

        // A receipt comes only from a member.
        let sent = try await tom.sendText("read me", to: secret, receipt: true)
        let delivered = try await jerry.next(where: { $0.cmd == .direct })
        var forged = Command(cmd: .ack)
        forged.cid = secret
        forged.mid = sent.uid
        _ = try await mallory.request(forged)
        let forgedReceipts = await tom.settle { $0.cmd == .rcp }
        XCTAssertEqual(forgedReceipts.count, 0, "an outsider produced a receipt")
        var ack = Command(cmd: .ack)
        ack.cid = secret
        ack.mid = delivered.id
        _ = try await jerry.request(ack)
        let receipt = try await tom.next(where: { $0.cmd == .rcp })
        XCTAssertEqual(receipt.from, "Jerry")
    }
}
