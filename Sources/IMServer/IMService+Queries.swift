import Foundation
import IMCore

/// Conversation queries, attribute updates and mute.
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

    func updateConversation(_ command: Command, by clientID: String, on connection: Connection) async throws {
        let cid = try requiredCID(command)
        guard let patch = command.attr?.objectValue, !patch.isEmpty else {
            throw IMError(.invalidField, "attr must be a non-empty object of changes")
        }
        let now = Identifiers.nowMillis()
        let inRoom = rooms.room(of: connection) == cid
        let members = try await store.updateConversation(
            cid: cid, by: clientID, inRoom: inRoom, patch: patch, now: now, trusted: interceptors.isInterceptor(clientID),
            reason: command.detail)
        var reply = Command(cmd: .conv, op: .updated, i: command.i)
        reply.cid = cid
        reply.udate = now
        connection.send(reply)
        var event = Command(cmd: .conv, op: .updated)
        event.cid = cid
        event.attr = .object(patch)
        event.initBy = clientID
        event.udate = now
        await notify(members, event, except: connection)
        // Chat rooms have no member list: the clients in the room hear of it.
        await notifyRoom(cid, event, except: connection)
    }

    func setMuted(_ command: Command, by clientID: String, on connection: Connection) async throws {
        let cid = try requiredCID(command)
        let mute = command.op == .mute
        try await store.setMuted(cid: cid, clientID: clientID, muted: mute)
        var reply = Command(cmd: .conv, op: mute ? .muted : .unmuted, i: command.i)
        reply.cid = cid
        connection.send(reply)
    }
}

/// Applies a `conv update` patch: keys `name` or `attr.<path>`, a value `{"__op":"Delete"}` deletes.
enum AttributePatch {
    static func apply(_ patch: [String: JSONValue], name: String?, attr: JSONValue) throws -> (String?, JSONValue) {
        var name = name
        var attributes = attr.objectValue ?? [:]
        for key in patch.keys.sorted() {
            let value = patch[key] ?? .null
            let delete = value.objectValue?["__op"]?.stringValue == "Delete"
            if key == "name" {
                if delete {
                    name = nil
                    continue
                }
                guard let text = value.stringValue else { throw IMError(.invalidField, "name must be a string") }
                name = text
            } else if key.hasPrefix("attr.") {
                let path = key.dropFirst(5).split(separator: ".", omittingEmptySubsequences: false).map(String.init)
                guard !path.isEmpty, path.allSatisfy({ !$0.isEmpty && $0.count <= 64 }), path.count <= 8 else {
                    throw IMError(.invalidField, "invalid attribute path '\(key)'")
                }
                set(&attributes, path: path[...], to: delete ? nil : value)
            } else if key == "attr" {
                guard let object = value.objectValue else { throw IMError(.invalidField, "attr must be an object") }
                attributes = object
            } else {
                throw IMError(.invalidField, "cannot update '\(key)': use name or attr.<key>")
            }
        }
        let result = JSONValue.object(attributes)
        try ConversationRecord.checkLimits(name: name, attr: result)
        return (name, result)
    }

    private static func set(_ object: inout [String: JSONValue], path: ArraySlice<String>, to value: JSONValue?) {
        guard let head = path.first else { return }
        if path.count == 1 {
            object[head] = value
            return
        }
        var child = object[head]?.objectValue ?? [:]
        set(&child, path: path.dropFirst(), to: value)
        object[head] = .object(child)
    }
}
