import BotHost
import Foundation
import HookbotTestSupport
import IMClient
import XCTest

/// Tom in a conversation with the bot `modbot` and `others`, each member's events logged: where most tests of
/// what a bot says start.
struct BotConversation {
    let conversation: IMConversation
    /// Tom's log first, then the others' in the order given.
    let logs: [EventLog]
    let clients: [IMClient]

    /// Checks that the bot's next message in the conversation, as member `reader` (an index into `logs`) gets it,
    /// is `text`; the members' own messages are skipped.
    func expectBot(_ text: String, reader: Int = 0, file: StaticString = #filePath, line: UInt = #line) async throws {
        let said = try await logs[reader].message(from: "modbot", in: conversation.id, timeout: .seconds(10))
        XCTAssertEqual(said.content.text ?? "", text, file: file, line: line)
    }

    /// Sends `text` as Tom and checks that the bot's next message is `answer`.
    func expectReply(to text: String, _ answer: String, file: StaticString = #filePath, line: UInt = #line) async throws {
        try await say(text)
        try await expectBot(answer, file: file, line: line)
    }

    /// Sends `text` as member `member` (an index into `clients`).
    func say(_ text: String, as member: Int = 0) async throws {
        _ = try await clients[member].conversation(conversation.id).send(.text(text))
    }
}

extension BotHarness {
    /// Opens Tom and `others` and makes Tom's conversation with the bot and them.
    func conversationWithBot(_ others: [String] = []) async throws -> BotConversation {
        let clients = (["Tom"] + others).map { server.client($0) }
        let logs = try await openClients(clients)
        let conversation = try await clients[0].createConversation(members: ["modbot"] + others)
        return BotConversation(conversation: conversation, logs: logs, clients: clients)
    }
}
