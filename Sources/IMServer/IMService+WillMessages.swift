import Foundation
import IMCore
import Synchronization

/// Will messages: held for a session and sent as the client's message when its connection drops.
extension IMService {
    /// `direct` with `will: true`: held for the session, not delivered now. The server sends it as the
    /// client's message when the client's connection drops without `session close`; a clean close (or a
    /// kick by another login with the same tag) discards it. One per session: a later will replaces it.
    func holdWill(_ command: Command, from clientID: String, on connection: Connection) async throws {
        let cid = try requiredCID(command)
        if command.transient == true || command.action != nil {
            throw IMError(.invalidField, "a will message cannot be transient nor a cmd message")
        }
        let (body, binary) = try MessageContent.read(text: command.msg, binary: command.binaryMsg, limit: configuration.maxMessageBytes)
        if let priority = command.priority, !["high", "normal", "low"].contains(priority) {
            throw IMError(.invalidField, "priority must be high, normal or low")
        }
        let conversation = try StoreRules.existing(await store.conversation(cid), cid)
        if conversation.transient {
            throw IMError(.invalidField, "a will message needs a conversation with members, not a chat room")
        }
        guard try await store.isMember(clientID, of: cid) else {
            throw IMError(.invalidMessagingTarget, "\(clientID) is not a member of \(cid)")
        }
        var message = OutgoingMessage(
            cid: cid, from: clientID, data: body, receipt: command.r == true, priority: command.priority, dedupeToken: nil,
            mentionPids: command.mentionPids, mentionAll: command.mentionAll, sender: connection, serial: nil)
        message.binary = binary
        wills.hold(message, for: connection.id)
        var ack = Command(cmd: .ack, i: command.i)
        ack.t = Identifiers.nowMillis()
        connection.send(ack)
    }

    /// Sends the will message of a connection that dropped, as if its client sent it then (muted clients'
    /// wills are dropped; interceptors review it like any message).
    func sendWill(_ message: OutgoingMessage, of connection: Connection) async {
        do {
            try await refuseIfMuted(cid: message.cid, sender: message.from)
        } catch {
            logger.info("will message dropped", metadata: ["client": "\(message.from)", "error": "\(error)"])
            return
        }
        logger.info("will message sent", metadata: ["client": "\(message.from)", "cid": "\(message.cid)"])
        if interceptors.isActive, interceptors.inScope(message.cid), !interceptors.isInterceptor(message.from) {
            await interception.admission.enter(connection.id)
            interception.submit(message)
        } else {
            pipeline.enqueue(message)
        }
    }
}

/// The will messages held per connection (this node's memory: a node that stops loses them).
final class WillMessages: Sendable {
    private let held = Mutex<[UInt64: OutgoingMessage]>([:])

    func hold(_ message: OutgoingMessage, for connection: UInt64) { held.withLock { $0[connection] = message } }
    func take(_ connection: UInt64) -> OutgoingMessage? { held.withLock { $0.removeValue(forKey: connection) } }
    func discard(_ connection: UInt64) { held.withLock { $0[connection] = nil } }
    func discardAll() { held.withLock { $0.removeAll() } }
}
