import BotHost
import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import XCTest

/// Cards in the console (cards.js): a bot's card renders with its buttons in headless Chromium; a click
/// there is a signed cmd message that reaches the plugin's `on_action`, and the card's edit re-renders it
/// on screen. Forged clicks from another member's SDK (a made-up token, a button meant for Tom) are
/// refused: the card does not move, and `/metrics` counts them.
final class ConsoleCardTests: XCTestCase {
    static let lunch = """
        return {
          name = "lunch",
          on_receive = function(msg, ctx)
            if msg.text == "!lunch" then
              ctx.card{ id = "lunch", title = "午饭 🍱", text = "no clicks yet",
                fields = { { name = "by", value = msg.from, inline = true } },
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

    func testACardClickedInTheBrowserReachesOnActionAndTheCardUpdates() async throws {
        try requireBrowser()
        let harness = try await startConsole(plugins: ["lunch.lua": Self.lunch])
        let (jerry, lobby, jerryEvents) = try await harness.lobbyMember("Jerry")
        addTeardownBlock(releasing: jerry) { await $0.close() }
        try await withBrowser(width: 1280, height: 800, screenshot: "card") { browser in
            try await browser.logIntoLobby(harness)
            try await browser.sendFromComposer("!lunch")
            try await browser.waitUntil(
                "the card with its buttons",
                """
                const card = document.querySelector('.message .card[data-card-id="lunch"]');
                return !!card && card.querySelector('.card-title')?.textContent === '午饭 🍱'
                  && card.querySelector('.card-text')?.textContent === 'no clicks yet'
                  && card.querySelector('.card-field dd')?.textContent === 'Tom'
                  && [...card.querySelectorAll('.card-buttons button')].map((b) => b.textContent).join('|') === '🍕 Pizza|寿司|Close'
                  && [...card.querySelectorAll('.card-buttons button')].every((b) => !b.disabled)
                """)
            try await browser.click(#".card[data-card-id="lunch"] button[data-card-value="sushi"]"#)
            try await browser.waitUntil(
                "the card updated in place",
                """
                const cards = document.querySelectorAll('.card[data-card-id="lunch"]');
                return cards.length === 1 && cards[0].querySelector('.card-text')?.textContent === '1 click(s), last: Tom 寿司'
                """)

            // Jerry's forged clicks (a made-up token; Tom's Close button with its real token) are refused.
            let message = try await jerryEvents.next("the card") { event -> IMMessage? in
                if case .message(let m) = event, Card(message: m) != nil { return m }
                return nil
            }
            let card = try XCTUnwrap(Card(message: message))
            try await lobby.sendCardAction(
                card: card.id, plugin: card.plugin, action: "click", value: "pizza", token: "AAAAAAAAAAAAAAAAAAAAAA")
            try await lobby.click(card, button: try XCTUnwrap(card.button("Close")))
            try await eventually("the refused clicks to be counted") {
                let text = try await harness.http("GET", "/metrics").text
                return text.contains(#"hookbot_card_clicks_total{result="refused"} 2"#)
            }
            let text = try await browser.script("return document.querySelector('.card[data-card-id=\"lunch\"] .card-text').textContent")
            XCTAssertEqual(text as? String, "1 click(s), last: Tom 寿司")

            // A look-alike card Jerry posts (with the real card's tokens) is shown, but not clickable.
            var fake = try XCTUnwrap(message.content.typedMessage?.attributes?["card"]?.objectValue)
            fake["id"] = "fake"
            _ = try await lobby.send(.typed(TypedMessage(type: Card.messageType, text: "free lunch", attributes: ["card": .object(fake)])))
            try await browser.waitUntil(
                "Jerry's look-alike card, not clickable",
                """
                const card = document.querySelector('.card[data-card-id="fake"]');
                return !!card && card.querySelectorAll('button').length === 3 && [...card.querySelectorAll('button')].every((b) => b.disabled)
                """)

            // Tom closes it from the browser: the buttons are disabled on screen.
            try await browser.click(#".card[data-card-id="lunch"] button[data-card-action="close"]"#)
            try await browser.waitUntil(
                "the closed card",
                """
                const card = document.querySelector('.card[data-card-id="lunch"]');
                return card?.querySelector('.card-text')?.textContent === 'closed by Tom'
                  && [...card.querySelectorAll('button')].every((b) => b.disabled)
                """)
        }
    }
}
