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
            file: typed.file.map {
                HookFile(
                    id: $0.objId, url: $0.url, name: $0.name, format: $0.format, size: $0.size.map { Int($0) },
                    width: $0.width, height: $0.height, duration: $0.duration)
            },
            location: typed.location.map { HookLocation(latitude: $0.latitude, longitude: $0.longitude) },
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
            file: message.file.flatMap { file in
                file.url.map {
                    FileInfo(
                        url: $0, objId: file.id, name: file.name, format: file.format, size: file.size.map(Int64.init),
                        width: file.width, height: file.height, duration: file.duration)
                }
            },
            location: message.location.map { Location(latitude: $0.latitude, longitude: $0.longitude) },
            fields: fields)
    }

    static func hookCommand(_ cmd: IMCmdMessage) -> HookCommand {
        HookCommand(action: cmd.action, ext: cmd.ext, cid: cmd.conversationId, from: cmd.from)
    }
}
