import BotRouting
import IMClient

/// `ctx.dm`: the bot's 1:1 conversations are unique conversations of two members, so opening one again
/// returns the same conversation; the routing core remembers the id (`ConversationMembers.direct(with:)`)
/// and opens it only the first time.
extension ClientOutlet {
    nonisolated(nonsending) func directConversation(with user: String) async throws -> String {
        metrics.executed("dm_open")
        return try await client.createConversation(members: [user], options: .unique).id
    }
}
