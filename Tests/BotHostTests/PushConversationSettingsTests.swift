import BotHost
import BotHub
import Foundation
import IMCore
import IMServer
import XCTest

/// `[push.conversations."<cid>"]` in hookbot.toml: per-conversation template overrides, checked at load with
/// file, line and key, and handed to the server's `PushConfiguration.conversations`.
final class PushConversationSettingsTests: XCTestCase {
    private func parse(_ text: String) throws -> BotConfiguration {
        try BotConfiguration.parse(text, relativeTo: FileManager.default.temporaryDirectory)
    }

    func testConversationOverridesAreReadCheckedAndReachTheServer() throws {
        let bot = try parse(
            """
            [push.templates]
            text = "{from}: {text}"

            [push.conversations."65f0c0ffee"]
            text = "[ops] {from}: {text}"
            image = "[ops] {from} sent a photo"
            7 = "{from} sent a sticker"
            title = ""

            [push.conversations.quiet-room]
            enabled = false
            """)
        XCTAssertEqual(bot.push.conversationTemplates.keys.sorted(), ["65f0c0ffee", "quiet-room"])
        var server = PushConfiguration()
        server.apply(bot.push)
        let ops = try XCTUnwrap(server.conversations["65f0c0ffee"])
        XCTAssertEqual(ops.byType, [-1: "[ops] {from}: {text}", -2: "[ops] {from} sent a photo", 7: "{from} sent a sticker"])
        XCTAssertEqual(ops.title, .some(nil), "an empty title leaves it out")
        XCTAssertNil(ops.enabled)
        XCTAssertEqual(server.conversations["quiet-room"]?.enabled, false)

        let cases = [
            ("[push.conversations.c1]\ntxt = \"x\"", "hookbot.toml:2: push.conversations.c1.txt: unknown key (known: audio, file, image"),
            ("[push.conversations.c1]\ntext = \"\"", "hookbot.toml:2: push.conversations.c1.text: must be a template"),
            ("[push.conversations.c1]\nenabled = \"no\"", "hookbot.toml:2: push.conversations.c1.enabled: must be true or false"),
            ("[push.conversations.c1]\ntitle = 3", "hookbot.toml:2: push.conversations.c1.title: must be a string"),
            ("[push.conversations]\nc1 = \"x\"", "push.conversations.c1: must be a table"),
        ]
        for (text, expected) in cases {
            XCTAssertThrowsError(try parse(text), text) { error in
                XCTAssertTrue("\(error)".contains(expected), "\(text)\n→ \(error)\nexpected: \(expected)")
            }
        }
    }
}
