import BotHost
import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import XCTest

/// The Moderation tab and the plugin settings dialog in a real headless Chromium, on the demo's shipped
/// plugins: Tom's scams get him muted, a click on Undo lets him talk again, and a word added in the form
/// refuses his next message.
final class ConsoleModerationTests: XCTestCase {
    func testUndoInThePageAndARuleEditedInTheForm() async throws {
        try requireBrowser()
        let (harness, scratch) = try await ModerationAPITests.demo()
        defer { try? FileManager.default.removeItem(at: scratch) }
        addTeardownBlock(releasing: harness) { await $0.stop() }
        try await withBrowser(height: 900, screenshot: "moderation") { try await exercise($0, harness) }
    }

    private func save(_ browser: WebDriver, _ name: String) async throws {
        try FileManager.default.createDirectory(at: ConsoleBrowserTests.screenshots, withIntermediateDirectories: true)
        try await browser.screenshot().write(to: ConsoleBrowserTests.screenshots.appendingPathComponent(name))
    }

    private func exercise(_ browser: WebDriver, _ harness: ConsoleHarness) async throws {
        let (tom, lobby) = try await ModerationAPITests.getMuted(harness)
        let listed = try await harness.admin("GET", "/api/moderation/actions?target=Tom&action=mute").object()
        let id = try XCTUnwrap((listed["actions"] as? [[String: Any]])?.first?["id"] as? String, "\(listed)")

        try await browser.openAsAdmin(harness)
        try await browser.click("#tab-moderation")
        let row = "#mod-rows tr[data-id=\"\(id)\"]"
        try await browser.waitUntil(
            "Tom's mute listed",
            """
            const row = document.querySelector(arguments[0]);
            return !!row && row.dataset.target === 'Tom' && row.textContent.includes('mute') && !!row.querySelector('.mod-undo')
            """, [row])
        // The filters narrow the list on the server.
        try await browser.type("Jerry", into: "#mod-target")
        try await browser.waitUntil("no row for Jerry", "return document.querySelectorAll('#mod-rows tr').length === 0")
        _ = try await browser.script(
            "const input = document.querySelector('#mod-target'); input.value = 'Tom'; input.dispatchEvent(new Event('input', {bubbles: true}))"
        )
        try await browser.waitUntil("Tom's rows again", "return !!document.querySelector(arguments[0] + ' .mod-undo')", [row])

        try await browser.click("\(row) .mod-undo")
        try await browser.waitUntil(
            "the row to say it was undone",
            "return (document.querySelector(arguments[0])?.textContent || '').includes('undone by console')",
            [row])
        try await save(browser, "console-moderation.png")
        try await eventuallySending("thanks 🙏 我会注意的", in: lobby, accepted: true, "Tom to talk again")

        // The settings form: moderation's words as JSON; saved, checked and applied with a reload.
        try await browser.click("#tab-plugins")
        try await browser.click(#"[data-plugin="moderation"] .plugin-config"#)
        try await browser.waitUntil("the words field", "return !!document.querySelector('#config-words')")
        _ = try await browser.script(#"document.querySelector('#config-max_links').value = 'lots'"#)
        try await browser.click("#config-save")
        try await browser.waitUntil(
            "the field's error", "return (document.querySelector('.field-error[data-key=\"max_links\"]')?.textContent || '').length > 0")
        try await save(browser, "console-config.png")
        _ = try await browser.script(
            #"""
            document.querySelector('#config-max_links').value = '3';
            document.querySelector('#config-words').value = '["scam", "forbidden", "菠菜"]';
            """#)
        try await browser.click("#config-save")
        try await browser.waitUntil("the dialog to close after saving", "return !document.querySelector('#config-dialog').open")
        try await lobby.sendRefused("有人卖菠菜吗? 🥬")
        let severe = try await browser.consoleLog().filter { ($0["level"] as? String) == "SEVERE" }
        XCTAssertEqual(severe.map { $0["message"] as? String ?? "" }, [], "errors in the browser console")
        await tom.close()
    }
}
