import BotRouting
import Foundation
import HookRuntime
import IMClient
import IMCore

/// Carries a bot's actions out through its IM client, counting each in the bot's metrics.
struct ClientOutlet: BotOutlet {
    let client: IMClient
    let metrics: BotMetrics
    /// Where failures that surface later (a refused ack) are reported.
    let report: @Sendable (RoutingNote) -> Void
    /// Told the id and timestamp the server gave each card the bot sent (`BotHost.cardRecorder`).
    var cardSent: (@Sendable (HookMessage, String, Int64) -> Void)? = nil

    nonisolated(nonsending) func send(_ message: HookMessage, transient: Bool, mentions: [String], replyTo: String?, plugin: String)
        async throws
    {
        let what = transient ? "send_transient" : "send"
        metrics.executed(what)
        let content = IMMessageContent.typed(message.typedMessage)
        let options = IMSendOptions(transient: transient, mentionPids: mentions.isEmpty ? nil : mentions)
        // Submitted in order; the ack is awaited off the event path so replies can be pipelined.
        let pending = try await client.conversation(message.cid).submit(content, options: options)
        let report = report
        let cid = message.cid
        pending.onFailure { error in
            report(.actionFailed(action: what, cid: cid, plugin: plugin, error: "\(error)"))
        }
        if message.type == HookCards.messageType, let cardSent {
            // ctx.card_update edits the message: its id and timestamp come with the ack.
            Task {
                if let sent = try? await pending.message() { cardSent(message, sent.id, sent.timestamp) }
            }
        }
    }

    nonisolated(nonsending) func perform(_ action: HookAction) async throws {
        switch action.kind {
        case .sendCommand(let cid, let command):
            metrics.executed("send_cmd")
            _ = try await client.conversation(cid).sendCmd(action: command.action, ext: command.ext)
        case .edit(let cid, let messageID, let timestamp, let message):
            metrics.executed("edit")
            _ = try await client.conversation(cid).editMessage(
                id: messageID, timestamp: timestamp, to: .typed(message.typedMessage))
        case .recall(let cid, let messageID):
            metrics.executed("recall")
            _ = try await client.conversation(cid).recall(messageId: messageID, timestamp: 0)
        case .kick(let cid, let user, _):
            metrics.executed("kick")
            _ = try await client.conversation(cid).remove(members: [user])
        case .add(let cid, let user):
            metrics.executed("add")
            _ = try await client.conversation(cid).add(members: [user])
        case .updateAttribute(let cid, let key, let value):
            metrics.executed("update_attr")
            _ = try await client.conversation(cid).update(patch: ["attr.\(key)": value])
        case .mute(let cid, let user, let seconds, let reason):
            // The server keeps and enforces it (the routing core only mirrors it).
            metrics.executed("mute")
            if seconds == 0 {
                _ = try await client.conversation(cid).unmuteMembers([user])
            } else {
                _ = try await client.conversation(cid).muteMembers([user], seconds: seconds ?? 600, reason: reason)
            }
        case .lock(let cid, let locked, let reason):
            // A lock is the join policy switched to invite-only (the server refuses outsiders' joins, 4308).
            metrics.executed(locked ? "lock" : "unlock")
            var update = Command(cmd: .conv, op: .update)
            update.cid = cid
            update.attr = .object(["attr.joinPolicy": .string(locked ? "invite" : "open")])
            update.detail = reason
            _ = try await client.send(update)
        case .block(let cid, let user, let blocked):
            metrics.executed(blocked ? "block" : "unblock")
            if blocked {
                _ = try await client.conversation(cid).blockMembers([user])
            } else {
                _ = try await client.conversation(cid).unblockMembers([user])
            }
        case .send, .sendTransient, .warn, .log, .directMessage:
            // Sends reach `send(_:…)`; a warning and a 1:1 message are sends; log lines were written by the plugin runtime.
            break
        }
    }
}
