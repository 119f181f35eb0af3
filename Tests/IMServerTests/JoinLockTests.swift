import Foundation
import HookbotTestSupport
import IMCore
import XCTest

@testable import IMServer

/// A conversation's lock (docs/PROTOCOL.md, "Join policy"): the owner, a manager or an interceptor switches
/// a group between `open` and `invite` with `conv update` of `attr.joinPolicy`; while locked, outsiders'
/// joins get 4308 saying so, members still add others. Founders' events carry `cdate`; `conv query` flag
/// bit 4 answers each member's join time, role, messages sent and founder flag. On SQLite, and on
/// PostgreSQL under `HOOKBOT_TEST_BACKEND=postgres`.
final class JoinLockTests: XCTestCase {
    static let secret = "lock-secret"

    private func join(_ client: TestClient, _ cid: String) async throws -> Command {
        let join = Command.conv(.join, cid)
        return try await client.request(join)
    }

    private func setPolicy(_ client: TestClient, _ cid: String, _ policy: JSONValue, reason: String? = nil) async throws -> Command {
        var update = Command.conv(.update, cid)
        update.attr = .object(["attr.joinPolicy": policy])
        update.detail = reason
        return try await client.request(update)
    }

    func testManagerLocksOutsidersAreRefusedMembersStillAddAndUnlockOpensIt() async throws {
        let server = try await ServerHarness.start()
        let (tom, jerry, mod, eve, zed) = try await server.login("Tom", "Jerry", "Mod", "Eve", "Zed")
        let group = try await tom.startConversation(members: ["Jerry", "Mod"], name: "group")
        var promote = Command.conv(.memberInfoUpdate, group)
        promote.targetClientId = "Mod"
        promote.role = "Manager"
        let promoted = try await tom.request(promote)
        XCTAssertEqual(promoted.op, .memberInfoUpdated, "\(promoted)")

        // A plain member cannot lock (an SDK's conversation.update of joinPolicy included).
        let byMember = try await setPolicy(jerry, group, "invite")
        XCTAssertEqual(byMember.code, 4903, "\(byMember)")
        XCTAssertEqual(
            byMember.detail, "joinPolicy of \(group) is changed only by its owner, its managers or an interceptor (a lock); members cannot")

        // The manager locks; the members hear of it as a conversation update.
        let locked = try await setPolicy(mod, group, "invite", reason: "join wave: 12 joins in 10 s")
        XCTAssertEqual(locked.op, .updated, "\(locked)")
        let heard = try await jerry.next("conv updated") { $0.op == .updated && $0.cid == group }
        XCTAssertEqual(heard.attr, ["attr.joinPolicy": "invite"])
        XCTAssertEqual(heard.initBy, "Mod")
        let dropped = try await setPolicy(tom, group, ["__op": "Delete"])
        XCTAssertEqual(dropped.code, 4903, "\(dropped)")
        XCTAssertEqual(dropped.detail, "joinPolicy cannot be removed: set it to 'open' or 'invite'")

        // Outsiders are refused with a detail that says the conversation is locked and why.
        let refused = try await join(eve, group)
        XCTAssertEqual(refused.code, 4308, "\(refused)")
        XCTAssertEqual(refused.reason, "CONVERSATION_NOT_ALLOWED")
        XCTAssertEqual(refused.detail, "\(group) is locked (invite-only for now: join wave: 12 joins in 10 s): a member must add Eve")
        let addSelf = Command.conv(.add, group, members: ["Zed"])
        let selfAdd = try await zed.request(addSelf)
        XCTAssertEqual(selfAdd.code, 4308, "\(selfAdd)")
        // A member still adds others.
        let add = Command.conv(.add, group, members: ["Eve"])
        let added = try await jerry.request(add)
        XCTAssertEqual(added.allowedPids, ["Eve"], "\(added)")

        // The lock survives a restart (it is stored).
        await tom.close()
        await jerry.close()
        await mod.close()
        await eve.close()
        await zed.close()
        let again = try await server.restarted()
        addTeardownBlock(releasing: again) { await $0.stop() }
        let (zedAgain, owner) = try await again.login("Zed", "Tom")
        let stillLocked = try await join(zedAgain, group)
        XCTAssertEqual(stillLocked.code, 4308, "\(stillLocked)")
        var query = Command(cmd: .conv, op: .query)
        query.where = ["objectId": .string(group)]
        let found = try await owner.request(query)
        XCTAssertEqual(found.results?.first?.attr?.objectValue?["joinPolicy"], "invite")

        // The owner unlocks: outsiders join again.
        let unlocked = try await setPolicy(owner, group, "open")
        XCTAssertEqual(unlocked.op, .updated, "\(unlocked)")
        let joined = try await join(zedAgain, group)
        XCTAssertEqual(joined.op, .added, "\(joined)")
        XCTAssertEqual(joined.allowedPids, ["Zed"])
    }

