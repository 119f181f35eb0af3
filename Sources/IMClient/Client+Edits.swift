import Foundation
import IMCore

/// Editing messages and binary messages.
extension IMClient {
    func edit(
        messageId: String, timestamp: Int64, in cid: String, to content: IMMessageContent, mentionPids: [String]?, mentionAll: Bool
    ) async throws(IMError) -> IMMessage {
        let body = try content.encodedBody()
        var patch = PatchItem(cid: cid, mid: messageId, timestamp: timestamp)
        patch.data = body
        patch.mentionPids = mentionPids
        patch.mentionAll = mentionAll ? true : nil
        return try await sendEdit(patch)
    }

    func edit(messageId: String, timestamp: Int64, in cid: String, toBinary data: Data) async throws(IMError) -> IMMessage {
        var patch = PatchItem(cid: cid, mid: messageId, timestamp: timestamp)
        patch.binaryMsg = data.base64EncodedString()
        return try await sendEdit(patch)
    }

    private func sendEdit(_ patch: PatchItem) async throws(IMError) -> IMMessage {
        var modify = Command(cmd: .patch, op: .modify)
        modify.patches = [patch]
        let reply = try await request(modify)
        var edited = patch
        edited.from = clientId
        edited.patchTimestamp = reply.t
        var message = editedMessage(edited)
        message.status = .sent
        return message
    }

    func sendBinary(_ data: Data, to cid: String, options: IMSendOptions) async throws(IMError) -> IMMessage {
        var direct = try directCommand(to: cid, options: options)
        direct.binaryMsg = data.base64EncodedString()
        let ack = try await request(direct)
        var message = IMMessage(
            id: ack.uid ?? "", conversationId: cid, from: clientId, timestamp: ack.t ?? 0, content: .common(""), body: "", status: .sent)
        message.binary = data
        message.isTransient = options.transient
        return message
    }

    /// The message a `patch modify` edit item describes: its new content and when it was edited.
    func editedMessage(_ patch: PatchItem) -> IMMessage {
        let body = patch.binaryMsg == nil ? patch.data ?? "" : ""
        var message = IMMessage(
            id: patch.mid, conversationId: patch.cid, from: patch.from ?? "", timestamp: patch.timestamp,
            content: .decode(body, registry: registry), body: body, status: .received)
        message.binary = patch.binaryMsg.flatMap { Data(base64Encoded: $0) }
        message.editedAt = patch.patchTimestamp
        message.mentionPids = patch.mentionPids
        message.mentionAll = patch.mentionAll
        return message
    }
}

extension IMConversation {
    /// Replaces the content of a message this client sent (within the server's edit window, the recall
    /// window): the other members get `IMEvent.edited`, history and offline delivery the new version.
    /// An interceptor reviews the new content as it reviews a send (a refusal is 4405).
    @discardableResult
    public func update(
        _ message: IMMessage, to content: IMMessageContent, mentionPids: [String]? = nil, mentionAll: Bool = false
    ) async throws(IMError) -> IMMessage {
        try await client.edit(
            messageId: message.id, timestamp: message.timestamp, in: id, to: content, mentionPids: mentionPids, mentionAll: mentionAll)
    }

    /// Replaces the content of a message this client sent with bytes (a binary message).
    @discardableResult
    public func update(_ message: IMMessage, toBinary data: Data) async throws(IMError) -> IMMessage {
        try await client.edit(messageId: message.id, timestamp: message.timestamp, in: id, toBinary: data)
    }

    /// Sends a binary message (`binaryMsg`): bytes for LeanCloud's protobuf SDKs, base64 in JSON; at most
    /// the server's message size in bytes.
    @discardableResult
    public func send(binary data: Data, options: IMSendOptions = .default) async throws(IMError) -> IMMessage {
        try await client.sendBinary(data, to: id, options: options)
    }
}
