import Foundation
import GRDB
import HookbotTestSupport
import IMCore
import Logging
import XCTest

@testable import IMServer

/// Who may join what (docs/PROTOCOL.md, "Join policy"): 1:1s, temporary conversations and conversations
/// created with `attr.joinPolicy: "invite"` take only the clients their members add; groups and chat rooms
/// stay open, as on LeanCloud. On SQLite, and on PostgreSQL under `HOOKBOT_TEST_BACKEND=postgres`.
final class JoinPolicyTests: XCTestCase {
    private func join(_ client: TestClient, _ cid: String) async throws -> Command {
        let join = Command.conv(.join, cid)
        return try await client.request(join)
    }

    private func add(_ client: TestClient, _ members: [String], to cid: String) async throws -> Command {
        let add = Command.conv(.add, cid, members: members)
        return try await client.request(add)
    }

    private func assertRefused(_ reply: Command, _ cid: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(reply.code, 4308, "\(reply)", file: file, line: line)
        XCTAssertEqual(reply.reason, "CONVERSATION_NOT_ALLOWED", file: file, line: line)
        XCTAssertTrue(reply.detail?.contains("\(cid) is invite-only") == true, "\(reply)", file: file, line: line)
    }

    func testOneToOneAndTemporaryConversationsAreInviteOnly() async throws {
        let server = try await startServer()
        let (tom, jerry, eve, bob) = try await server.login("Tom", "Jerry", "Eve", "Bob")

        let pair = try await tom.startConversation(members: ["Jerry"], unique: true)
        try await tom.sendText("just us", to: pair)
        var temporary = Command(cmd: .conv, op: .start)
        temporary.m = ["Jerry"]
        temporary.tempConv = true
        let temporaryID = try required(try await tom.request(temporary).cid)

        for cid in [pair, temporaryID] {
            // An outsider who learnt the id cannot join, by `join` or by adding itself, nor read.
            assertRefused(try await join(eve, cid), cid)
            assertRefused(try await add(eve, ["Eve"], to: cid), cid)
            let history = try await eve.history(cid)
            XCTAssertEqual(history.code, 4312)
            // A member's own join is a no-op that succeeds.
            let again = try await join(jerry, cid)
            XCTAssertEqual(again.op, .added)
        }
        let none = await eve.settle { $0.cmd == .direct }
        XCTAssertTrue(none.isEmpty)

        // A member may invite others; one who quits needs a member to add it again.
        let invited = try await add(tom, ["Bob"], to: pair)
        XCTAssertEqual(invited.allowedPids, ["Bob"])
        let bobsHistory = try await bob.history(pair)
        XCTAssertEqual(bobsHistory.logs?.count, 1)
        let quit = Command.conv(.quit, pair)
        let quitReply = try await bob.request(quit)
        XCTAssertEqual(quitReply.op, .removed)
        assertRefused(try await join(bob, pair), pair)
        let readded = try await add(jerry, ["Bob"], to: pair)
        XCTAssertEqual(readded.allowedPids, ["Bob"])
    }

    func testGroupsAndChatRoomsStayOpenAndCreatorsMayAskForInviteOnly() async throws {
        let server = try await startServer()
        let (tom, jerry, eve) = try await server.login("Tom", "Jerry", "Eve")

        // LeanCloud's flows: join a group by id (LeanCloud's SDKs start groups as unique ones too), rejoin
        // after a kick, a chat room.
        let group = try await tom.startConversation(members: ["Jerry", "Bob"], name: "group")
        let uniqueGroup = try await tom.startConversation(members: ["Jerry", "Bob"], unique: true)
        let twoNotUnique = try await tom.startConversation(members: ["Jerry"])
        var roomStart = Command(cmd: .conv, op: .start)
        roomStart.transient = true
        let room = try required(try await tom.request(roomStart).cid)
        for cid in [group, uniqueGroup, twoNotUnique, room] {
            let joined = try await join(eve, cid)
            XCTAssertEqual(joined.op, .added, "\(cid): \(joined)")
        }
        let kick = Command.conv(.remove, group, members: ["Eve"])
        let kicked = try await tom.request(kick)
        XCTAssertEqual(kicked.allowedPids, ["Eve"])
        let rejoined = try await join(eve, group)
        XCTAssertEqual(rejoined.allowedPids, ["Eve"])

        // A creator asks for invite-only (or open, for a 1:1) with attr.joinPolicy; members see it.
        let closed = try await tom.startConversation(members: ["Jerry", "Bob"], attr: ["joinPolicy": "invite", "topic": "plans"])
        assertRefused(try await join(eve, closed), closed)
        let openPair = try await tom.startConversation(members: ["Jerry"], unique: true, attr: ["joinPolicy": "open"])
        let joinedPair = try await join(eve, openPair)
        XCTAssertEqual(joinedPair.op, .added)
        var query = Command(cmd: .conv, op: .query)
        query.where = ["objectId": .string(closed)]
        let found = try await jerry.request(query)
        XCTAssertEqual(found.results?.first?.attr?.objectValue?["joinPolicy"], "invite")
        let invitedByMember = try await add(jerry, ["Eve"], to: closed)
        XCTAssertEqual(invitedByMember.allowedPids, ["Eve"])

        // A plain member cannot change the policy; nobody can drop it (the owner, managers and interceptors
        // switch it between open and invite: JoinLockTests).
        var byMember = Command.conv(.update, closed)
        byMember.attr = ["attr.joinPolicy": "open"]
        let refusedMember = try await jerry.request(byMember)
        XCTAssertEqual(refusedMember.code, 4903, "\(refusedMember)")
        XCTAssertEqual(
            refusedMember.detail,
            "joinPolicy of \(closed) is changed only by its owner, its managers or an interceptor (a lock); members cannot")
        for patch: [String: JSONValue] in [["attr.joinPolicy": ["__op": "Delete"]], ["attr": ["topic": "plans"]]] {
            var update = Command.conv(.update, closed)
            update.attr = .object(patch)
            let refused = try await tom.request(update)
            XCTAssertEqual(refused.code, 4903, "\(patch)")
            XCTAssertEqual(refused.detail, "joinPolicy cannot be removed: set it to 'open' or 'invite'")
        }
        var update = Command.conv(.update, closed)
        update.attr = ["attr.topic": "more plans"]
        let updated = try await tom.request(update)
        XCTAssertEqual(updated.op, .updated)

        // Values the server does not know, and a chat room asked to be closed.
        for (attr, transient, detail) in [
            (["joinPolicy": "request"], false, "joinPolicy 'request' is not supported yet: use 'open' or 'invite'"),
            (["joinPolicy": 1], false, "joinPolicy must be 'open' or 'invite'"),
            (["joinPolicy": "invite"], true, "a chat room is always open: joinPolicy must be 'open'"),
        ] as [(JSONValue, Bool, String)] {
            var start = Command(cmd: .conv, op: .start)
            start.m = ["Jerry"]
            start.attr = attr
            start.transient = transient ? true : nil
            let refused = try await tom.request(start)
            XCTAssertEqual(refused.code, 4903)
            XCTAssertEqual(refused.detail, detail)
        }
    }