    func testInterceptorLocksWithoutBeingAMemberOneToOnesAndTemporaryConversationsCannotBeOpened() async throws {
        let server = try await startServer { configuration in
            configuration.interception.interceptors = [.init(clientID: "modbot", secret: Self.secret)]
            configuration.interception.reviewMembership = false
        }
        let (tom, eve) = try await server.login("Tom", "Eve")
        let bot = try await TestClient.connect(port: server.port)
        let opened = try await bot.request(Command.interceptorOpen("modbot", secret: Self.secret))
        XCTAssertEqual(opened.op, .opened)
        try await waitUntilInterceptorAttached(server.server, "modbot")
        let group = try await tom.startConversation(members: ["Jerry"], name: "group")

        let locked = try await setPolicy(bot, group, "invite", reason: "raid")
        XCTAssertEqual(locked.op, .updated, "\(locked)")
        let refused = try await join(eve, group)
        XCTAssertEqual(refused.detail, "\(group) is locked (invite-only for now: raid): a member must add Eve")
        let unlocked = try await setPolicy(bot, group, "open")
        XCTAssertEqual(unlocked.op, .updated, "\(unlocked)")
        let joined = try await join(eve, group)
        XCTAssertEqual(joined.op, .added, "\(joined)")

        // 1:1s and temporary conversations stay invite-only, whoever asks.
        let pair = try await tom.startConversation(members: ["Jerry"], unique: true)
        var temporary = Command(cmd: .conv, op: .start)
        temporary.m = ["Jerry"]
        temporary.tempConv = true
        let temporaryReply = try await tom.request(temporary)
        let temporaryID = try XCTUnwrap(temporaryReply.cid)
        for (cid, kind) in [(pair, "1:1"), (temporaryID, "temporary")] {
            for client in [tom, bot] {
                let refusedChange = try await setPolicy(client, cid, "open")
                XCTAssertEqual(refusedChange.code, 4903, "\(refusedChange)")
                XCTAssertEqual(refusedChange.detail, "\(cid) is a \(kind) conversation: its joinPolicy stays 'invite'")
            }
            let outsider = try await join(eve, cid)
            XCTAssertEqual(outsider.code, 4308, "\(outsider)")
        }
        // A chat room is always open.
        var roomStart = Command(cmd: .conv, op: .start)
        roomStart.transient = true
        let roomReply = try await tom.request(roomStart)
        let room = try XCTUnwrap(roomReply.cid)
        let closedRoom = try await setPolicy(bot, room, "invite")
        XCTAssertEqual(closedRoom.code, 4903)
        XCTAssertEqual(closedRoom.detail, "a chat room is always open: joinPolicy must be 'open'")
    }

    func testFoundersEventsCarryTheCreationTimeAndMemberInfoAnswersJoinTimesRolesAndCounts() async throws {
        let server = try await startServer()
        let (tom, jerry, eve) = try await server.login("Tom", "Jerry", "Eve")
        var start = Command(cmd: .conv, op: .start)
        start.m = ["Jerry"]
        let started = try await tom.request(start)
        let group = try XCTUnwrap(started.cid)
        let created = try XCTUnwrap(started.cdate)

        // The creation's events say it is one (cdate); a later join's do not.
        let invited = try await jerry.next("invited") { $0.op == .invited && $0.cid == group }
        XCTAssertEqual(invited.cdate, created)
        let founders = try await jerry.next("members-joined") { $0.op == .membersJoined && $0.cid == group }
        XCTAssertEqual(founders.cdate, created)
        XCTAssertEqual(Set(founders.m ?? []), ["Tom", "Jerry"])
        try await Task.sleep(for: .milliseconds(20))
        let joined = try await join(eve, group)
        XCTAssertEqual(joined.op, .added)
        let joiner = try await jerry.next("members-joined (Eve)") { $0.op == .membersJoined && $0.m == ["Eve"] }
        XCTAssertNil(joiner.cdate)

        for text in ["one", "two", "three"] { try await jerry.sendText(text, to: group) }
        try await eve.sendText("hello", to: group)

        var query = Command(cmd: .conv, op: .query)
        query.where = ["objectId": .string(group)]
        query.flag = 4
        let answer = try await jerry.request(query)
        let info = try XCTUnwrap(answer.results?.first?.memberInfo?.objectValue, "\(answer)")
        XCTAssertEqual(info["Tom"], ["joinedAt": .int(Int(created)), "role": "Owner", "sent": 0, "founder": true])
        XCTAssertEqual(info["Jerry"], ["joinedAt": .int(Int(created)), "role": "Member", "sent": 3, "founder": true])
        let eveInfo = try XCTUnwrap(info["Eve"]?.objectValue)
        XCTAssertGreaterThan(eveInfo["joinedAt"]?.intValue ?? 0, Int(created))
        XCTAssertEqual(eveInfo["sent"], 1)
        XCTAssertEqual(eveInfo["role"], "Member")
        XCTAssertNil(eveInfo["founder"])

        // Without the flag, or for somebody who is not a member, there is none.
        query.flag = nil
        let plain = try await jerry.request(query)
        XCTAssertNil(plain.results?.first?.memberInfo)
        query.flag = 4
        let outsider = try await server.login("Zed")
        let outsiders = try await outsider.request(query)
        XCTAssertEqual(outsiders.results?.count, 1, "\(outsiders)")
        XCTAssertNil(outsiders.results?.first?.memberInfo)
    }
}
