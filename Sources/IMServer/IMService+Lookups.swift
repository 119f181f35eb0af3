import Foundation
import IMCore

/// Looking conversations up by id: what the SDKs' `getConversation(id)` and `getConversations(ids)` send
/// (`conv query` with `where` `{"objectId": id}` or `{"objectId": {"$in": ids}}`).
extension IMService {
    /// The most ids one lookup answers for (the JS SDK asks for up to 999 at once).
    static let maxLookupIDs = 1000

    /// The ids a `where` asks for when it is nothing but an id lookup; nil for any other condition.
    static func lookedUpIDs(_ condition: JSONValue?) -> [String]? {
        guard let object = condition?.objectValue, object.count == 1, let value = object["objectId"] else { return nil }
        if let id = value.stringValue { return [id] }
        guard let operators = value.objectValue, operators.count == 1, let list = operators["$in"]?.arrayValue else { return nil }
        let ids = list.compactMap(\.stringValue)
        return ids.count == list.count && ids.count <= maxLookupIDs ? ids : nil
    }

    /// The conversations among `ids` that a listing query hides from `viewer` but that it may join (the
    /// join policy, `StoreRules.mayJoin`): a lookup by id answers for every conversation the viewer could
    /// join, as an outsider sees it (no members, no mutes), so that an SDK can open a group from a link,
    /// or again after a kick, and `join()` it. Invite-only conversations and temporary ones stay hidden.
    func joinableByID(_ ids: [String], besides found: [ConversationInfo], viewer: String) async throws -> [ConversationInfo] {
        let seen = Set(found.map(\.objectId))
        var joinable: [ConversationInfo] = []
        var asked: Set<String> = []
        for id in ids where !seen.contains(id) && asked.insert(id).inserted {
            guard let record = try await store.conversation(id), record.expiresAt == nil else { continue }
            guard try await mayJoinByID(record, viewer: viewer) else { continue }
            joinable.append(record.info(members: [], viewer: viewer))
        }
        return joinable
    }

    /// Whether `viewer`, not a member (a member's query already found it), could join the conversation
    /// by itself: the one decision `conv join` makes too.
    private func mayJoinByID(_ record: ConversationRecord, viewer: String) async throws -> Bool {
        StoreRules.mayJoin(record, isMember: false)
    }
}
