import BotHost
import BotHub
import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import PushProviders
import XCTest

@testable import IMServer

/// `on_offline` end to end (docs/PUSH.md, "on_offline"): a real server with the webhook provider posting to a
/// gateway on loopback, a real bot host as its interceptor running Lua plugins, members offline with devices.
final class OfflineHookBotTests: XCTestCase {
    static let secret = "the-offline-hook-gateway-secret"

    /// Rewrites Jerry's push and drops Spike's (by list index).
    static let whisper = """
        return {
          name = "whisper",
          priority = 10,
          on_offline = function(msg, receivers, ctx)
            local out = {}
            for i, r in ipairs(receivers) do
              if r.id == "Jerry" then out.Jerry = { body = "psst: " .. msg.text, badge = 7, data = { mentioned = r.mentioned } }
              elseif r.id == "Spike" then out[i] = false end
            end
            return out
          end,
        }
        """
    /// Runs after whisper and sees what it left: stamps the first receiver's data with every receiver's body.
    static let stamp = """
        return {
          name = "stamp",
          on_offline = function(msg, receivers, ctx)
            local seen = {}
            for _, r in ipairs(receivers) do seen[#seen + 1] = r.id .. "=" .. r.notification.body end
            return { [1] = { data = { chain = table.concat(seen, ",") } } }
          end,
        }
        """

    func start(_ attachment: BotAttachment, gateway: PushTestGateway, hold: Int) async throws -> BotHarness {
        try await BotHarness.start(attachment: attachment) { configuration in
            configuration.push.providers = [
                PushProviderConfiguration(.webhook(WebhookSettings(url: gateway.url, secret: Self.secret)))
            ]
            configuration.push.queue.pollInterval = .milliseconds(50)
            configuration.push.offlineHookDeadlineMillis = hold
        }
    }

    /// Each member registers a webhook device (under a device id of its own, so logging out keeps it) and
    /// leaves.
    func offline(_ harness: BotHarness, _ members: [String]) async throws {
        for member in members {
            let client = harness.server.client(member)
            try await client.open()
            _ = try await client.registerDevice(IMPushDevice(provider: .webhook, token: "\(member)-phone", deviceId: "\(member)-phone"))
            await client.close()
        }
        try await waitUntil("\(members) to be offline", every: .milliseconds(10)) {
            members.allSatisfy { harness.server.server.service.registry.connections(of: $0).isEmpty }
        }
    }

    func notifications(_ pushes: [PushTestGateway.Request]) -> [String: [String: JSONValue]] {
        for push in pushes {
            XCTAssertEqual(push.signature, WebhookProvider.signature(of: push.body, secret: Self.secret))
        }
        return Dictionary(pushes.map { ($0.token ?? "", $0.notification ?? [:]) }, uniquingKeysWith: { first, _ in first })
    }

    /// `[push] offline_hook_deadline_ms` reaches the server's configuration; a value out of range is refused with
    /// its file, line and key.
    func testTheDeadlineSettingIsReadAndChecked() throws {
        let bot = try BotConfiguration.parse("[push]\noffline_hook_deadline_ms = 250\n", relativeTo: FileManager.default.temporaryDirectory)
        var server = PushConfiguration()
        XCTAssertEqual(server.offlineHookDeadlineMillis, 1000)
        server.apply(bot.push)
        XCTAssertEqual(server.offlineHookDeadlineMillis, 250)
        for bad in ["5", "60001", "\"1s\""] {
            XCTAssertThrowsError(
                try BotConfiguration.parse(
                    "[push]\noffline_hook_deadline_ms = \(bad)\n", relativeTo: FileManager.default.temporaryDirectory)
            ) { error in
                XCTAssertTrue("\(error)".contains("hookbot.toml:2: push.offline_hook_deadline_ms:"), "\(error)")
            }
        }
    }

    func testPluginsRewriteOneDropAnotherAndChainInProcess() async throws { try await checkRewriteAndDrop(.inProcess) }
    func testPluginsRewriteOneDropAnotherAndChainOverWebSocket() async throws { try await checkRewriteAndDrop(.webSocket) }

