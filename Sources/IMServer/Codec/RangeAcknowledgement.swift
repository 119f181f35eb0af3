import IMCore

extension IMService {
    /// LeanCloud SDKs acknowledge deliveries as a timestamp range of a conversation (`ackMessage`
    /// `fromts`…`tots`, decoded as `tt`…`t`) instead of listing message ids. For such an ack, this fills
    /// in `ids` with the messages of that range that asked for a receipt, so that `acknowledge` sends
    /// their senders `rcp` as it does for JSON clients (and moves the cursor to the range's end). Other
    /// commands are returned unchanged.
    func resolvingRangeAcknowledgement(_ command: Command, on connection: Connection) async -> Command {
        guard command.cmd == .ack, command.ids == nil, command.mid == nil,
            let cid = command.cid, let to = command.t, let from = command.tt, from <= to,
            let clientID = connection.clientID
        else { return command }
        let ids =
            (try? await store.receiptMessageIDs(cid: cid, from: from, to: to, excluding: clientID)) ?? []
        var resolved = command
        if !ids.isEmpty { resolved.ids = ids }
        return resolved
    }
}
