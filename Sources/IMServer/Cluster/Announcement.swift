import Foundation
import IMCore

/// What one node tells the others through PostgreSQL's `NOTIFY` (a JSON payload on the cluster's
/// channel; the commands it carries are their JSON wire text, encoded once and decoded once). Every node listens, the sender included, and handles announcements in the order the database
/// delivers them: commit order.
enum Announcement: Sendable, Equatable {
    /// A stored message, announced inside the transaction that stores it (so only once committed, and in
    /// commit order). `members` is its audience; nil when the list did not fit in a payload, in which case
    /// nodes read the message and its members from the database.
    case message(MessageRecord?, id: String, cid: String, members: [String]?, room: Bool)
    /// A command for every connection of these clients (membership events, receipts, updates, recalls,
    /// unstored messages) on the other nodes: the origin node delivered it to its own connections already.
    case clients([String], Command, origin: String)
    /// A command for every connection in a chat room, on the other nodes.
    case room(String, Command, origin: String)
    /// A login took `tag` of `clientID` for the `generation`-th time: connections holding it from an
    /// earlier login are closed with 4111.
    case kick(clientID: String, tag: String, generation: Int64, keep: ConnectionRef)
    /// An interception request for `interceptor`, from the node `origin` (`request.id` is its own id).
    case review(interceptor: String, origin: String, request: Command)
    /// An interceptor's answer to a review request of `origin`.
    case verdict(origin: String, answer: Command)

    /// A connection of a node.
    struct ConnectionRef: Sendable, Equatable {
        var node: String
        var connection: UInt64
    }

    /// The kind, as metrics label it.
    var kind: String {
        switch self {
        case .message: "message"
        case .clients: "clients"
        case .room: "room"
        case .kick: "kick"
        case .review: "review"
        case .verdict: "verdict"
        }
    }

    static let kinds = ["message", "clients", "room", "kick", "review", "verdict"]

    /// The largest payload PostgreSQL carries is 8,000 bytes; leave room.
    static let maxPayloadBytes = 7_900

    private static let codec = JSONCommandCodec()

    /// The payload text, or nil when it does not fit (a message is then announced by id alone).
    func payload() -> String? {
        let text = json().jsonString()
        if text.utf8.count <= Self.maxPayloadBytes { return text }
        if case .message(_, let id, let cid, _, let room) = self {
            return Announcement.message(nil, id: id, cid: cid, members: nil, room: room).payload()
        }
        return nil
    }

    private func json() -> JSONValue {
        switch self {
        case .message(let record, let id, let cid, let members, let room):
            var object: [String: JSONValue] = ["k": "m", "id": .string(id), "cid": .string(cid), "room": .bool(room)]
            if let members { object["to"] = .array(members.map(JSONValue.string)) }
            if let record { object["msg"] = .string(Self.codec.encode(MessagePipeline.directCommand(record))) }
            return .object(object)
        case .clients(let ids, let command, let origin):
            return .object([
                "k": "c", "to": .array(ids.map(JSONValue.string)), "cmd": .string(Self.codec.encode(command)), "origin": .string(origin),
            ])
        case .room(let cid, let command, let origin):
            return .object(["k": "r", "cid": .string(cid), "cmd": .string(Self.codec.encode(command)), "origin": .string(origin)])
        case .kick(let clientID, let tag, let generation, let keep):
            return .object(["k": "k", "client": .string(clientID), "tag": .string(tag), "gen": .int(Int(generation)), "x": keep.json])
        case .review(let interceptor, let origin, let request):
            return .object(["k": "q", "to": .string(interceptor), "origin": .string(origin), "cmd": .string(Self.codec.encode(request))])
        case .verdict(let origin, let answer):
            return .object(["k": "v", "origin": .string(origin), "cmd": .string(Self.codec.encode(answer))])
        }
    }

    /// Reads a payload; nil for anything malformed (logged by the caller, never fatal).
    init?(payload: String) {
        guard let object = JSONValue.parse(payload)?.objectValue, let kind = object["k"]?.stringValue else { return nil }
        func command(_ key: String) -> Command? {
            object[key]?.stringValue.flatMap { try? Self.codec.decode($0) }
        }
        func ids(_ key: String) -> [String]? { object[key]?.arrayValue?.compactMap(\.stringValue) }
        let except = object["x"].flatMap(ConnectionRef.init(json:))
        switch kind {
        case "m":
            guard let id = object["id"]?.stringValue, let cid = object["cid"]?.stringValue else { return nil }
            let record = command("msg").flatMap(MessageRecord.init(direct:))
            self = .message(record, id: id, cid: cid, members: ids("to"), room: object["room"]?.boolValue ?? false)
        case "c":
            guard let to = ids("to"), let cmd = command("cmd"), let origin = object["origin"]?.stringValue else { return nil }
            self = .clients(to, cmd, origin: origin)
        case "r":
            guard let cid = object["cid"]?.stringValue, let cmd = command("cmd"), let origin = object["origin"]?.stringValue else {
                return nil
            }
            self = .room(cid, cmd, origin: origin)
        case "k":
            guard let client = object["client"]?.stringValue, let tag = object["tag"]?.stringValue,
                let generation = object["gen"]?.intValue, let except
            else { return nil }
            self = .kick(clientID: client, tag: tag, generation: Int64(generation), keep: except)
        case "q":
            guard let to = object["to"]?.stringValue, let origin = object["origin"]?.stringValue, let cmd = command("cmd") else {
                return nil
            }
            self = .review(interceptor: to, origin: origin, request: cmd)
        case "v":
            guard let origin = object["origin"]?.stringValue, let cmd = command("cmd") else { return nil }
            self = .verdict(origin: origin, answer: cmd)
        default:
            return nil
        }
    }
}

extension Announcement.ConnectionRef {
    fileprivate var json: JSONValue { .object(["n": .string(node), "c": .int(Int(connection))]) }

    fileprivate init?(json: JSONValue) {
        guard let node = json["n"]?.stringValue, let connection = json["c"]?.intValue else { return nil }
        self.init(node: node, connection: UInt64(connection))
    }
}

extension MessageRecord {
    /// The stored message a `direct` delivery command carries (the inverse of `directCommand`).
    init?(direct command: Command) {
        guard let cid = command.cid, let id = command.id, let from = command.fromPeerId, let t = command.timestamp else { return nil }
        self.init(
            id: id, cid: cid, from: from, data: command.msg ?? command.binaryMsg ?? "", t: t, receipt: command.r == true,
            priority: command.priority, mentionPids: command.mentionPids, mentionAll: command.mentionAll == true,
            patchT: command.patchTimestamp, binary: command.msg == nil && command.binaryMsg != nil)
    }
}
