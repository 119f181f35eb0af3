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
