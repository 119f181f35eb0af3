import BotRouting
import Foundation
import HookRuntime
import IMClient
import IMCore

/// Converts between the SDK's messages and the hook runtime's (a body alone: `HookMessage(id:cid:from:body:…)` and
/// `HookMessage.typedMessage`, in BotRouting, which `hookbot test` shares).
enum HookMapping {
    static func hookMessage(_ message: IMMessage) -> HookMessage {
        if let bytes = message.binary {
            // A binary message: no text, its bytes as base64 in `binary`.
            return HookMessage(
                id: message.id, cid: message.conversationId, from: message.from, type: MessageType.text.rawValue,
                timestamp: message.timestamp, transient: message.isTransient, binary: bytes.base64EncodedString())
        }
        if case .typed(let typed) = message.content {
            // Decoded once, by the client: not encoded again here and parsed a third time (issue 30).
            return HookMessage(
                id: message.id, cid: message.conversationId, from: message.from, typed: typed, timestamp: message.timestamp,
                transient: message.isTransient)
        }
        return HookMessage(
            id: message.id, cid: message.conversationId, from: message.from, body: message.content.body,
            timestamp: message.timestamp, transient: message.isTransient)
    }

    static func hookCommand(_ cmd: IMCmdMessage) -> HookCommand {
        HookCommand(action: cmd.action, ext: cmd.ext, cid: cmd.conversationId, from: cmd.from)
    }
}
