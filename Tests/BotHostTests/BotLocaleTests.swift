import BotHost
import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import XCTest

/// Translations (`ctx.t`) through a real server and the shipped plugins: members get the bot's words in
/// their language (their client's `attrs.lang`, their `!lang` choice, kept across a restart of the bot),
/// and `hookbot check` reports bad locale files and keys the default locale lacks.
final class BotLocaleTests: XCTestCase {
    static let shipped = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("plugins")

    /// Copies shipped plugins and their locale files into the harness's plugins directory.
    private func copyShipped(_ names: [String], to plugins: URL) throws {
        let fm = FileManager.default
        try fm.copyItem(at: Self.shipped.appendingPathComponent("lib"), to: plugins.appendingPathComponent("lib"))
        try fm.createDirectory(at: plugins.appendingPathComponent("locales"), withIntermediateDirectories: true)
        for name in names {
            try fm.copyItem(at: Self.shipped.appendingPathComponent("\(name).lua"), to: plugins.appendingPathComponent("\(name).lua"))
            try fm.copyItem(
                at: Self.shipped.appendingPathComponent("locales/\(name)"), to: plugins.appendingPathComponent("locales/\(name)"))
        }
    }

    func testMembersReadTheBotInTheirLanguageAcrossARestart() async throws {
        let harness = try await BotHarness.start(attachment: .inProcess)
        addTeardownBlock(releasing: harness.server) { await $0.stop() }
        try copyShipped(["autoreply", "lang"], to: harness.plugins)
        // every answer at once (no cooldown), and the shipped FAQ
        let settings: JSONValue = ["cooldown": 0, "faq_module": "faq"]
        let first = try await harness.bot { $0.plugins.config["autoreply"] = settings }
        let tom = harness.server.client("Tom")
        let ming = harness.server.client("小明")
        let hong = harness.server.client("小红")
        let logs = try await openClients([tom, ming, hong])
        let conversation = try await tom.createConversation(members: ["modbot", "小明", "小红"])
        let mings = ming.conversation(conversation.id)
        let hongs = hong.conversation(conversation.id)
        func expect(_ text: String, line: UInt = #line) async throws {
            while true {
                let m = try await logs[0].message(in: conversation.id, timeout: .seconds(10))
                if m.from == "modbot" {
                    XCTAssertEqual(m.content.text ?? "", text, line: line)
                    return
                }
            }
        }
        _ = try await conversation.send(.text("ping"))
        try await expect("pong, Tom!")
        // 小红's app declares her language on each message
        _ = try await hongs.send(.text("ping", attributes: ["lang": "zh-CN"]))
        try await expect("pong，小红！")
        // 小明 chooses Chinese once
        _ = try await mings.send(.text("!lang zh-CN"))
        try await expect("好的，之后我会用中文（zh-CN）跟你说话。")
        _ = try await mings.send(.text("你是谁"))
        try await expect("我是 \(conversation.id) 的机器人；我的行为写在 plugins/*.lua 里。")
        await first.stop()

        // a new bot on the same state file: 小明's choice holds, Tom still reads English
        let second = try await harness.bot { $0.plugins.config["autoreply"] = settings }
        addTeardownBlock(releasing: second) { await $0.stop() }
        _ = try await mings.send(.text("!lang"))
        try await expect("你的语言：中文（zh-CN），是你自己选的。可选：en, zh-CN；!lang reset 恢复为本会话的语言。")
        _ = try await conversation.send(.text("!lang"))
        try await expect("Your language: English (en), the bot's default. Available: en, zh-CN; choose one with !lang <tag>.")
    }

    func testCheckReportsBadLocaleFilesAndWarnsAboutMissingKeys() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-locales-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let plugins = directory.appendingPathComponent("plugins")
        try FileManager.default.createDirectory(at: plugins.appendingPathComponent("locales/greeter"), withIntermediateDirectories: true)
        func write(_ path: String, _ text: String) throws {
            try text.write(to: plugins.appendingPathComponent(path), atomically: true, encoding: .utf8)
        }
        try write("greeter.lua", #"return { name = "greeter", on_receive = function(msg, ctx) ctx.reply(ctx.t("hi")) end }"#)
        try write("locales/greeter/en.toml", "hi = \"Hi\"\n")
        try write("locales/greeter/zh-CN.toml", "hi = \"你好\"\nbye = \"再见\"\n")
        var configuration = try BotConfiguration.parse(
            "[bot]\nlocale = \"en\"\n[plugins]\ndirectory = \"plugins\"\n", relativeTo: directory, fileName: "hookbot.toml")
        var checked = try configuration.checkWithWarnings()
        XCTAssertEqual(checked.problems, [])
        XCTAssertEqual(
            checked.warnings, ["plugins/locales/greeter/zh-CN.toml: key bye not in plugins/locales/greeter/en.toml (the default locale en)"]
        )
        // with Chinese as the default, the other locale (English) has no key Chinese lacks
        configuration.locale = "zh-CN"
        XCTAssertEqual(try configuration.checkWithWarnings().warnings, [])

        try write("locales/greeter/zh-CN.toml", "hi = \"你好\"\n\n[bye\n")
        checked = try configuration.checkWithWarnings()
        XCTAssertEqual(checked.problems.count, 1, "\(checked.problems)")
        XCTAssertTrue(checked.problems[0].contains("plugins/locales/greeter/zh-CN.toml:3"), checked.problems[0])

        XCTAssertThrowsError(try BotConfiguration.parse("[bot]\nlocale = \"english please\"\n", fileName: "hookbot.toml")) { error in
            XCTAssertEqual("\(error)", "hookbot.toml:2: bot.locale: 'english please' is not a locale tag (en, zh-CN, zh-Hant …)")
        }
        XCTAssertEqual(try BotConfiguration.parse("[bot]\nlocale = \"zh_cn\"\n").locale, "zh-CN")
    }
}
