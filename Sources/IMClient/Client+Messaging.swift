import Foundation
import IMCore

/// Sending, recalling and reading messages, and history.
extension IMClient {
    func sendMessage(_ content: IMMessageContent, to cid: String, options: IMSendOptions) async throws(IMError) -> IMMessage {
        try await submitMessage(content, to: cid, options: options).message()
    }

    /// Writes a message now (messages leave in the order they are submitted) without waiting for its ack.
    func submitMessage(_ content: IMMessageContent, to cid: String, options: IMSendOptions) throws(IMError) -> IMPendingMessage {
        let body = try content.encodedBody()
        var direct = try directCommand(to: cid, options: options)
        direct.msg = body
        let (_, slot) = try enqueue(consume direct, policy: options.transient ? .fail : .resend)
        return IMPendingMessage(client: self, slot: slot, conversationId: cid, content: content, body: body, options: options)
    }

    /// A `direct` to `cid` with `options` (its content still to set: `msg` or `binaryMsg`).
    func directCommand(to cid: String, options: IMSendOptions) throws(IMError) -> Command {
        var direct = Command(cmd: .direct)
        direct.cid = cid
        direct.transient = options.transient ? true : nil
        direct.r = options.receipt ? true : nil
        direct.priority = options.priority?.rawValue
        direct.mentionPids = options.mentionPids
        direct.mentionAll = options.mentionAll ? true : nil
        direct.pushData = options.transient ? nil : try options.pushData?.validated()
        // Stored messages carry a token the server de-duplicates on, so they can be resent after a
        // reconnect; transient ones are not stored and are not resent.
        direct.dt = options.transient ? nil : (options.dedupeToken ?? nextDedupeToken())
        return direct
    }

    func sendCmd(action: String, ext: [String: JSONValue], to cid: String) async throws(IMError) -> IMCmdMessage {
        var direct = Command(cmd: .direct)
        direct.cid = cid
        direct.action = action
        direct.ext = ext
        let ack = try await request(direct)
        return IMCmdMessage(
            id: ack.uid ?? "", conversationId: cid, from: clientId, timestamp: ack.t ?? 0,
            action: action, ext: ext)
    }

    func recall(messageId: String, timestamp: Int64, in cid: String) async throws(IMError) -> IMMessage {
        var patch = PatchItem(cid: cid, mid: messageId, timestamp: timestamp)
        patch.recall = true
        var modify = Command(cmd: .patch, op: .modify)
        modify.patches = [patch]
        let reply = try await request(modify)
        patch.from = clientId
        patch.patchTimestamp = reply.t
        return recalledMessage(patch)
    }

    func markRead(_ cid: String, upTo message: (id: String, timestamp: Int64)?) async throws(IMError) {
        var read = Command(cmd: .read)
        read.cid = cid
        if let last = message ?? lastMessages[cid] {
            read.mid = last.id
            read.t = last.timestamp
        }
        _ = try await request(read)
    }

    func history(_ cid: String, before: (id: String?, timestamp: Int64)?, after: Int64?, limit: Int, type: Int? = nil) async throws(IMError)
        -> [IMMessage]
    {
        var logs = Command(cmd: .logs)
        logs.cid = cid
        logs.limit = limit
        logs.lctype = type
        logs.t = before?.timestamp
        logs.mid = before?.id
        logs.tt = after
        let reply = try await request(logs)
        return (reply.logs ?? []).map { item in
            var message = IMMessage(
                id: item.msgId, conversationId: cid, from: item.from, timestamp: item.timestamp,
                content: .decode(item.data, registry: registry), body: item.data, status: status(of: item))
            message.priority = item.priority.flatMap(IMMessagePriority.init(rawValue:))
            message.deliveredAt = item.ackAt
            message.readAt = item.readAt
            if item.bin == true {
                message.binary = Data(base64Encoded: item.data)
                message.content = .common("")
                message.body = ""
            }
            message.editedAt = item.recalled == true ? nil : item.patchTimestamp
            return message
        }
    }

    private func status(of item: LogItem) -> IMMessageStatus {
        if item.recalled == true { return .recalled }
        guard item.from == clientId else { return .received }
        if item.readAt != nil { return .read }
        if item.ackAt != nil { return .delivered }
        return .sent
    }
}

extension IMMessageContent {
    /// The wire body (`msg`), as `body`, but a custom message that cannot be encoded throws (invalid argument)
    /// instead of sending an empty body.
    func encodedBody() throws(IMError) -> String {
        switch self {
        case .common(let text): return text
        case .typed(let typed): return typed.encoded()
        case .custom(let custom):
            do { return try custom.encodedTypedMessage().encoded() } catch let error as IMError { throw error } catch {
                throw IMError(.invalidArgument, "could not encode \(type(of: custom)): \(error)")
            }
        }
    }
}
