import IMClient
import IMCore

// Custom message types on the Swift side. Their fields travel in `_lcattrs`, which Lua plugins see as
// `msg.attrs` and validate against the schema they register with `ctx.types.register`.

/// A poll (`_lctype` 2); the poll plugin tallies the votes.
struct Poll: IMCustomMessage {
    static let messageType = 2
    var question: String
    var options: [String]

    init(question: String, options: [String]) {
        self.question = question
        self.options = options
    }

    init(typedMessage: TypedMessage) throws {
        guard let attrs = typedMessage.attributes, let question = attrs["question"]?.stringValue,
            let options = attrs["options"]?.arrayValue?.compactMap(\.stringValue)
        else {
            throw IMError(.invalidArgument, "not a poll")
        }
        self.init(question: question, options: options)
    }

    func typedMessage() throws -> TypedMessage {
        TypedMessage(
            type: Self.messageType, text: "Poll: \(question)",
            attributes: ["question": .string(question), "options": .array(options.map { .string($0) })])
    }
}

/// A shared link with its title, summary and image (`_lctype` 3), like a news-sharing card.
struct LinkCard: IMCustomMessage {
    static let messageType = 3
    var url: String
    var title: String
    var summary: String?
    var image: String?

    init(url: String, title: String, summary: String? = nil, image: String? = nil) {
        self.url = url
        self.title = title
        self.summary = summary
        self.image = image
    }

    init(typedMessage: TypedMessage) throws {
        guard let attrs = typedMessage.attributes, let url = attrs["url"]?.stringValue,
            let title = attrs["title"]?.stringValue
        else { throw IMError(.invalidArgument, "not a link card") }
        self.init(url: url, title: title, summary: attrs["summary"]?.stringValue, image: attrs["image"]?.stringValue)
    }

    func typedMessage() throws -> TypedMessage {
        var attrs: [String: JSONValue] = ["url": .string(url), "title": .string(title)]
        if let summary { attrs["summary"] = .string(summary) }
        if let image { attrs["image"] = .string(image) }
        return TypedMessage(type: Self.messageType, text: title, attributes: attrs)
    }
}

/// The "operation" type (`_lctype` 1): a typing indicator, sent transiently so it is neither stored nor
/// pushed offline.
struct Operation: IMCustomMessage {
    static let messageType = 1
    var text: String

    init(text: String = "typing…") { self.text = text }

    init(typedMessage: TypedMessage) throws { text = typedMessage.text ?? "" }

    func typedMessage() throws -> TypedMessage { TypedMessage(type: Self.messageType, text: text) }
}
