import Foundation
import IMCore
import XCTest

@testable import HookRuntime

/// The shipped moderation plugin's rules engine on a real engine, with the plugin, `lib/` and the preset
/// word lists copied from `plugins/`: settings that cannot work stop it from loading with the rule and field
/// named, and the benign corpus (`plugins/tests/corpus/benign.txt`) through the default rule set is almost
/// never blocked (the rate is printed).
final class ModerationRulesTests: XCTestCase {
    static let shipped = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("plugins")

    /// A fixture holding the shipped moderation plugin and what it requires.
    private func fixture() throws -> Fixture {
        let f = Fixture()
        try FileManager.default.copyItem(
            at: Self.shipped.appendingPathComponent("moderation.lua"), to: f.plugins.appendingPathComponent("moderation.lua"))
        try f.copyShippedShared()
        return f
    }

    func testRulesThatCannotWorkStopTheLoadWithTheRuleAndFieldNamed() throws {
        func rule(_ fields: [String: JSONValue]) -> JSONValue {
            var r: [String: JSONValue] = ["name": "r1", "trigger": ["keywords": ["x"]]]
            for (k, v) in fields { r[k] = v }
            return .object(r)
        }
        let cases: [(JSONValue, String)] = [
            (
                ["rules": [rule(["actions": ["block", "mutte"]])]],
                "rules[1] (r1).actions: unknown action 'mutte' (known: alert, ban, block"
            ),
            (["rules": [rule(["trigger": ["keywrods": ["x"]]])]], "rules[1] (r1).trigger: unknown trigger 'keywrods' (known: allow, caps"),
            (["rules": [rule(["actions": ["mute"], "mute": "5w"])]], "rules[1] (r1).mute: at most 4 weeks"),
            (["rules": [rule(["actions": ["mute"], "mute": "10x"])]], "rules[1] (r1).mute: '10x' is not a duration"),
            (["rules": [rule(["mute": "1h"])]], "rules[1] (r1).mute: only with the mute action"),
            (["rules": [rule(["colour": "red"])]], "rules[1] (r1): unknown field 'colour'"),
            (["rules": [rule(["name": "two words"])]], "rules[1].name: must be a name of letters, digits"),
            (["rules": [rule([:]), rule([:])]], "rules[2]: a rule named r1 already exists"),
            (["rules": [rule(["name": "flood"])]], "rules[1]: a rule named flood already exists"),
            (
                ["rules": [rule(["trigger": ["links": ["deny": ["https://bit.ly/"]]]])]],
                "rules[1] (r1).trigger.links.deny: 'https://bit.ly/' is not a domain"
            ),
            (
                ["rules": [rule(["trigger": ["caps": ["ratio": 80]]])]],
                "rules[1] (r1).trigger.caps.ratio: must be a fraction between 0 and 1"
            ),
            (
                ["rules": [rule(["trigger": ["duplicates": ["count": 1, "seconds": 60]]])]],
                "rules[1] (r1).trigger.duplicates.count: must be a number of at least 2"
            ),
            (["rules": [rule(["new_members": ["days": 3]])]], "rules[1] (r1).new_members: must be { minutes = n, messages = m }"),
            (["rules": [rule(["trigger": ["allow": ["scampi"]]])]], "rules[1] (r1).trigger.allow: only with keywords, regex or presets"),
            (["rules": [rule(["trigger": ["presets": ["xx/nothing"]]])]], "rules[1] (r1).trigger: "),
            (["rules": [rule(["trigger": ["regex": ["(unclosed"]]])]], "rules[1] (r1).trigger: "),
            (["ladder": ["warn", "mute forever"]], "ladder[2]: 'forever' is not a duration"),
            (["ladder": ["warn", "jail"]], "ladder[2]: 'jail' is not warn, mute [duration], kick or ban"),
            (["ladder": ["mute 30d"]], "ladder[1]: a mute of at most 4 weeks"),
            (["modlog": 3], "modlog: must be a conversation id"),
        ]
        // What the matcher says about a bad preset or regex follows the rule's name.
        for (settings, reason) in [
            (["rules": [rule(["trigger": ["presets": ["xx/nothing"]]])]] as JSONValue, #"preset "xx/nothing": not found"#),
            (["rules": [rule(["trigger": ["regex": ["(unclosed"]]])]], "missing closing parenthesis"),
        ] {
            let f = try fixture()
            let report = f.runtime(config: ["moderation": settings]).loadAll()
            XCTAssertTrue(report.errors.first.map { "\($0)" }?.contains(reason) == true, "\(report.errors)")
        }
        for (settings, expected) in cases {
            let f = try fixture()
            let report = f.runtime(config: ["moderation": settings]).loadAll()
            XCTAssertEqual(report.loaded, [], "\(settings)")
            let error = report.errors.first.map { "\($0)" } ?? ""
            XCTAssertTrue(error.contains("plugins.moderation." + expected), "\(settings): \(error)")
        }
        // The shipped defaults, and a file's worth of valid rules, load.
        let f = try fixture()
        XCTAssertEqual(f.runtime().loadAll().loaded, ["moderation"])
        let good: JSONValue = [
            "ladder": ["warn", "mute 10m", "mute 1d", "mute 4w", "kick", "ban"],
            "rules": [
                rule(["actions": ["delete", "alert"], "conversations": ["lobby"], "exempt_roles": ["manager"], "dry_run": true]),
                [
                    "name": "r2", "trigger": ["links": ["allow": ["example.org"], "max": 3], "mentions": 4, "emoji": 20, "zalgo": 10],
                    "actions": "block", "new_members": ["minutes": 30],
                ],
                ["name": "r3", "trigger": ["rate": ["messages": 10, "seconds": 60]], "actions": ["mute"], "mute": 3600],
            ],
        ]
        let g = try fixture()
        let loaded = g.runtime(config: ["moderation": good]).loadAll()
        XCTAssertEqual(loaded.errors, [])
        XCTAssertEqual(loaded.loaded, ["moderation"])
    }

    /// Every line of the benign corpus through the default rule set (the plugin's defaults, which
    /// hookbot.toml spells out; without its demo `words`), as ordinary members of one busy conversation (50
    /// members in turn, one message a second): the share blocked is printed and must stay under 0.5 %.
    func testTheBenignCorpusIsAlmostNeverBlockedByTheDefaultRules() throws {
        let corpus = Self.shipped.appendingPathComponent("tests/corpus/benign.txt")
        let lines = try String(contentsOf: corpus, encoding: .utf8).split(separator: "\n").map(String.init)
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }
        XCTAssertGreaterThanOrEqual(lines.count, 5000)
        let f = try fixture()
        // A wall-clock deadline to spare: a machine busy with other tests must not turn a slow call into a
        // failure; what is under test is the verdicts.
        var limits = HookLimits.default
        limits.deadline = 5
        let engine = f.runtime(limits: limits)
        XCTAssertEqual(engine.loadAll().errors, [])
        var blocked: [String] = []
        var warned: [String] = []
        for (k, line) in lines.enumerated() {
            f.clock.advance(by: 1)
            let outcome = engine.incoming(
                HookMessage(
                    id: "m\(k)", cid: "lobby", from: "member\(k % 50)", type: MessageType.text.rawValue, text: line,
                    timestamp: Int64(f.clock.now * 1000)))
            XCTAssertEqual(outcome.errors, [])
            if case .block(let reason, _, _) = outcome.moderation.verdict { blocked.append("\(reason): \(line)") }
            if outcome.actions.contains(where: { if case .warn = $0.kind { true } else { false } }) { warned.append(line) }
        }
        let rate = Double(blocked.count) / Double(lines.count) * 100
        print(
            String(
                format: "benign corpus through the default rules: %d messages, %d blocked (%.2f %%), %d warned (%.2f %%)",
                lines.count, blocked.count, rate, warned.count, Double(warned.count) / Double(lines.count) * 100))
        for line in blocked.prefix(20) { print("  blocked: \(line)") }
        XCTAssertLessThan(rate, 0.5, blocked.prefix(20).joined(separator: "\n"))
        // The same rules do stop what they are for, from members who were quiet all along.
        let bad = [
            "FREE NITRO for everyone, claim it now", "h" + String(repeating: "\u{0301}\u{0316}\u{0334}\u{0350}", count: 6) + "ello",
            String(repeating: "😂", count: 31),
        ]
        for (k, text) in bad.enumerated() {
            f.clock.advance(by: 1)
            let outcome = engine.incoming(
                HookMessage(id: "bad\(k)", cid: "lobby", from: "quiet\(k)", type: MessageType.text.rawValue, text: text, timestamp: 0))
            guard case .block = outcome.moderation.verdict else { return XCTFail("not blocked: \(text)") }
        }
    }
}

extension Fixture {
    /// Copies what the shipped plugins share from `plugins/`: `lib/` (modules such as modlog) and the
    /// matcher's `presets/`, which the moderation plugin's default rules use.
    func copyShippedShared() throws {
        let fm = FileManager.default
        for folder in ["lib", "presets"] {
            let source = ModerationRulesTests.shipped.appendingPathComponent(folder)
            let target = plugins.appendingPathComponent(folder)
            if fm.fileExists(atPath: source.path), !fm.fileExists(atPath: target.path) { try fm.copyItem(at: source, to: target) }
        }
    }
}
