import Foundation
import HookbotTestSupport
import IMCore
import XCTest

extension XCTestCase {
    /// Tom sends a burst of 400 messages to Jerry through `sender`'s server, all at once and acknowledged, so their
    /// timestamps run ahead of the clock; then Jerry logs in through `receiver` (the same server, or another node):
    /// every one of them must arrive flagged offline, and a message sent after the login live.
    func assertABurstArrivesOffline(sentThrough sender: ServerHarness, receivedThrough receiver: ServerHarness) async throws {
        let tom = try await sender.login("Tom")
        let cid = try await tom.startConversation(members: ["Jerry"])
        let acks = try await withThrowingTaskGroup(of: Command.self) { group in
            for k in 0..<400 { group.addTask { try await tom.sendText("burst \(k)", to: cid) } }
            return try await group.reduce(into: [Command]()) { $0.append($1) }
        }
        let newest = try XCTUnwrap(acks.compactMap(\.t).max())
        let loginAt = Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
        // Here about 350 ms ahead on SQLite, 300 on PostgreSQL: the burst would have to take 400 ms for this to fail.
        XCTAssertGreaterThan(newest, loginAt, "the burst's timestamps ran ahead of the clock (else this test tests nothing)")

        let jerry = try await receiver.login("Jerry")
        var received: [Command] = []
        for _ in 0..<400 { received.append(try await jerry.nextMessage()) }
        XCTAssertEqual(Set(received.compactMap(\.id)), Set(acks.compactMap(\.uid)))
        XCTAssertEqual(received.filter { $0.offline != true }.compactMap(\.text), [])

        // Sent after the login: live.
        try await tom.sendText("after", to: cid)
        let live = try await jerry.nextMessage()
        XCTAssertEqual(live.text, "after")
        XCTAssertNil(live.offline)
    }
}
