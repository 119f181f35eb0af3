import IMCore
import XCTest

/// The requests tests build most, built once: a test reads `tom.request(.conv(.add, cid, members: ["Harry"]))`.
extension Command {
    /// A `conv` command on the conversation `cid`, naming `members` where the operation takes them (join, add,
    /// remove, quit, count, mute, …).
    public static func conv(_ op: OpType, _ cid: String, members: [String]? = nil) -> Command {
        var command = Command(cmd: .conv, op: op)
        command.cid = cid
        command.m = members
        return command
    }

    /// The `patch modify` recalling the message an `ack` answered in `cid`, as the SDKs send it.
    public static func recall(_ ack: Command, in cid: String) throws -> Command {
        try patch(ack, in: cid) { $0.recall = true }
    }

    /// The `patch modify` changing the message an `ack` answered in `cid` to `data` (the new content).
    public static func edit(_ ack: Command, in cid: String, to data: String) throws -> Command {
        try patch(ack, in: cid) { $0.data = data }
    }

    private static func patch(_ ack: Command, in cid: String, _ change: (inout PatchItem) -> Void) throws -> Command {
        var item = PatchItem(
            cid: cid, mid: try XCTUnwrap(ack.uid, "no message id in \(ack)"), timestamp: try XCTUnwrap(ack.t, "no time in \(ack)"))
        change(&item)
        var command = Command(cmd: .patch, op: .modify)
        command.patches = [item]
        return command
    }
}
