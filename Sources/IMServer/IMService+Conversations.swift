import Foundation
import IMCore
import IMSignatures
import NIOWebSocket

/// Conversations: `conv start`, `conv update` (name and attributes) and a member's `conv mute` / `unmute`.
extension IMService {
    func startConversation(_ command: Command, by clientID: String, on connection: Connection) async throws {
        let members = command.m ?? []
        if members.count > 1000 { throw IMError(.invalidField, "at most 1000 members at creation") }
        for member in members {
            if let error = ClientID.validate(member) { throw IMError(.invalidField, "member '\(member)': \(error.detail ?? error.reason)") }
        }
        if let attr = command.attr, attr.objectValue == nil { throw IMError(.invalidField, "attr must be a JSON object") }
        try ConversationRecord.checkLimits(name: command.name, attr: command.attr)
        let temporaryTTL = try temporaryLifetime(command)
        let joinPolicy = try JoinPolicy.requested(in: command.attr, transient: command.transient == true)
        try await signatures?.verify(
            .startConversation(members: members), by: clientID, command: command, failure: .conversationSignatureFailed)
        let now = Identifiers.nowMillis()
        let (record, created) = try await store.createConversation(
            NewConversation(
                creator: clientID, members: members, name: command.name, attr: command.attr,
                unique: command.unique == true, transient: command.transient == true, temporaryTTL: temporaryTTL, now: now,
                requestedJoinPolicy: joinPolicy))
        var reply = Command(cmd: .conv, op: .started, i: command.i)
        reply.cid = record.id
        reply.cdate = record.createdAt
        reply.unique = record.uniqueKey != nil ? true : nil
        reply.tempConvTTL = temporaryTTL
        connection.send(reply)
        if record.transient {
            await setRoom(connection, record.id)
            return
        }
        guard created else { return }
        let all = try await store.members(of: record.id)
        // `cdate` marks the events of a creation: these members founded the conversation, they did not join it.
        var invited = Command(cmd: .conv, op: .invited)
        invited.cid = record.id
        invited.initBy = clientID
        invited.cdate = record.createdAt
        await notify(all.filter { $0 != clientID }, invited)
        var joined = Command(cmd: .conv, op: .membersJoined)
        joined.cid = record.id
        joined.m = all
        joined.initBy = clientID
        joined.cdate = record.createdAt
        await notify(all, joined, except: connection)
    }

    /// Default and largest lifetime of a temporary conversation, in seconds (one day, thirty days).
    static let temporaryTTL = (default: 86_400, max: 30 * 86_400)

    /// The lifetime a `conv start` asks for with `tempConv`, nil for other conversations.
    private func temporaryLifetime(_ command: Command) throws -> Int? {
        guard command.tempConv == true else {
            if command.tempConvTTL != nil { throw IMError(.invalidField, "tempConvTTL needs tempConv: true") }
            return nil
        }
        if command.transient == true { throw IMError(.invalidField, "a chat room cannot be temporary") }
        let ttl = command.tempConvTTL ?? Self.temporaryTTL.default
        guard ttl >= 1, ttl <= Self.temporaryTTL.max else {
            throw IMError(.invalidField, "tempConvTTL must be 1–\(Self.temporaryTTL.max) seconds")
        }
        return ttl
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
