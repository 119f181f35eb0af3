import Foundation
import HookRuntime
import IMClient
import IMCore

/// Converts between the SDK's messages and the hook runtime's.
enum HookMapping {
    /// A message body (typed JSON or plain text) as the table plugins see. Fields of custom types are
    /// merged into `attrs` under `fields`.
    static func hookMessage(
        id: String, cid: String, from: String, body: String, timestamp: Int64,
        transient: Bool
    ) -> HookMessage {
        guard let typed = TypedMessage.decode(body) else {
            return HookMessage(
                id: id, cid: cid, from: from, type: MessageType.text.rawValue, text: body,
                timestamp: timestamp, transient: transient)
        }
        var attrs = typed.attributes ?? [:]
        if !typed.fields.isEmpty { attrs["fields"] = .object(typed.fields) }
        return HookMessage(
            id: id, cid: cid, from: from, type: typed.type, text: typed.text, attrs: attrs,
            file: typed.file, location: typed.location,
            timestamp: timestamp, transient: transient)
    }

    static func hookMessage(_ message: IMMessage) -> HookMessage {
        if let bytes = message.binary {
            // A binary message: no text, its bytes as base64 in `binary`.
            return HookMessage(
                id: message.id, cid: message.conversationId, from: message.from, type: MessageType.text.rawValue,
                timestamp: message.timestamp, transient: message.isTransient, binary: bytes.base64EncodedString())
        }
        return hookMessage(
            id: message.id, cid: message.conversationId, from: message.from, body: message.content.body,
            timestamp: message.timestamp, transient: message.isTransient)
    }

    /// The typed JSON body of a plugin's message (custom-type fields come back out of `attrs.fields`).
    static func typedMessage(_ message: HookMessage) -> TypedMessage {
        var attrs = message.attrs
        let fields = attrs.removeValue(forKey: "fields")?.objectValue ?? [:]
        return TypedMessage(
            type: message.type, text: message.text, attributes: attrs.isEmpty ? nil : attrs,
            // A file without a url (a plugin's draft naming only an id) is not sent, as before.
            file: message.file.flatMap { $0.url.isEmpty ? nil : $0 }, location: message.location,
            fields: fields)
    }

    static func hookCommand(_ cmd: IMCmdMessage) -> HookCommand {
        HookCommand(action: cmd.action, ext: cmd.ext, cid: cmd.conversationId, from: cmd.from)
    }
}
