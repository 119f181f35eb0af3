import BotHost
import Foundation
import HookbotTestSupport
import IMClient

/// Tom in a conversation with the bot `modbot` and `others`, each member's events logged: where most tests of
/// what a bot says start.
struct BotConversation {
    let conversation: IMConversation
    /// Tom's log first, then the others' in the order given.
    let logs: [EventLog]
    let clients: [IMClient]

    /// Checks that the bot's next message in the conversation, as member `reader` (an index into `logs`) gets it,
    /// is `text`, and throws `UnexpectedReply` when it is not (a thrown error fails an XCTest test and a Swift
    /// Testing test alike); the members' own messages are skipped.
    func expectBot(_ text: String, reader: Int = 0) async throws {
        let said = try await logs[reader].message(from: "modbot", in: conversation.id, timeout: .seconds(10))
        guard said.content.text ?? "" == text else { throw UnexpectedReply(expected: text, received: said.content.text ?? "") }
    }

    /// Sends `text` as Tom and checks that the bot's next message is `answer`.
    func expectReply(to text: String, _ answer: String) async throws {
        try await say(text)
        try await expectBot(answer)
    }

    /// Sends `text` as member `member` (an index into `clients`).
    func say(_ text: String, as member: Int = 0) async throws {
        _ = try await clients[member].conversation(conversation.id).send(.text(text))
    }
}

/// The bot said something else than a test expected.
struct UnexpectedReply: Error, CustomStringConvertible {
    let expected: String
    let received: String
    var description: String { "the bot said \"\(received)\", expected \"\(expected)\"" }
}

extension BotHarness {
    /// Opens Tom and `others` and makes Tom's conversation with them and `alsoMembers` (members not opened here,
    /// such as a bot), in that order.
    func tomsConversation(with others: [String], alsoMembers: [String] = []) async throws -> BotConversation {
        let clients = (["Tom"] + others).map { server.client($0) }
        let logs = try await openClients(clients)
        let conversation = try await clients[0].createConversation(members: alsoMembers + others)
        return BotConversation(conversation: conversation, logs: logs, clients: clients)
    }

    /// Opens Tom and `others` and makes Tom's conversation with the bot and them.
    func conversationWithBot(_ others: [String] = []) async throws -> BotConversation {
        try await tomsConversation(with: others, alsoMembers: ["modbot"])
    }
}
