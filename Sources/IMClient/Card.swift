import Foundation
import IMCore

/// A Hookbot card (`_lctype` 100): what a bot's plugin sent with `ctx.card{…}`, decoded from the
/// message's `_lcattrs.card`. Every enabled button and select option carries the token the bot signed;
/// `IMConversation.click(_:button:)` sends it back as a cmd message (`card.click`), and the bot checks
/// it before its plugin sees the click. An update of the card arrives as an edit of its message
/// (`IMEvent.edited`): decode the new content with `Card(message:)` again.
public struct Card: Sendable, Hashable, Codable {
    /// The message type of cards.
    public static let messageType = 100
    /// The cmd message action of a click.
    public static let clickAction = "card.click"

    public struct Image: Sendable, Hashable, Codable {
        public var url: String
        /// The stored file's id, when the image is a file on the hub.
        public var id: String?
    }

    public struct Field: Sendable, Hashable, Codable {
        public var name: String
        public var value: String
        public var inline: Bool?
    }

    public struct Button: Sendable, Hashable, Codable {
        public var label: String
        public var action: String
        public var value: String
        /// `primary`, `secondary`, `success` or `danger` (nil: secondary).
        public var style: String?
        public var disabled: Bool?
        /// Only these members may click it (nil: everybody), or members holding one of `roles`.
        public var only: [String]?
        public var roles: [String]?
        /// The bot's signature of this button (nil when disabled).
        public var token: String?
    }

    public struct Option: Sendable, Hashable, Codable {
        public var label: String
        public var value: String
        public var token: String?
    }

    public struct Select: Sendable, Hashable, Codable {
        public var action: String
        public var placeholder: String?
        public var options: [Option]
        public var disabled: Bool?
        public var only: [String]?
        public var roles: [String]?
    }

    /// A text input sent with the click of any button (`form`), at most `max` characters.
    public struct Input: Sendable, Hashable, Codable {
        public var name: String
        public var label: String?
        public var placeholder: String?
        public var max: Int?
    }

    /// The card's id (chosen by the plugin or the host) and the plugin that sent it.
    public var id: String
    public var plugin: String
    public var title: String?
    public var text: String?
    public var image: Image?
    public var fields: [Field]?
    public var buttons: [Button]?
    public var selects: [Select]?
    public var inputs: [Input]?

    /// The card of a typed message (`_lctype` 100 with `_lcattrs.card`).
    public init(typedMessage: TypedMessage) throws(IMError) {
        guard typedMessage.type == Self.messageType, let card = typedMessage.attributes?["card"] else {
            throw IMError(.invalidArgument, "not a card message")
        }
        do {
            self = try JSONDecoder().decode(Card.self, from: JSONEncoder().encode(card))
        } catch {
            throw IMError(.invalidArgument, "malformed card: \(error)")
        }
    }

    /// The card a received message carries, or nil when it is not a card.
    public init?(message: IMMessage) {
        let typed: TypedMessage?
        switch message.content {
        case .typed(let t): typed = t
        case .custom(let custom): typed = try? custom.typedMessage()
        case .common: typed = nil
        }
        guard let typed, let card = try? Card(typedMessage: typed) else { return nil }
        self = card
    }

    /// The button with this label, if any.
    public func button(_ label: String) -> Button? { buttons?.first { $0.label == label } }
}

extension IMConversation {
    /// Clicks a card's button: a cmd message to the conversation with the card's id, the button's action,
    /// value and token, and the `form` inputs' texts. The bot answers through its plugin (a reply, an
    /// update of the card); a click it refuses is dropped there.
    @discardableResult
    public func click(_ card: Card, button: Card.Button, form: [String: String] = [:]) async throws(IMError) -> IMCmdMessage {
        guard let token = button.token, button.disabled != true else {
            throw IMError(.invalidArgument, "the button '\(button.label)' is disabled")
        }
        return try await sendCardAction(
            card: card.id, plugin: card.plugin, action: button.action, value: button.value, token: token, form: form)
    }

    /// Chooses an option of a card's select (like a click on a button).
    @discardableResult
    public func choose(_ card: Card, select: Card.Select, option: Card.Option, form: [String: String] = [:]) async throws(IMError)
        -> IMCmdMessage
    {
        guard let token = option.token, select.disabled != true else {
            throw IMError(.invalidArgument, "the select '\(select.action)' is disabled")
        }
        return try await sendCardAction(
            card: card.id, plugin: card.plugin, action: select.action, value: option.value, token: token, form: form)
    }

    /// Sends a card action as it travels: `{action: "card.click", ext: {plugin, card, action, value,
    /// token, "form.<input>": text…}}` (cmd message values are flat).
    @discardableResult
    public func sendCardAction(
        card: String, plugin: String, action: String, value: String, token: String, form: [String: String] = [:]
    ) async throws(IMError) -> IMCmdMessage {
        var ext: [String: JSONValue] = [
            "plugin": .string(plugin), "card": .string(card), "action": .string(action), "value": .string(value),
            "token": .string(token),
        ]
        for (name, text) in form { ext["form." + name] = .string(text) }
        return try await sendCmd(action: Card.clickAction, ext: ext)
    }

    /// Replaces the content of a message this client sent, by id and timestamp (what a bot does to update
    /// a card it sent).
    @discardableResult
    public func editMessage(id messageId: String, timestamp: Int64, to content: IMMessageContent) async throws(IMError) -> IMMessage {
        try await client.edit(messageId: messageId, timestamp: timestamp, in: id, to: content, mentionPids: nil, mentionAll: false)
    }
}
