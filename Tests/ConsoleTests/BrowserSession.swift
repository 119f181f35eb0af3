import Foundation
import XCTest

extension XCTestCase {
    /// Skips the test when headless Chromium and chromedriver are missing; on CI, which installs them
    /// (`make browser`, part of `make test`), fails it instead.
    func requireBrowser() throws {
        guard WebDriver.isInstalled else {
            if ProcessInfo.processInfo.environment["CI"] != nil { XCTFail("chromium and chromedriver are not installed") }
            throw XCTSkip("chromium and chromedriver are not installed; run `make browser`")
        }
    }

    /// Runs `body` in a new headless browser of `width`×`height` and quits the browser after it; when `body`
    /// throws, the page as it was is saved as `<screenshot>-failure.png` among the console screenshots first.
    func withBrowser(
        width: Int = 1280, height: Int = 800, screenshot: String, _ body: (WebDriver) async throws -> Void
    ) async throws {
        let browser = try await WebDriver.start(width: width, height: height)
        do {
            try await body(browser)
        } catch {
            let shot = ConsoleBrowserTests.screenshots.appendingPathComponent("\(screenshot)-failure.png")
            try? FileManager.default.createDirectory(at: shot.deletingLastPathComponent(), withIntermediateDirectories: true)
            try? (try? await browser.screenshot())?.write(to: shot)
            await browser.quit()
            throw error
        }
        await browser.quit()
    }
}

extension WebDriver {
    /// Opens the console of `harness` with its admin token in the address, as `hookbot run` prints it.
    func openAsAdmin(_ harness: ConsoleHarness) async throws {
        try await open("\(harness.base)/#token=\(harness.console.token)")
    }

    /// Fills in the chat's login form with `clientID` and submits it.
    func logIn(as clientID: String) async throws {
        try await type(clientID, into: "#login-client-id")
        try await click("#login-button")
    }

    /// Types `text` into the open conversation's message box and clicks Send, as a member does.
    func sendFromComposer(_ text: String) async throws {
        try await type(text, into: "#composer-text")
        try await click("#send-button")
    }

    /// Opens the console of `harness` (with its admin token in the address unless `adminToken` is false), logs
    /// in as `clientID` and waits until the lobby is open and its composer enabled. (The title reads "No
    /// conversation open" before, so a title alone does not say the lobby opened.)
    func logIntoLobby(_ harness: ConsoleHarness, as clientID: String = "Tom", adminToken: Bool = true) async throws {
        if adminToken { try await openAsAdmin(harness) } else { try await open("\(harness.base)/") }
        try await logIn(as: clientID)
        try await waitUntil(
            "the lobby to open, ready to send",
            """
            return (document.querySelector('#conversation-title')?.textContent || '').includes(arguments[0])
              && !document.querySelector('#composer-text').disabled && !document.querySelector('#send-button').disabled
            """, [harness.hub.bot.configuration.server.lobbyName])
    }
}
