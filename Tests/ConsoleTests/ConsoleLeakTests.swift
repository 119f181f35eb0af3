import BotHost
import Console
import Foundation
import HookbotTestSupport
import IMServer
import XCTest

/// A stopped console hub is freed: the console and its webhooks are the server's routes, and they held the bot
/// and the server they show (and, attached in process, the bot's client holds the server), a cycle that kept every
/// stopped hub's threads and files (see `LifecycleLeakTests` in BotHostTests for the server and the bot).
final class ConsoleLeakTests: XCTestCase {
    /// Tom greets the bot in the lobby while the operator looks at the plugins page; then it all stops.
    func testAStoppedConsoleHubIsFreed() async throws {
        try await expectFreed("a console hub") {
            let harness = try await ConsoleHarness.start()
            let (tom, lobby, events) = try await harness.lobbyMember("Tom")
            let answer = try await harness.botAnswer(to: "ping", in: lobby, events)
            XCTAssertEqual(answer, "pong, Tom!")
            let greeter = try await harness.plugin("greeter")
            XCTAssertEqual(greeter["name"] as? String, "greeter")
            let freed = WeakReferences(["server": harness.hub.server, "bot": harness.hub.bot, "console": harness.console])
            await tom.close()
            await harness.stop()
            return { freed.alive }
        }
    }
}
