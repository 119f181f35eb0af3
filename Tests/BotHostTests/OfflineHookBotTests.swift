import BotHost
import BotHub
import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import PushProviders
import Testing

@testable import IMServer

/// `on_offline` end to end (docs/PUSH.md, "on_offline"): a real server with the webhook provider posting to a
/// gateway on loopback, a real bot host as its interceptor running Lua plugins, members offline with devices.
@Suite(.serialized) struct OfflineHookBotTests {
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
            #expect(push.signature == WebhookProvider.signature(of: push.body, secret: Self.secret))
        }
        return Dictionary(pushes.map { ($0.token ?? "", $0.notification ?? [:]) }, uniquingKeysWith: { first, _ in first })
    }

    /// `[push] offline_hook_deadline_ms` reaches the server's configuration; a value out of range is refused with
    /// its file, line and key.
    @Test func theDeadlineSettingIsReadAndChecked() throws {
        let bot = try BotConfiguration.parse("[push]\noffline_hook_deadline_ms = 250\n", relativeTo: FileManager.default.temporaryDirectory)
        var server = PushConfiguration()
        #expect(server.offlineHookDeadlineMillis == 1000)
        server.apply(bot.push)
        #expect(server.offlineHookDeadlineMillis == 250)
        for bad in ["5", "60001", "\"1s\""] {
            let error = #expect(throws: (any Error).self) {
                try BotConfiguration.parse(
                    "[push]\noffline_hook_deadline_ms = \(bad)\n", relativeTo: FileManager.default.temporaryDirectory)
            }
            let text = error.map { "\($0)" } ?? ""
            #expect(text.contains("hookbot.toml:2: push.offline_hook_deadline_ms:"), "\(text)")
        }
    }

    @Test(arguments: BotAttachment.allCases)
    func pluginsRewriteOneDropAnotherAndChain(_ attachment: BotAttachment) async throws {
        try await PushTestGateway().whileRunning { gateway in
            try await start(attachment, gateway: gateway, hold: 5000).whileRunning { harness in
                try harness.write("whisper.lua", Self.whisper)
                try harness.write("stamp.lua", Self.stamp)
                try await harness.bot().whileRunning { bot in
                    try await offline(harness, ["Jerry", "Spike", "Tyke"])
                    try await harness.server.client("Tom").whileOpen { tom in
                        let conversation = try await tom.createConversation(name: "Kitchen", members: ["Jerry", "Spike", "Tyke", "modbot"])
                        let sent = ContinuousClock.now
                        var options = IMSendOptions()
                        options.mentionPids = ["Jerry"]
                        _ = try await conversation.send(.text("cheese"), options: options)
                        _ = try await gateway.waitFor(count: 2)
                        #expect(ContinuousClock.now - sent < .milliseconds(4000), "the bot's answer released the pushes")
                        let pushes = notifications(await gateway.settle())
                        #expect(pushes.keys.sorted() == ["Jerry-phone", "Tyke-phone"], "Spike's push was dropped")
                        let jerry = try #require(pushes["Jerry-phone"])
                        #expect(jerry["body"] == "psst: cheese")
                        #expect(jerry["title"] == "Kitchen")
                        #expect(jerry["badge"] == 7)
                        #expect(jerry["data"]?["mentioned"] == true)
                        #expect(jerry["data"]?["cid"]?.stringValue == conversation.id)
                        // stamp ran second and saw whisper's result: Spike no longer listed, Jerry's new body.
                        #expect(jerry["data"]?["chain"] == "Jerry=psst: cheese,Tyke=Tom: cheese")
                        let tyke = try #require(pushes["Tyke-phone"])
                        #expect(tyke["body"] == "Tom: cheese")
                        #expect(tyke["badge"] == 1)
                        #expect(tyke["data"]?["chain"] == nil)
                    }
                }
            }
        }
    }

    /// A plugin that fails and one that loops past its budget change nothing: the defaults go, when the bot
    /// answers (before the hold ends). A bot without the hook answers `unhooked` once and is not asked again.
    @Test func failingAndOverrunningHooksLeaveTheDefaultsAndABotWithoutTheHookIsAskedOnce() async throws {
        let hold = 3000
        try await PushTestGateway().whileRunning { gateway in
            try await start(.inProcess, gateway: gateway, hold: hold).whileRunning { harness in
                try harness.write("boom.lua", #"return { name = "boom", on_offline = function() error("boom") end }"#)
                try harness.write("spin.lua", #"return { name = "spin", on_offline = function() while true do end end }"#)
                try harness.write("bad.lua", #"return { name = "bad", on_offline = function() return { Nobody = false } end }"#)
                try await harness.bot().whileRunning { bot in
                    try await offline(harness, ["Jerry"])
                    try await harness.server.client("Tom").whileOpen { tom in
                        let conversation = try await tom.createConversation(name: "Kitchen", members: ["Jerry", "modbot"])
                        var sent = ContinuousClock.now
                        _ = try await conversation.send(.text("one"))
                        var pushes = try await gateway.waitFor(count: 1)
                        #expect(ContinuousClock.now - sent < .milliseconds(hold - 200), "answered before the hold ends")
                        #expect(pushes.first?.notification?["body"] == "Tom: one")
                        let failures = await bot.runtime.plugins.filter { $0.lastError != nil }.map(\.name).sorted()
                        #expect(failures == ["bad", "boom", "spin"])

                        // Without any on_offline hook: "unhooked" once, then the server stops asking.
                        for name in ["boom.lua", "spin.lua", "bad.lua"] {
                            try FileManager.default.removeItem(at: harness.plugins.appendingPathComponent(name))
                        }
                        await bot.runtime.sync()
                        let asked = await bot.statistics.verdicts
                        sent = ContinuousClock.now
                        _ = try await conversation.send(.text("two"))
                        pushes = try await gateway.waitFor(count: 2)
                        #expect(ContinuousClock.now - sent < .milliseconds(hold - 200))
                        _ = try await conversation.send(.text("three"))
                        pushes = try await gateway.waitFor(count: 3)
                        #expect(pushes.map { $0.notification?["body"]?.stringValue } == ["Tom: one", "Tom: two", "Tom: three"])
                        // Two message reviews and one offline request: "three"'s offline receivers were not asked about.
                        let answered = await bot.statistics.verdicts
                        #expect(answered - asked == 3)
                    }
                }
            }
        }
    }
}
