import BotHost
import Foundation
import HookbotTestSupport
import IMClient
import XCTest

/// The message trace in a real headless Chromium: a member's message blocked by a real plugin, clicked in
/// the chat, shows the plugin and the reason; the Interception tab lists it among the recent verdicts.
final class ConsoleTraceTests: XCTestCase {
    func testTheTraceOfABlockedMessageSaysWhichPluginAndWhy() async throws {
        try requireBrowser()
        let harness = try await startConsole()
        try await withBrowser(screenshot: "trace") { try await exercise($0, harness) }
    }

    private func exercise(_ browser: WebDriver, _ harness: ConsoleHarness) async throws {
        try await browser.logIntoLobby(harness)

        // Jerry, on the SDK, says hello first; then Tom's message is refused.
        let (jerry, lobby, _) = try await harness.lobbyMember("Jerry")
        addTeardownBlock(releasing: jerry) { await $0.close() }
        _ = try await lobby.send(.text("大家好 👋"))
        let blockedText = "看这个 scam 🎁"
        try await browser.sendFromComposer(blockedText)
        try await browser.waitUntil(
            "the blocked message",
            "return document.querySelector('#messages .message.blocked .error-code')?.textContent.includes('4402') === true")

        // A click on it opens its trace: the plugin, the reason, the hook's verdict and time.
        try await browser.click("#messages .message.blocked .message-text")
        try await browser.waitUntil(
            "the trace of the blocked message",
            "return document.querySelector('#trace-detail .trace-decided-by')?.textContent === 'moderation'")
        let reason = try await browser.text("#trace-detail .trace-reason")
        XCTAssertTrue(reason.contains("scam links are not allowed here"), reason)
        let title = try await browser.text("#trace-detail .trace-title")
        XCTAssertTrue(title.contains(blockedText), title)
        let hook =
            try await browser.script(
                """
                const step = [...document.querySelectorAll('#trace-detail .trace-step')].find(s => s.dataset.kind === 'hook');
                return step ? [step.querySelector('.trace-step-plugin')?.textContent, step.querySelector('.trace-step-hook')?.textContent,
                  step.querySelector('.trace-step-text')?.textContent, step.querySelector('.trace-step-time')?.textContent] : null
                """) as? [String]
        XCTAssertEqual(hook?.prefix(3), ["moderation", "moderation", "block: scam links are not allowed here (appCode 17)"])
        XCTAssertTrue(hook?.last?.hasSuffix("s") == true, "\(hook ?? [])")
        // The list marks it blocked; Jerry's greeting is there too, not blocked.
        try await browser.waitUntil(
            "the list with both messages",
            """
            const rows = [...document.querySelectorAll('#trace-list .trace-row')];
            const row = (text) => rows.find(r => r.querySelector('.trace-row-text')?.textContent === text);
            return row(arguments[0])?.classList.contains('blocked') === true && row(arguments[1])?.classList.contains('blocked') === false
            """, [blockedText, "大家好 👋"])

        // A message that was delivered opens by its id.
        try await browser.waitUntil(
            "Jerry's greeting in the chat",
            "return [...document.querySelectorAll('#messages .message')].some(m => m.dataset.mid && m.dataset.from === 'Jerry')")
        try await browser.script(
            "[...document.querySelectorAll('#messages .message')].find(m => m.dataset.from === 'Jerry').querySelector('.message-text').click()"
        )
        try await browser.waitUntil(
            "the greeting's trace",
            "return (document.querySelector('#trace-detail .trace-title')?.textContent || '').includes(arguments[0])", ["大家好 👋"])
        let greeting = try await browser.text("#trace-detail .trace-facts")
        XCTAssertTrue(greeting.contains("allowed"), greeting)

        // Interception: the recent verdicts, the blocked one marked with its plugin and reason.
        try await browser.click("#trace-close")
        try await browser.click("#tab-interception")
        try await browser.waitUntil(
            "the recent verdicts",
            """
            const row = [...document.querySelectorAll('#recent-verdicts tbody tr')].find(r => r.textContent.includes(arguments[0]));
            return !!row && row.classList.contains('blocked') && row.textContent.includes('moderation')
              && row.textContent.includes('scam links are not allowed here')
            """, [blockedText])

        let severe = try await browser.consoleLog().filter { ($0["level"] as? String) == "SEVERE" }
        // The refused send itself is not a page error; anything else is.
        XCTAssertEqual(severe.map { $0["message"] as? String ?? "" }.filter { !$0.contains("4402") }, [], "errors in the browser console")
    }
}
