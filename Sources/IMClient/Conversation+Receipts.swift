import Foundation
import IMCore

/// One other member's receipt marks in a conversation: how far its devices acknowledged (received) and
/// read it (ms; the time it was added when it has done neither since).
public struct IMMemberReceipt: Sendable, Equatable {
    public var clientId: String
    public var deliveredAt: Int64
    public var readAt: Int64

    public init(clientId: String, deliveredAt: Int64, readAt: Int64) {
        self.clientId = clientId
        self.deliveredAt = deliveredAt
        self.readAt = readAt
    }
}

extension IMConversation {
    /// Each other member's delivery and read marks (`conv max-read` with `queryAllMembers`), by client id:
    /// who has received and read what in a group. Members only (4317).
    nonisolated(nonsending) public func memberReceipts() async throws(IMError) -> [IMMemberReceipt] {
        var query = Command(cmd: .conv, op: .maxRead)
        query.cid = id
        query.queryAllMembers = true
        let reply = try await client.request(query)
        return (reply.maxReadTuples ?? []).map {
            IMMemberReceipt(clientId: $0.pid, deliveredAt: $0.maxAckTimestamp ?? 0, readAt: $0.maxReadTimestamp ?? 0)
        }
    }

    /// The newest `limit` stored messages of one type (`_lctype`, e.g. `MessageType.text.rawValue`), oldest
    /// first; before `timestamp` when given, to page back.
    nonisolated(nonsending) public func messages(ofType type: Int, beforeTimestamp timestamp: Int64? = nil, limit: Int = 20)
        async throws(IMError)
        -> [IMMessage]
    {
        try await client.history(id, before: timestamp.map { (nil, $0) }, after: nil, limit: limit, type: type)
    }
}