    /// A database from before join policies: its 1:1s and temporary conversations become invite-only, its
    /// groups (unique or not) and chat rooms stay open.
    func testExistingConversationsGetTheirPolicyWhenTheStoreIsUpgraded() async throws {
        let directory = try makeTemporaryDirectory("hookbot-sdk")
        let now = Identifiers.nowMillis()
        func rows(chr: String) -> [String] {
            [
                """
                INSERT INTO conversations (id, creator, transient, unique_key, created_at, updated_at, expires_at) VALUES
                ('old-pair', 'Tom', FALSE, 'Jerry' || \(chr)(31) || 'Tom', \(now), \(now), NULL),
                ('old-group', 'Tom', FALSE, NULL, \(now), \(now), NULL),
                ('old-unique-trio', 'Tom', FALSE, 'Bob' || \(chr)(31) || 'Jerry' || \(chr)(31) || 'Tom', \(now), \(now), NULL),
                ('_tmp:old', 'Tom', FALSE, NULL, \(now), \(now), \(now + 3_600_000)),
                ('old-room', 'Tom', TRUE, NULL, \(now), \(now), NULL)
                """,
                """
                INSERT INTO members (cid, client_id, joined_at) VALUES
                ('old-pair', 'Tom', \(now)), ('old-pair', 'Jerry', \(now)), ('old-group', 'Tom', \(now)),
                ('old-unique-trio', 'Tom', \(now)), ('old-unique-trio', 'Jerry', \(now)), ('old-unique-trio', 'Bob', \(now)),
                ('_tmp:old', 'Tom', \(now)), ('_tmp:old', 'Jerry', \(now))
                """,
            ]
        }
        switch TestDatabase.backend {
        case .sqlite:
            let pool = try DatabasePool(path: directory.appendingPathComponent("hookbot.sqlite").path)
            try SQLiteSchema.migrator.migrate(pool, upTo: "v5-signature-nonces")
            let statements = rows(chr: "char")
            try await pool.write { db in for statement in statements { try db.execute(sql: statement) } }
            try pool.close()
        case .postgres:
            var logger = Logger(label: "join-policy-upgrade")
            logger.logLevel = .warning
            let store = try PostgresStore(
                url: try TestDatabase.postgresURL(schema: TestDatabase.schemaName(for: directory)), logger: logger)
            try await store.migrate(through: 1)
            try await store.execute(unsafeSQL: rows(chr: "chr"))
            await store.shutdown()
        }

        let server = try await startServer(directory: directory)
        let eve = try await server.login("Eve")
        for cid in ["old-pair", "_tmp:old"] { assertRefused(try await join(eve, cid), cid) }
        for cid in ["old-group", "old-unique-trio", "old-room"] {
            let joined = try await join(eve, cid)
            XCTAssertEqual(joined.op, .added, "\(cid): \(joined)")
        }
        let jerry = try await server.login("Jerry")
        let invited = try await add(jerry, ["Eve"], to: "old-pair")
        XCTAssertEqual(invited.allowedPids, ["Eve"])
    }
}
