import BotHost
import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import XCTest

/// Join screening with the question asked in a 1:1 chat the bot opens (`ctx.dm`), on a real server with
/// the shipped plugins: the newcomer is muted by the server, finds the question in a conversation of two
/// (the bot and them) that the bot started, answers there, and the server lifts the mute; the group never
/// sees the question.
final class ScreeningDMTests: XCTestCase {
    func testTheBotAsksInAOneToOneChatItOpensAndTheAnswerThereLiftsTheMute() async throws {
        let harness = try await BotHarness.start(attachment: .inProcess)
        addTeardownBlock(releasing: harness.server) { await $0.stop() }
        let bot = try await RaidTests.shippedBot(harness, gatekeeper: ["screening": true, "language": "both"])
        addTeardownBlock(releasing: bot) { await $0.stop() }
        let (cid, clients, logs, muted) = try await RaidTests.newcomerJoins(harness, "小明", group: "screened 群")
        let newbie = clients[2]
        XCTAssertEqual(muted, 300)
        // The question arrives in a conversation the bot opened with the newcomer.
        let prefix = "To post in \(cid), answer: "
        let (dm, asked) = try await logs[2].next("the question in the bot's 1:1 chat") { event -> (String, String)? in
            if case .message(let m) = event, m.from == "modbot", m.conversationId != cid, let text = m.content.text,
                text.hasPrefix(prefix)
            {
                (m.conversationId, text)
            } else {
                nil
            }
        }
        let question = String(asked.dropFirst(prefix.count).prefix { $0 != "\n" })
        XCTAssertTrue(asked.contains("\n要在 \(cid) 发言，请回答："), asked)
        let found = try await newbie.conversations(matching: IMConversationQuery().whereKey("objectId", equalTo: .string(dm)))
        let info = try XCTUnwrap(found.first?.info)
        XCTAssertEqual(info.unique, true)
        XCTAssertEqual(Set(info.m ?? []), ["modbot", "小明"])
        do {
            _ = try await newbie.conversation(cid).send(.text("大家好"))
            XCTFail("a newcomer posted before answering")
        } catch {
            XCTAssertEqual(error.knownCode, .memberMuted)
        }

        let replies = logs[2]
        func botAnswer() async throws -> String {
            try await replies.next("the bot's answer in the 1:1 chat") { event -> String? in
                if case .message(let m) = event, m.conversationId == dm, m.from == "modbot",
                    m.content.text?.hasPrefix(prefix) == false, m.content.text?.hasPrefix("Hi! I am a bot") == false
                {
                    m.content.text
                } else {
                    nil
                }
            }
        }
        _ = try await newbie.conversation(dm).send(.text("-100"))
        let wrong = try await botAnswer()
        XCTAssertTrue(wrong.hasPrefix("Not quite, 2 more tries. \(question)"), wrong)
        _ = try await newbie.conversation(dm).send(.text(try XCTUnwrap(RaidTests.solve(question), question) + "！"))
        let right = try await botAnswer()
        XCTAssertEqual(right, "Thanks, 小明! You can post in \(cid) now.\n谢谢，小明！现在可以在 \(cid) 发言了。")
        _ = try await logs[2].next("the mute lifted") { event -> Bool? in
            if case .unmuted(cid, _, false) = event { true } else { nil }
        }
        _ = try await newbie.conversation(cid).send(.text("大家好，很高兴加入 🎉"))
        let got = try await logs[1].next("the newcomer's first message") { event -> String? in
            if case .message(let m) = event, m.from == "小明" { m.content.text } else { nil }
        }
        XCTAssertEqual(got, "大家好，很高兴加入 🎉")
        // The group never saw the question (the 1:1 chat carried it).
        let groupSaw = logs[1].history.compactMap { event -> String? in
            if case .message(let m) = event, m.conversationId == cid, m.from == "modbot" { m.content.text } else { nil }
        }
        XCTAssertFalse(groupSaw.contains { $0.contains(question) }, "\(groupSaw)")
        for client in clients { await client.close() }
    }
}
