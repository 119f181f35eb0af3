import HookRuntime
import IMCore

/// A review's decision as the interceptor's answer to the server (`HookVerdict`), and message bodies as plugins
/// see them: the bot host answers the server with this verdict, and `hookbot test`'s simulated server applies
/// the same verdict, so the server, the bot and the scenario runner agree on one type.
extension MessageRouter.Review {
    /// The answer to the server for a message that was sent as `sentBody` (its typed JSON or plain text; nil
    /// when the review was not of a message body); `undecided` is the reason given when the review did not
    /// finish in time (the server's failure policy then decides).
    public func verdict(sentBody: String?, undecided: @autoclosure () -> String) -> HookVerdict {
        switch decision {
        case .allow:
            return .allow
        case .modify(let approved):
            // A plain-text message stays plain text unless the plugins gave it a type or attributes.
            let plain = sentBody.map { TypedMessage.decode($0) == nil } ?? false
            let body =
                plain && approved.type == MessageType.text.rawValue && approved.attrs.isEmpty
                ? approved.text ?? ""
                : approved.typedMessage.encoded()
            return .modify(body: body, recipients: nil)
        case .drop(let reason, let code, let silent):
            return .drop(reason: reason, appCode: code, silent: silent)
        case .undecided:
            return .declined(reason: undecided())
        }
    }
}

extension HookMessage {
    /// A message body (typed JSON or plain text) as the table plugins see. Fields of custom types are merged
    /// into `attrs` under `fields`.
    public init(id: String, cid: String, from: String, body: String, timestamp: Int64, transient: Bool) {
        guard let typed = TypedMessage.decode(body) else {
            self.init(
                id: id, cid: cid, from: from, type: MessageType.text.rawValue, text: body, timestamp: timestamp,
                transient: transient)
            return
        }
        self.init(id: id, cid: cid, from: from, typed: typed, timestamp: timestamp, transient: transient)
    }

    /// A typed message body already decoded (what `init(id:cid:from:body:timestamp:transient:)` makes of its JSON),
    /// for a caller that has it: the bot host's client decodes every message it receives.
    public init(id: String, cid: String, from: String, typed: TypedMessage, timestamp: Int64, transient: Bool) {
        var attrs = typed.attributes ?? [:]
        if !typed.fields.isEmpty { attrs["fields"] = .object(typed.fields) }
        self.init(
            id: id, cid: cid, from: from, type: typed.type, text: typed.text, attrs: attrs, file: typed.file,
            location: typed.location, timestamp: timestamp, transient: transient)
    }

    /// The typed JSON body of a plugin's message (custom-type fields come back out of `attrs.fields`).
    public var typedMessage: TypedMessage {
        var attrs = self.attrs
        let fields = attrs.removeValue(forKey: "fields")?.objectValue ?? [:]
        return TypedMessage(
            type: type, text: text, attributes: attrs.isEmpty ? nil : attrs,
            // A file without a url (a plugin's draft naming only an id) is not sent, as before.
            file: file.flatMap { $0.url.isEmpty ? nil : $0 }, location: location, fields: fields)
    }
}
