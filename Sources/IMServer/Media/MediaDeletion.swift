import Foundation

extension IMService {
    /// Whether `clientID` may delete the stored file `id` of `owner`: its uploader may; so may a conversation's
    /// owner or manager when every conversation whose messages or attributes name the file is one they manage
    /// (a moderator removing a picture posted in their group). "Every" matters: anyone can start a conversation
    /// of their own and forward a file into it, which must not let them delete a file others still show.
    /// (The operator, with the master key, may delete any file; the routes check that before asking here.)
    func mayDelete(media id: String, owner: String, by clientID: String) async throws -> Bool {
        if clientID == owner { return true }
        guard let queries = store as? any MediaRetentionQueries else { return false }
        let conversations = try await queries.conversationsNamingMedia(id)
        guard !conversations.isEmpty else { return false }
        for cid in conversations {
            guard let record = try await store.conversation(cid) else { return false }
            let role = actingRole(clientID, in: record, try await memberControls(cid))
            guard role >= .manager else { return false }
        }
        return true
    }
}
