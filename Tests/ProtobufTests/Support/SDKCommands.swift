import IMProto
import XCTest

/// Commands built the way LeanCloud's SDKs build them, as protobuf messages (not through `Command` and the
/// codec under test), for the requests these tests send most.
extension LCProtoGenericCommand {
    /// A `conv` command with the conversation and members the SDKs put in `convMessage`; `fill` sets the
    /// rest of `convMessage`.
    static func conv(
        _ op: LCProtoOpType, cid: String? = nil, members: [String]? = nil,
        _ fill: (inout LCProtoConvCommand) -> Void = { _ in }
    ) -> LCProtoGenericCommand {
        var command = LCProtoGenericCommand()
        command.cmd = .conv
        command.op = op
        if let cid { command.convMessage.cid = cid }
        if let members { command.convMessage.m = members }
        fill(&command.convMessage)
        return command
    }

    /// A `patch modify` of `items` (edits and recalls).
    static func patch(_ items: [LCProtoPatchItem]) -> LCProtoGenericCommand {
        var command = LCProtoGenericCommand()
        command.cmd = .patch
        command.op = .modify
        command.patchMessage.patches = items
        return command
    }
}

extension LCProtoPatchItem {
    /// The item naming the message to change; the change itself (`data`, `recall`, …) is set after.
    init(cid: String, mid: String, timestamp: Int64) {
        self.init()
        self.cid = cid
        self.mid = mid
        self.timestamp = timestamp
    }
}

extension WireClient {
    /// `createConversation` as the JS SDK sends it (the creator among `members`, LeanCloud's `attr` object as
    /// JSON text); returns the new conversation's id.
    func sdkStart(members: [String], attributes: String, unique: Bool = false) async throws -> String {
        let started = try await request(
            .conv(.start, members: members) {
                $0.unique = unique
                $0.attr.data = attributes
            })
        return try XCTUnwrap(started.cid, "\(started)")
    }
}
