import IMCore

/// The correspondence between Hookbot's command model and LeanCloud's enum numbers.
enum ProtocolNames {
    static let lcCommand: [CommandType: LCProtoCommandType] = [
        .session: .session, .conv: .conv, .direct: .direct, .ack: .ack, .rcp: .rcp, .unread: .unread,
        .logs: .logs, .error: .error, .read: .read, .patch: .patch, .echo: .echo, .goaway: .goaway,
        .blacklist: .blacklist, .device: .device,
    ]

    static let modelCommand: [LCProtoCommandType: CommandType] = Dictionary(
        uniqueKeysWithValues: lcCommand.map { ($0.value, $0.key) })

    /// Hookbot op → LeanCloud op. Where Hookbot distinguishes what LeanCloud does not, the nearest
    /// LeanCloud op is used (what LeanCloud's server sends in that situation) and the exact op travels
    /// in `hookbotFields`: `invited` is LeanCloud's `joined`, `kicked` its `left`, and the replies
    /// `muted` / `unmuted` are `updated`.
    static let lcOp: [OpType: LCProtoOpType] = sameOps.merging([
        .invited: .joined, .kicked: .left, .muted: .updated, .unmuted: .updated,
    ]) { first, _ in first }

    /// LeanCloud op → Hookbot op (the inverse of `lcOp` where it is one-to-one, plus LeanCloud's own
    /// `invited` / `kicked` event numbers).
    static let modelOp: [LCProtoOpType: OpType] = Dictionary(uniqueKeysWithValues: sameOps.map { ($0.value, $0.key) })
        .merging([.invited: .invited, .kicked: .kicked]) { first, _ in first }

    /// The operations that are one op on each side.
    static let sameOps: [OpType: LCProtoOpType] = [
        .open: .open, .opened: .opened, .close: .close, .closed: .closed,
        .start: .start, .started: .started, .add: .add, .added: .added, .remove: .remove, .removed: .removed,
        .join: .join, .joined: .joined, .quit: .leave, .left: .left,
        .membersJoined: .membersJoined, .membersLeft: .membersLeft,
        .query: .query, .results: .results, .count: .count, .result: .result,
        .update: .update, .updated: .updated, .mute: .mute, .unmute: .unmute,
        .modify: .modify, .modified: .modified, .queryResult: .queryResult, .maxRead: .maxRead,
    ].merging(memberControlOps) { first, _ in first }

    /// Member mutes, block lists and roles: the same operation on both sides.
    static let memberControlOps: [OpType: LCProtoOpType] = [
        .addShutup: .addShutup, .removeShutup: .removeShutup, .queryShutup: .queryShutup,
        .shutupAdded: .shutupAdded, .shutupRemoved: .shutupRemoved, .shutupResult: .shutupResult,
        .shutuped: .shutuped, .unshutuped: .unshutuped,
        .membersShutuped: .membersShutuped, .membersUnshutuped: .membersUnshutuped,
        .block: .block, .unblock: .unblock, .blocked: .blocked, .unblocked: .unblocked,
        .membersBlocked: .membersBlocked, .membersUnblocked: .membersUnblocked,
        .memberInfoUpdate: .memberInfoUpdate, .memberInfoUpdated: .memberInfoUpdated,
        .memberInfoChanged: .memberInfoChanged,
    ]

    /// LeanCloud's message priorities.
    static let priorityNumber: [String: Int32] = ["high": 1, "normal": 2, "low": 3]
    static let priorityName: [Int32: String] = [1: "high", 2: "normal", 3: "low"]
}
