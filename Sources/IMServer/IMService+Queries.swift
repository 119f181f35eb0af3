import Foundation
import IMCore

/// `conv query`: conversations by a condition, or temporary conversations by id.
extension IMService {
    func queryConversations(_ command: Command, on connection: Connection) async throws {
        if let ids = command.tempConvIds { return try await queryTemporaryConversations(ids, command, on: connection) }
        let query = try ConversationQuery.compile(command.where, dialect: store.queryDialect)
        let limit = min(command.limit ?? 10, 1000)
        let skip = command.skip ?? 0
        guard limit >= 1 else { throw IMError(.invalidField, "limit must be at least 1") }
        guard skip >= 0 else { throw IMError(.invalidField, "skip must not be negative") }
        // A client sees the conversations it is a member of, chat rooms, and conversations whose
        // attributes say `public: true` (without their member lists); nothing else.
        // A lookup by id also finds the conversations the client may join (see `joinableByID`).
        let viewer = connection.clientID ?? ""
        var results = try await store.queryConversations(
            query, sort: command.sort, viewer: viewer, limit: limit, skip: skip, scanLimit: configuration.queryScanLimit)
        if let ids = Self.lookedUpIDs(command.where), skip == 0, results.count < limit {
            results += try await joinableByID(ids, besides: results, viewer: viewer).prefix(limit - results.count)
        }
        // Flag bit 4 (Hookbot's): each member's join time, role and messages sent, for members.
        if let flag = command.flag, flag & 4 != 0 { results = try await withMemberInfo(results, viewer: viewer) }
        // Flag bit 1 is the SDKs' `compact(true)`: results without their member lists.
        if let flag = command.flag, flag & 1 != 0 {
            results = results.map { info in
                var info = info
                info.m = nil
                return info
            }
        }
        var reply = Command(cmd: .conv, op: .results, i: command.i)
        reply.results = results
        connection.send(reply)
    }

    /// `conv query` with `tempConvIds`: the temporary conversations among them that exist and the client
    /// is a member of, with the seconds they have left in `ttl`.
    private func queryTemporaryConversations(_ ids: [String], _ command: Command, on connection: Connection) async throws {
        guard ids.count <= 100 else { throw IMError(.invalidField, "at most 100 tempConvIds") }
        var reply = Command(cmd: .conv, op: .results, i: command.i)
        reply.results = try await store.temporaryConversations(ids, viewer: connection.clientID ?? "")
        connection.send(reply)
    }
}
