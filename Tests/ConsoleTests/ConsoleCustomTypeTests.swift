import BotHost
import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import XCTest

/// A registered custom type sent from the console's composer reaches the plugin with its fields where
/// plugins read them (`msg.attrs`, checked by `ctx.types.validate`), the plugin's answer of the same type
/// comes back to the page with its fields, and an SDK member reads the console's message in `_lcattrs`, as
/// the Swift SDK's custom types (examples/CustomTypes) send them.
final class ConsoleCustomTypeTests: XCTestCase {
    static let linkcard = """
        return {
          name = "linkcard",
          on_load = function(ctx)
            ctx.types.register({ type = 3, name = "linkcard", fields = { url = "string", title = "string", summary = "string?" } })
          end,
          moderation = function(msg, ctx)
            if msg.type_name ~= "linkcard" then return nil end
            local ok, why = ctx.types.validate(msg)
            if not ok then return ctx.block("invalid link card: " .. why) end
          end,
          on_receive = function(msg, ctx)
            if msg.type_name ~= "linkcard" then return end
            ctx.reply(ctx.types.build("linkcard", { url = msg.attrs.url, title = "转发: " .. msg.attrs.title },
              { text = msg.from .. " shared " .. msg.attrs.title }))
          end,
        }
        """

    func testACustomTypeGoesFromTheConsoleToThePluginAndBack() async throws {
        try requireBrowser()
        let harness = try await startConsole(plugins: ["linkcard.lua": Self.linkcard])
        try await withBrowser(screenshot: "custom-type") { try await exercise($0, harness) }
    }

    private func exercise(_ browser: WebDriver, _ harness: ConsoleHarness) async throws {
        let (jerry, lobby, _) = try await harness.lobbyMember("Jerry")
        addTeardownBlock(releasing: jerry) { await $0.close() }
        try await browser.logIntoLobby(harness, adminToken: false)

        // The composer's form for the registered type, filled in as a member would.
        try await browser.script(
            "const kind = document.querySelector('#composer-kind'); kind.value = 'custom'; kind.dispatchEvent(new Event('change'))")
        try await browser.waitUntil(
            "the linkcard form", "return !!document.querySelector('#composer-custom-fields [data-field=\"title\"]')")
        let url = "https://example.com/菜单?day=1"
        try await browser.type(url, into: "#composer-custom-fields [data-field=\"url\"]")
        try await browser.type("午饭菜单 🍜", into: "#composer-custom-fields [data-field=\"title\"]")
        try await browser.click("#send-button")

        // Accepted by the plugin's moderation (validate saw the fields), answered with a link card of its own.
        try await browser.waitUntil(
            "the plugin's link card",
            """
            return [...document.querySelectorAll('#messages .message')].some(m => m.dataset.from === arguments[0]
              && [...m.querySelectorAll('dd')].some(d => d.textContent === '转发: 午饭菜单 🍜'))
            """, [harness.hub.bot.configuration.clientID])
        let own =
            try await browser.script(
                """
                const m = [...document.querySelectorAll('#messages .message.own')].pop();
                return [m.className, [...m.querySelectorAll('dd')].map(d => d.textContent).join('|'), m.querySelector('.badge')?.textContent]
                """) as? [String]
        XCTAssertEqual(own?[0].contains("blocked"), false, "\(own ?? [])")
        XCTAssertEqual(own?[1], "午饭菜单 🍜|\(url)")
        XCTAssertEqual(own?[2], "linkcard · type 3")
        let reply =
            try await browser.script(
                """
                const m = [...document.querySelectorAll('#messages .message')].filter(m => m.dataset.from === arguments[0]).pop();
                return [m.querySelector('.message-text')?.textContent, [...m.querySelectorAll('dd')].map(d => d.textContent).join('|')]
                """, [harness.hub.bot.configuration.clientID]) as? [String]
        XCTAssertEqual(reply, ["Tom shared 午饭菜单 🍜", "转发: 午饭菜单 🍜|\(url)"])

        // An SDK member reads the console's message as the Swift SDK's custom types do: fields in _lcattrs.
        var sent: TypedMessage?
        try await eventually("Tom's link card in the history") {
            sent = try await lobby.messages(limit: 5).lazy.filter { $0.from == "Tom" }
                .compactMap { TypedMessage.decode($0.content.body) }.first
            return sent != nil
        }
        XCTAssertEqual(sent?.type, 3)
        XCTAssertEqual(sent?.attributes?["title"]?.stringValue, "午饭菜单 🍜")
        XCTAssertEqual(sent?.attributes?["url"]?.stringValue, url)
        XCTAssertEqual(sent?.fields, [:])
    }
}
