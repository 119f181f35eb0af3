import BotHost
import Foundation
import HookbotTestSupport
import IMClient
import XCTest

/// The console in a real headless Chromium (WebDriver), against the demo `make run` starts: the
/// repository's `hookbot.toml` and shipped plugins on an embedded server.
final class ConsoleBrowserTests: XCTestCase {
    /// Where screenshots go (`HOOKBOT_SCREENSHOTS` to choose; the README's comes from here).
    static var screenshots: URL {
        if let chosen = ProcessInfo.processInfo.environment["HOOKBOT_SCREENSHOTS"] { return URL(fileURLWithPath: chosen) }
        return ConsoleHarness.repository.appendingPathComponent(".build/console-screenshots")
    }

    func testChatBlockedMessageAndPluginReloadInTheBrowser() async throws {
        try requireBrowser()
        let harness = try await ConsoleHarness.startDemo()
        let browser = try await WebDriver.start(width: 1280, height: 800)
        do {
            try await exercise(browser, harness)
        } catch {
            try? save(await browser.screenshot(), as: "console-failure.png")
            await browser.quit()
            await harness.stop()
            throw error
        }
        await browser.quit()
        try await phone(harness)
        await harness.stop()
    }

    private func exercise(_ browser: WebDriver, _ harness: ConsoleHarness) async throws {
        try await browser.openAsAdmin(harness)
        try await browser.logIn(as: "Tom")
        try await browser.waitUntil(
            "Tom to be logged in",
            """
            return document.querySelector('#current-user')?.textContent.includes('Tom') === true
            """)
        try await browser.waitUntil(
            "the lobby to open",
            """
            return (document.querySelector('#conversation-title')?.textContent || '').includes(arguments[0])
            """, [harness.hub.bot.configuration.server.lobbyName])

        // ping → the shipped autoreply answers.
        try await browser.sendFromComposer("ping")
        try await browser.waitUntil(
            "the bot's pong",
            """
            return [...document.querySelectorAll('#messages .message')].some(m =>
              m.dataset.from === arguments[0] && m.querySelector('.message-text')?.textContent.trim() === 'pong, Tom!')
            """, [harness.hub.bot.configuration.clientID])

        // A blocked word: the page shows the code and reason the sender got.
        let blockedText = "this is a scam"
        try await browser.sendFromComposer(blockedText)
        try await browser.waitUntil(
            "the blocked message",
            """
            return document.querySelector('#messages .message.blocked .error-code')?.textContent.includes('4402') === true
            """)
        let shownReason = try await browser.text("#messages .message.blocked .error-reason")
        let shownAppCode = try await browser.text("#messages .message.blocked .error-appcode")
        // What an SDK client sending the same text is told: the page must show the same.
        let (jerry, lobby, _) = try await harness.lobbyMember("Jerry")
        let refusal = try await lobby.sendRefused(blockedText)
        let reason = refusal.detail ?? refusal.reason
        XCTAssertFalse(reason.isEmpty)
        XCTAssertTrue(shownReason.contains(reason), "page shows \(shownReason), the sender got \(reason)")
        XCTAssertTrue(shownAppCode.contains(String(refusal.appCode ?? -1)), "page shows \(shownAppCode)")
        await jerry.close()
        try save(await browser.screenshot(), as: "console-chat.png")

        // The plugins panel: reload autoreply and see its generation change.
        try await browser.click("#tab-plugins")
        let generationSelector = #"[data-plugin="autoreply"] .plugin-generation"#
        _ = try await browser.element(generationSelector)
        let before = try await harness.plugin("autoreply")["generation"] as? Int ?? -1
        try await browser.waitUntil(
            "the panel to show generation \(before)",
            """
            return document.querySelector(arguments[0])?.textContent.trim() === String(arguments[1])
            """, [generationSelector, before])
        try await browser.click(#"[data-plugin="autoreply"] .plugin-reload"#)
        try await browser.waitUntil(
            "the panel to show generation \(before + 1)",
            """
            return document.querySelector(arguments[0])?.textContent.trim() === String(arguments[1])
            """, [generationSelector, before + 1])
        let after = try await harness.plugin("autoreply")["generation"] as? Int
        XCTAssertEqual(after, before + 1)
        try save(await browser.screenshot(), as: "console-plugins.png")

        // The log and interception panels render what the API returns.
        try await browser.click("#tab-log")
        try await browser.waitUntil("log entries", "return document.querySelectorAll('#log-entries .log-entry').length > 0")
        try await browser.click("#tab-interception")
        try await browser.waitUntil(
            "the interception summary",
            """
            return (document.querySelector('#interception-summary')?.textContent || '').trim().length > 0
            """)
        // Every tab and the trace drawer load (each is an ES module of its own; a module that fails to load or
        // link stops the page, and one that throws shows in the browser's log below).
        try await browser.click("#tab-moderation")
        try await browser.click("#tab-chat")
        try await browser.click("#trace-button")
        try await browser.waitUntil(
            "the bot's counters, the moderation log and the trace drawer",
            """
            const text = (selector) => document.querySelector(selector)?.textContent || ''
            return text('#bot-stats').includes('stored messages the plugins saw') && text('#mod-summary').includes('match')
              && text('#trace-count').includes('of the last')
            """)
        let modules =
            try await browser.script(
                """
                return performance.getEntriesByType('resource').map(r => r.name.split('/').pop()).filter(n => n.endsWith('.js'))
                """) as? [String] ?? []
        XCTAssertTrue(
            ["console.js", "protocol.js", "state.js", "api.js", "trace.js", "moderation.js"].allSatisfy(modules.contains),
            "modules loaded: \(modules)")

        let severe = try await browser.consoleLog().filter { ($0["level"] as? String) == "SEVERE" }
        XCTAssertEqual(severe.map { $0["message"] as? String ?? "" }, [], "errors in the browser console")
    }

    /// At phone width the chat fits the screen, in a browser of its own (the tab's login is per tab).
    private func phone(_ harness: ConsoleHarness) async throws {
        let browser = try await WebDriver.start(width: 390, height: 844)
        do {
            try await browser.open("\(harness.base)/")
            try await browser.logIn(as: "Jerry")
            try await browser.waitUntil(
                "the chat at phone width",
                """
                const panel = document.querySelector('#panel-chat');
                return !!panel && !panel.hidden && document.documentElement.scrollWidth <= window.innerWidth
                  && (document.querySelector('#conversation-title')?.textContent || '').length > 0
                """)
            try save(await browser.screenshot(), as: "console-phone.png")
        } catch {
            await browser.quit()
            throw error
        }
        await browser.quit()
    }

    private func save(_ png: Data, as name: String) throws {
        try FileManager.default.createDirectory(at: Self.screenshots, withIntermediateDirectories: true)
        try png.write(to: Self.screenshots.appendingPathComponent(name))
    }
}