    private func checkRewriteAndDrop(_ attachment: BotAttachment) async throws {
        let gateway = try await PushTestGateway()
        addTeardownBlock { await gateway.shutdown() }
        let harness = try await start(attachment, gateway: gateway, hold: 5000)
        addTeardownBlock { await harness.server.stop() }
        try harness.write("whisper.lua", Self.whisper)
        try harness.write("stamp.lua", Self.stamp)
        let bot = try await harness.bot()
        addTeardownBlock { await bot.stop() }
        try await offline(harness, ["Jerry", "Spike", "Tyke"])
        let tom = harness.server.client("Tom")
        try await tom.open()
        addTeardownBlock { await tom.close() }
        let conversation = try await tom.createConversation(name: "Kitchen", members: ["Jerry", "Spike", "Tyke", "modbot"])
        let sent = ContinuousClock.now
        var options = IMSendOptions()
        options.mentionPids = ["Jerry"]
        _ = try await conversation.send(.text("cheese"), options: options)
        _ = try await gateway.waitFor(count: 2)
        XCTAssertLessThan(ContinuousClock.now - sent, .milliseconds(4000), "the bot's answer released the pushes")
        let pushes = notifications(await gateway.settle())
        XCTAssertEqual(pushes.keys.sorted(), ["Jerry-phone", "Tyke-phone"], "Spike's push was dropped")
        let jerry = try XCTUnwrap(pushes["Jerry-phone"])
        XCTAssertEqual(jerry["body"], "psst: cheese")
        XCTAssertEqual(jerry["title"], "Kitchen")
        XCTAssertEqual(jerry["badge"], 7)
        XCTAssertEqual(jerry["data"]?["mentioned"], true)
        XCTAssertEqual(jerry["data"]?["cid"]?.stringValue, conversation.id)
        // stamp ran second and saw whisper's result: Spike no longer listed, Jerry's new body.
        XCTAssertEqual(jerry["data"]?["chain"], "Jerry=psst: cheese,Tyke=Tom: cheese")
        let tyke = try XCTUnwrap(pushes["Tyke-phone"])
        XCTAssertEqual(tyke["body"], "Tom: cheese")
        XCTAssertEqual(tyke["badge"], 1)
        XCTAssertNil(tyke["data"]?["chain"])
    }

    /// A plugin that fails and one that loops past its budget change nothing: the defaults go, when the bot
    /// answers (before the hold ends). A bot without the hook answers `unhooked` once and is not asked again.
    func testFailingAndOverrunningHooksLeaveTheDefaultsAndABotWithoutTheHookIsAskedOnce() async throws {
        let gateway = try await PushTestGateway()
        addTeardownBlock { await gateway.shutdown() }
        let hold = 3000
        let harness = try await start(.inProcess, gateway: gateway, hold: hold)
        addTeardownBlock { await harness.server.stop() }
        try harness.write("boom.lua", #"return { name = "boom", on_offline = function() error("boom") end }"#)
        try harness.write("spin.lua", #"return { name = "spin", on_offline = function() while true do end end }"#)
        try harness.write("bad.lua", #"return { name = "bad", on_offline = function() return { Nobody = false } end }"#)
        let bot = try await harness.bot()
        addTeardownBlock { await bot.stop() }
        try await offline(harness, ["Jerry"])
        let tom = harness.server.client("Tom")
        try await tom.open()
        addTeardownBlock { await tom.close() }
        let conversation = try await tom.createConversation(name: "Kitchen", members: ["Jerry", "modbot"])
        var sent = ContinuousClock.now
        _ = try await conversation.send(.text("one"))
        var pushes = try await gateway.waitFor(count: 1)
        XCTAssertLessThan(ContinuousClock.now - sent, .milliseconds(hold - 200), "answered before the hold ends")
        XCTAssertEqual(pushes.first?.notification?["body"], "Tom: one")
        let failures = await bot.runtime.plugins.filter { $0.lastError != nil }.map(\.name).sorted()
        XCTAssertEqual(failures, ["bad", "boom", "spin"])

        // Without any on_offline hook: "unhooked" once, then the server stops asking.
        for name in ["boom.lua", "spin.lua", "bad.lua"] {
            try FileManager.default.removeItem(at: harness.plugins.appendingPathComponent(name))
        }
        await bot.runtime.sync()
        let asked = await bot.statistics.verdicts
        sent = ContinuousClock.now
        _ = try await conversation.send(.text("two"))
        pushes = try await gateway.waitFor(count: 2)
        XCTAssertLessThan(ContinuousClock.now - sent, .milliseconds(hold - 200))
        _ = try await conversation.send(.text("three"))
        pushes = try await gateway.waitFor(count: 3)
        XCTAssertEqual(pushes.map { $0.notification?["body"]?.stringValue }, ["Tom: one", "Tom: two", "Tom: three"])
        // Two message reviews and one offline request: "three"'s offline receivers were not asked about.
        let answered = await bot.statistics.verdicts
        XCTAssertEqual(answered - asked, 3)
    }
}
