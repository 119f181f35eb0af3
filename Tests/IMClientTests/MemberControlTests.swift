import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import XCTest

/// The SDK's mutes, block lists and roles, with their events (docs/CLIENT.md).
final class MemberControlClientTests: XCTestCase {
    func testMutesBlocksAndRolesWithEvents() async throws {
        let server = try await startServer()
        let clients = ["Tom", "Jerry", "Bob"].map { server.client($0) }
        let logs = try await openClients(clients)
        let (tom, jerry, bob) = (clients[0], clients[1], clients[2])
        let conversation = try await tom.createConversation(name: "group", members: ["Jerry", "Bob"])
        let cid = conversation.id

        try await conversation.updateMemberRole("Jerry", to: .manager)
        let role = try await logs[2].next("role changed") {
            if case .memberRoleChanged(cid, let member, let role, let by) = $0 { "\(member) \(role.rawValue) \(by ?? "")" } else { nil }
        }
        XCTAssertEqual(role, "Jerry Manager Tom")

        // A manager mutes Bob for a second; Bob hears it, his sends fail with 4905, then work again.
        let managed = jerry.conversation(cid)
        let value1 = try await managed.muteMembers(["Bob"], seconds: 1, reason: "flood")
        XCTAssertEqual(value1, ["Bob"])
        let muted = try await logs[2].next("muted") {
            if case .muted(cid, let by, let seconds, let all) = $0 { "\(by ?? "") \(seconds ?? 0) \(all)" } else { nil }
        }
        XCTAssertEqual(muted, "Jerry 1 false")
        let seen = try await logs[0].next("members muted") {
            if case .membersMuted(cid, let members, let by, _, _) = $0 { "\(members) \(by ?? "")" } else { nil }
        }
        XCTAssertEqual(seen, "[\"Bob\"] Jerry")
        let page = try await conversation.mutedMembers()
        XCTAssertEqual(page.ids, ["Bob"])
        XCTAssertNil(page.next)
        do {
            try await bob.conversation(cid).send(.text("hey"))
            XCTFail("a muted member sent a message")
        } catch {
            XCTAssertEqual(error.knownCode, .memberMuted)
            XCTAssertTrue(error.detail?.contains("flood") == true, "\(error)")
        }
        try await Task.sleep(for: .milliseconds(1_200))
        _ = try await bob.conversation(cid).send(.text("back"))

        // Bob, a member, may not mute; the owner blocks him.
        do {
            try await bob.conversation(cid).muteMembers(["Jerry"])
            XCTFail("a member muted a manager")
        } catch {
            XCTAssertEqual(error.knownCode, .conversationNotAllowed)
        }
        let value2 = try await conversation.blockMembers(["Bob"])
        XCTAssertEqual(value2, ["Bob"])
        let blockedBy = try await logs[2].next("blocked") { if case .blocked(cid, let by) = $0 { by } else { nil } }
        XCTAssertEqual(blockedBy, "Tom")
        let blockedSeen = try await logs[1].next("members blocked") {
            if case .membersBlocked(cid, let members, _) = $0 { members } else { nil }
        }
        XCTAssertEqual(blockedSeen, ["Bob"])
        let value3 = try await managed.blockedMembers().ids
        XCTAssertEqual(value3, ["Bob"])
        do {
            try await bob.conversation(cid).join()
            XCTFail("a blocked client joined")
        } catch {
            XCTAssertEqual(error.knownCode, .conversationBlacklisted)
        }
        let value4 = try await conversation.unblockMembers(["Bob"])
        XCTAssertEqual(value4, ["Bob"])
        try await bob.conversation(cid).join()

        // Mute all: Bob is silenced, the manager is not.
        try await conversation.muteAll()
        let value5 = try await conversation.mutedMembers().allMuted
        XCTAssertTrue(value5)
        do {
            try await bob.conversation(cid).send(.text("hey"))
            XCTFail("a member spoke during a conversation-wide mute")
        } catch {
            XCTAssertEqual(error.knownCode, .memberMuted)
        }
        _ = try await managed.send(.text("managers may speak"))
        try await conversation.unmuteAll()
        _ = try await bob.conversation(cid).send(.text("everyone may speak"))
        for client in clients { await client.close() }
    }
}
