import BotHost
import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import XCTest

/// Schedules in the console, on the demo's shipped plugins: Tom's `!remind` in the lobby is answered, rings
/// two seconds later, and a repeating reminder is listed by `GET /api/schedules`, shown under Plugins in a
/// real headless Chromium and cancelled there.
final class ConsoleScheduleTests: XCTestCase {
    /// The next message from the bot in the lobby, skipping Tom's own and the welcome plugin's greeting.
    private func botSays(_ events: EventLog, _ lobby: String) async throws -> String {
        while true {
            let m = try await events.message(in: lobby, timeout: .seconds(10))
            let text = m.content.text ?? ""
            if m.from != "Tom" && !text.hasPrefix("Welcome") { return text }
        }
    }

    private func jobs(_ harness: ConsoleHarness) async throws -> [[String: Any]] {
        let answer = try await harness.admin("GET", "/api/schedules")
        XCTAssertEqual(answer.status, 200, answer.text)
        let plugins = try answer.object()["plugins"] as? [[String: Any]] ?? []
        return plugins.filter { $0["plugin"] as? String == "reminders" }.flatMap { $0["jobs"] as? [[String: Any]] ?? [] }
    }

    func testRemindersRingAreListedAndCancelledInTheConsole() async throws {
        let harness = try await ConsoleHarness.startDemo()
        addTeardownBlock(releasing: harness) { await $0.stop() }
        let lobbyID = harness.hub.lobbyID
        let (tom, lobby, events) = try await harness.lobbyMember("Tom")
        addTeardownBlock(releasing: tom) { await $0.close() }

        _ = try await lobby.send(.text("!remind me in 2s drink water 🥤"))
        let set = try await botSays(events, lobbyID)
        XCTAssertTrue(set.hasPrefix("OK, reminder #1 at ") && set.hasSuffix("(UTC): drink water 🥤"), set)
        let rang = try await botSays(events, lobbyID)
        XCTAssertEqual(rang, "⏰ @Tom reminder: drink water 🥤")

        _ = try await lobby.send(.text("!remind here 每天 9:00 站会"))
        let daily = try await botSays(events, lobbyID)
        XCTAssertEqual(daily, "好的，提醒 #2：每天 09:00（UTC）站会")
        let listed = try await jobs(harness)
        XCTAssertEqual(listed.count, 1, "\(listed)")
        XCTAssertEqual(listed.first?["id"] as? String, "2")
        XCTAssertEqual(listed.first?["kind"] as? String, "cron")
        XCTAssertEqual(listed.first?["spec"] as? String, "0 9 * * *")
        XCTAssertEqual(listed.first?["fn"] as? String, "remind")
        XCTAssertEqual((listed.first?["data"] as? [String: Any])?["text"] as? String, "站会")
        let unknown = try await harness.admin("DELETE", "/api/schedules/reminders/99")
        XCTAssertEqual(unknown.status, 404, unknown.text)
        let anonymous = try await harness.http("GET", "/api/schedules")
        XCTAssertEqual(anonymous.status, 401)

        try requireBrowser()
        try await withBrowser(width: 1280, height: 900, screenshot: "schedules") { browser in
            try await browser.openAsAdmin(harness)
            try await browser.click("#tab-plugins")
            let row = "#schedule-rows tr[data-plugin=\"reminders\"][data-id=\"2\"]"
            try await browser.waitUntil(
                "the reminder listed under Plugins",
                """
                const row = document.querySelector(arguments[0]);
                return !!row && row.textContent.includes('cron 0 9 * * *') && row.textContent.includes('站会')
                  && !!row.querySelector('.schedule-cancel')
                """, [row])
            _ = try await browser.script("document.querySelector('#schedules').scrollIntoView()")
            try FileManager.default.createDirectory(at: ConsoleBrowserTests.screenshots, withIntermediateDirectories: true)
            try await browser.screenshot().write(to: ConsoleBrowserTests.screenshots.appendingPathComponent("console-schedules.png"))
            try await browser.click("\(row) .schedule-cancel")
            try await browser.waitUntil(
                "the list empty after the cancel",
                "return !document.querySelector(arguments[0]) && !document.querySelector('#schedules-empty').hidden",
                [row])
        }
        let left = try await jobs(harness)
        XCTAssertEqual(left.count, 0, "\(left)")
        _ = try await lobby.send(.text("!remind list"))
        let none = try await botSays(events, lobbyID)
        XCTAssertEqual(none, "You have no reminders.")
    }
}
