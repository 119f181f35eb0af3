import BotHost
import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import XCTest

/// New-member rules in a conversation the bot only moderates as the server's interceptor (it is not a
/// member, so no membership events reach it): the host asks the server for the members of a conversation
/// whose sender it does not know, and the shipped moderation's `new-member-links` rule holds a newcomer's
/// link while the founders' links go through.
final class InterceptorMembersTests: XCTestCase {
    func testNewMemberRulesHoldWhereTheBotOnlyReviews() async throws {
        let harness = try await BotHarness.start(attachment: .inProcess)
        addTeardownBlock(releasing: harness.server) { await $0.stop() }
        let bot = try await RaidTests.shippedBot(harness)
        addTeardownBlock(releasing: bot) { await $0.stop() }
        let clients = ["member01", "member02", "新人"].map { harness.server.client($0) }
        let logs = try await openClients(clients)
        let (owner, founder, newcomer) = (clients[0], clients[1], clients[2])
        // The bot is not a member: it sees this conversation only through the review requests.
        let group = try await owner.createConversation(name: "读书会", members: ["member02"])
        let cid = group.id
        let found = try await owner.conversations(matching: IMConversationQuery().whereKey("objectId", equalTo: .string(cid)))
        XCTAssertEqual(Set(try XCTUnwrap(found.first?.info?.m)), ["member01", "member02"])

        _ = try await founder.conversation(cid).send(.text("本周读这篇 https://example.com/chapter-3 👍"))
        let delivered = try await logs[0].next("the founder's link") { event -> String? in
            if case .message(let m) = event, m.conversationId == cid, m.from == "member02" { m.content.text } else { nil }
        }
        XCTAssertEqual(delivered, "本周读这篇 https://example.com/chapter-3 👍")

        try await newcomer.conversation(cid).join()
        _ = try await logs[0].next("the newcomer's join") { event -> Bool? in
            if case .membersJoined(cid, let members, _, _) = event, members.contains("新人") { true } else { nil }
        }
        _ = try await newcomer.conversation(cid).send(.text("大家好！"))
        do {
            _ = try await newcomer.conversation(cid).send(.text("free books here https://example.net/books"))
            XCTFail("a newcomer's link went through where the bot only reviews")
        } catch {
            XCTAssertEqual(error.knownCode, .messageRejectedByApp, "\(error)")
            XCTAssertEqual(error.detail, "new members cannot post links yet", "\(error)")
        }
        // The founders' links still go through, and the newcomer's greeting reached the owner.
        _ = try await founder.conversation(cid).send(.text("also https://example.org/notes"))
        let seen = try await logs[0].next("the founder's second link") { event -> String? in
            if case .message(let m) = event, m.conversationId == cid, m.from == "member02", m.content.text?.hasPrefix("also") == true {
                m.content.text
            } else {
                nil
            }
        }
        XCTAssertEqual(seen, "also https://example.org/notes")
        let fromNewcomer = logs[0].history.compactMap { event -> String? in
            if case .message(let m) = event, m.conversationId == cid, m.from == "新人" { m.content.text } else { nil }
        }
        XCTAssertEqual(fromNewcomer, ["大家好！"])
        for client in clients { await client.close() }
    }
}
