import BotHost
import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import IMServer
import XCTest

/// Cards through a real server and bot: the SDK decodes the bot's card, a member's click (a signed cmd
/// message) reaches `on_action`, and the card is edited in place for everyone; forged clicks — a made-up
/// token, a value the card never offered, another member's button — change nothing.
final class CardBotTests: XCTestCase {
    static let lunch = """
        return {
          name = "lunch",
          on_receive = function(msg, ctx)
            if msg.text == "!lunch" then
              ctx.card{ id = "lunch", title = "午饭 🍱", text = "no clicks yet", image = "https://example.org/lunch.png",
                buttons = { { label = "🍕 Pizza", value = "pizza", style = "primary" }, { label = "寿司", value = "sushi" },
                            { label = "Close", action = "close", only = { "Tom" }, style = "danger" } } }
            end
          end,
          on_action = function(a, ctx)
            local n = ctx.state.incr("clicks")
            if a.name == "close" then
              return ctx.card_update(a.card.id, { text = "closed by " .. a.member, disabled = true })
            end
            ctx.card_update(a.card.id, { text = n .. " click(s), last: " .. a.member .. " " .. a.label })
          end,
        }
        """

    func testAMemberClicksACardAndEveryoneSeesItUpdated() async throws {
        let harness = try await BotHarness.start(attachment: .inProcess)
        addTeardownBlock(releasing: harness.server) { await $0.stop() }
        try harness.write("lunch.lua", Self.lunch)
        let bot = try await harness.bot()
        defer { withExtendedLifetime(bot) {} }
        let tom = harness.server.client("Tom")
        let jerry = harness.server.client("Jerry")
        let logs = try await openClients([tom, jerry])
        let conversation = try await tom.createConversation(members: ["Jerry", "modbot"])
        _ = try await conversation.send(.text("!lunch"))
        _ = try await logs[1].message(in: conversation.id)
        let message = try await logs[1].message(in: conversation.id)
        XCTAssertEqual(message.from, "modbot")
        let card = try XCTUnwrap(Card(message: message), "\(message.body)")
        XCTAssertEqual(card.id, "lunch")
        XCTAssertEqual(card.plugin, "lunch")
        XCTAssertEqual(card.title, "午饭 🍱")
        XCTAssertEqual(card.image?.url, "https://example.org/lunch.png")
        XCTAssertEqual(card.buttons?.map(\.label), ["🍕 Pizza", "寿司", "Close"])
        XCTAssertEqual(card.button("Close")?.only, ["Tom"])
        XCTAssertEqual(message.content.text, "午饭 🍱\nno clicks yet\n[🍕 Pizza] [寿司] [Close]")

        // Jerry clicks 寿司 with his SDK: both see the card edited in place.
        let jerryConversation = jerry.conversation(conversation.id)
        try await jerryConversation.click(card, button: try XCTUnwrap(card.button("寿司")))
        for log in logs {
            let edited = try await log.next("the card's edit") { event -> IMMessage? in
                if case .edited(let m) = event { return m }
                return nil
            }
            XCTAssertEqual(edited.id, message.id)
            XCTAssertEqual(Card(message: edited)?.text, "1 click(s), last: Jerry 寿司")
        }

        // Forged clicks: a made-up token, Pizza's token with another value, Tom's button by Jerry.
        let pizza = try XCTUnwrap(card.button("🍕 Pizza"))
        let close = try XCTUnwrap(card.button("Close"))
        try await jerryConversation.sendCardAction(
            card: card.id, plugin: card.plugin, action: "click", value: "pizza", token: "AAAAAAAAAAAAAAAAAAAAAA")
        try await jerryConversation.sendCardAction(
            card: card.id, plugin: card.plugin, action: "click", value: "free lunch", token: pizza.token ?? "")
        try await jerryConversation.click(card, button: close)
        // Tom may close it; the forged clicks before his never counted.
        try await conversation.click(card, button: close)
        let closed = try await logs[1].next("the closing edit") { event -> Card? in
            if case .edited(let m) = event { return Card(message: m) }
            return nil
        }
        XCTAssertEqual(closed.text, "closed by Tom")
        XCTAssertTrue(closed.buttons?.allSatisfy { $0.disabled == true && $0.token == nil } == true, "\(closed)")
        let disabled = try XCTUnwrap(closed.button("寿司"))
        do {
            try await jerryConversation.click(closed, button: disabled)
            XCTFail("a disabled button cannot be clicked")
        } catch {
            XCTAssertEqual(error.code, IMClientErrorCode.invalidArgument.rawValue)
        }
        // History keeps the card as it is now.
        let history = try await conversation.messages(limit: 5)
        XCTAssertEqual(history.compactMap { Card(message: $0)?.text }, ["closed by Tom"])
    }
}
