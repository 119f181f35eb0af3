import BotHost
import IMCore
import XCTest

final class TOMLParserTests: XCTestCase {
    func testParsesTheConfigSubset() throws {
        let text = #"""
        # hookbot.toml
        client_id = "modbot"   # trailing comment
        port = 8_080
        ratio = 0.5
        enabled = true
        words = [
          "darn",   # words to block
          'heck',
        ]

        [plugins.moderation]
        mute_minutes = 10
        limits = { links = 2, mentions = 5 }

        [plugins."auto reply"]
        faq = """
        Q: hours?
        A: always"""

        [[plugins.autoreply.rules]]
        match = "^hi"
        reply = "hello {from}\u0021"

        [[plugins.autoreply.rules]]
        match = "bye"
        """#
        let config = try TOMLParser.parse(text)
        XCTAssertEqual(config["client_id"], "modbot")
        XCTAssertEqual(config["port"], 8080)
        XCTAssertEqual(config["ratio"], 0.5)
        XCTAssertEqual(config["enabled"], true)
        XCTAssertEqual(config["words"], ["darn", "heck"])
        let plugins = try XCTUnwrap(config["plugins"])
        XCTAssertEqual(plugins["moderation"]?["mute_minutes"], 10)
        XCTAssertEqual(plugins["moderation"]?["limits"], ["links": 2, "mentions": 5])
        XCTAssertEqual(plugins["auto reply"]?["faq"], "Q: hours?\nA: always")
        XCTAssertEqual(plugins["autoreply"]?["rules"], [["match": "^hi", "reply": "hello {from}!"], ["match": "bye"]])
    }

    func testErrorsNameTheLine() {
        func failure(_ text: String) -> TOMLParser.ParseError? {
            do { _ = try TOMLParser.parse(text); return nil } catch { return error }
        }
        XCTAssertEqual(failure("a = 1\nb = \"open")?.line, 2)
        XCTAssertEqual(failure("a = 1\na = 2")?.message, "duplicate key 'a'")
        XCTAssertEqual(failure("[x]\ny = nope")?.line, 2)
        XCTAssertEqual(failure("a = [1, 2")?.message, "expected ',' or ']' in array")
        XCTAssertEqual(failure("a = 1 2")?.message, "unexpected text after value")
        XCTAssertNotNil(failure("a = 1\n[a]"))
    }

    func testPathsAreRelativeToTheFileUnlessAbsolute() throws {
        let base = URL(fileURLWithPath: "/etc/hookbot")
        let relative = try BotConfiguration.parse("[plugins]\ndirectory = \"plugins\"\n[bot]\nstate = \"s.sqlite\"", relativeTo: base)
        XCTAssertEqual(relative.pluginsDirectory.path, "/etc/hookbot/plugins")
        XCTAssertEqual(relative.statePath, "/etc/hookbot/s.sqlite")
        let absolute = try BotConfiguration.parse("[plugins]\ndirectory = \"/srv/plugins\"\n[server]\ndb = \"/var/h.sqlite\"", relativeTo: base)
        XCTAssertEqual(absolute.pluginsDirectory.path, "/srv/plugins")
        XCTAssertEqual(absolute.serverDatabase, "/var/h.sqlite")
    }

    func testTheInterceptionDeadlineMustLeaveRoomForAReview() throws {
        let tooShort = try BotConfiguration.parse("[server]\ninterception_deadline_ms = 20")
        XCTAssertThrowsError(try tooShort.validate()) { error in
            XCTAssertTrue("\(error)".contains("server.interception_deadline_ms"), "\(error)")
        }
        let shipped = BotConfiguration()
        XCTAssertNoThrow(try shipped.validate())
        XCTAssertEqual(shipped.reviewBudget, .milliseconds(160), "200 ms less a 20% margin")
        var long = shipped
        long.interceptionDeadlineMillis = 50
        XCTAssertEqual(long.reviewBudget, .milliseconds(30), "at least 20 ms of margin")
    }
}
