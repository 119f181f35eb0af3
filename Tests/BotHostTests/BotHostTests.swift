import BotHost
import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import IMServer
import Testing

@Suite(.serialized) struct BotHostTests {
    static let moderation = """
        return {
          name = "mod",
          moderation = function(msg, ctx)
            local text = msg.text or ""
            if text:find("forbidden%-word") then return { verdict = "block", reason = "forbidden word", code = 7 } end
            if text:find("darn") then return { verdict = "replace", text = (text:gsub("darn", "****")) } end
          end,
        }
        """

    @Test(arguments: BotAttachment.allCases)
    func interceptionBlocksBeforeDeliveryAndModifies(_ attachment: BotAttachment) async throws {
        try await BotHarness.start(attachment: attachment).whileRunning { harness in
            try harness.write("mod.lua", Self.moderation)
            let bot = try await harness.bot()
            let chat = try await harness.tomsConversation(with: ["Jerry"])
            let (conversation, logs) = (chat.conversation, chat.logs)

            do {
                _ = try await conversation.send(.text("a forbidden-word here"))
                Issue.record("a blocked message must fail for the sender")
            } catch let error as IMError {
                #expect(error.code == 4402)
                #expect(error.detail == "forbidden word")
                #expect(error.appCode == 7)
            }
            _ = try await conversation.send(.text("oh darn"))
            _ = try await conversation.send(.text("fine"))
            let received = try await logs[1].messages(before: "fine", in: conversation.id)
            #expect(received.map(\.content.text) == ["oh ****"], "the blocked message never reached Jerry")
            let history = try await conversation.messages(limit: 10).map(\.content.text)
            #expect(history == ["oh ****", "fine"])
            let stats = await bot.statistics
            #expect(stats.blocked == 1)
            await bot.stop()
        }
    }

    @Test func anOversizedActionFailsWithoutKnockingTheInterceptorOut() async throws {
        try await BotHarness.start(attachment: .webSocket).whileRunning { harness in
            try harness.write("mod.lua", Self.moderation)
            try harness.write(
                "huge.lua",
                """
                return { on_receive = function(msg, ctx)
                  if msg.text == "grow" then ctx.update_attr(msg.cid, "blob", string.rep("x", 1536 * 1024)) end
                  if msg.text == "grow" then ctx.reply("tried") end
                end }
                """)
            let bot = try await harness.bot()
            let chat = try await harness.conversationWithBot()
            let (conversation, logs) = (chat.conversation, chat.logs)
            _ = try await conversation.send(.text("grow"))
            let replies = try await logs[0].messages(1, in: conversation.id)
            #expect(replies.map(\.content.text) == ["tried"])
            // The 1.5 MiB frame was never written: the action failed, the bot kept its connection and its role.
            let stats = await bot.statistics
            #expect(stats.actionErrors == 1)
            #expect(harness.server.server.isInterceptorAttached("modbot"))
            do {
                _ = try await conversation.send(.text("a forbidden-word here"))
                Issue.record("moderation must still apply")
            } catch let error as IMError {
                #expect(error.code == 4402)
            }
            await bot.stop()
        }
    }

    @Test func oneEventCannotMakeTheBotFloodConversations() async throws {
        try await BotHarness.start(attachment: .inProcess).whileRunning { harness in
            try harness.write(
                "flood.lua",
                """
                return { on_receive = function(msg, ctx)
                  ctx.state.set("seen:" .. msg.cid, true)
                  if msg.text == "burst" then
                    for _, key in ipairs(ctx.state.keys("seen:")) do
                      for i = 1, 25 do ctx.send(key:sub(6), "flood " .. i) end
                    end
                  end
                end }
                """)
            let bot = try await harness.bot {
                $0.sendsPerEvent = 20
                $0.globalReplyLimit = 1000
                $0.replyLimit = 1000
            }
            let tom = harness.server.client("Tom")
            let logs = try await openClients([tom])
            let first = try await tom.createConversation(members: ["modbot"])
            let second = try await tom.createConversation(members: ["modbot"])
            _ = try await second.send(.text("hello"))
            _ = try await first.send(.text("burst"))
            // 50 sends asked for in answer to one message; 20 go out.
            for _ in 0..<20 { _ = try await logs[0].message() }
            let extra = await logs[0].settle().compactMap(\.receivedMessage)
            #expect(extra.count == 0)
            let stats = await bot.statistics
            #expect(stats.rateLimited == 30)
            await bot.stop()
        }
    }

    @Test func theBotsMessagesAreBoundedAcrossConversations() async throws {
        try await BotHarness.start(attachment: .inProcess).whileRunning { harness in
            try harness.write("echo.lua", "return { on_receive = function(msg, ctx) ctx.reply('echo') end }")
            let bot = try await harness.bot {
                $0.globalReplyLimit = 5
                $0.replyLimit = 100
            }
            let tom = harness.server.client("Tom")
            let logs = try await openClients([tom])
            var conversations: [IMConversation] = []
            for _ in 0..<8 { conversations.append(try await tom.createConversation(members: ["modbot"])) }
            for conversation in conversations { _ = try await conversation.send(.text("ping")) }
            for _ in 0..<5 { _ = try await logs[0].message() }
            let extra = await logs[0].settle().compactMap(\.receivedMessage)
            #expect(extra.count == 0, "the global limit held")
            let stats = await bot.statistics
            #expect(stats.rateLimited == 3)
            await bot.stop()
        }
    }

    @Test func pluginsActOnlyWhereTheBotIsAMemberOrTheEventHappened() async throws {
        try await BotHarness.start(attachment: .inProcess).whileRunning { harness in
            try harness.write(
                "reach.lua",
                """
                return { on_receive = function(msg, ctx)
                  local target = msg.text:match("^act (.+)$")
                  if not target then return end
                  local ok, err = pcall(ctx.send, target, "hi from the bot")
                  ctx.reply(ok and "sent" or err)
                end }
                """)
            let bot = try await harness.bot()
            let tom = harness.server.client("Tom")
            let jerry = harness.server.client("Jerry")
            let logs = try await openClients([tom, jerry])
            let inside = try await tom.createConversation(members: ["modbot"])
            let outside = try await tom.createConversation(members: ["Jerry"])
            let later = try await tom.createConversation(members: ["Jerry"])
            func answer(_ text: String) async throws -> String? {
                _ = try await inside.send(.text(text))
                return try await logs[0].message(in: inside.id).content.text
            }
            let refused = try await answer("act \(outside.id)")
            #expect(refused?.contains("not a member of conversation \(outside.id)") == true, "\(refused ?? "")")
            // Invited later: the bot may act there, and the message arrives.
            try await later.add(members: ["modbot"])
            try await waitUntil("the bot to reach \(later.id)") { bot.runtime.reach?.contains(later.id) == true }
            let allowed = try await answer("act \(later.id)")
            #expect(allowed == "sent")
            let arrived = try await logs[1].message(in: later.id)
            #expect(arrived.content.text == "hi from the bot")
            // Removed again: refused again.
            try await later.remove(members: ["modbot"])
            try await waitUntil("the bot to leave \(later.id)") { bot.runtime.reach?.contains(later.id) != true }
            let again = try await answer("act \(later.id)")
            #expect(again?.contains("not a member") == true, "\(again ?? "")")
            let awaited1 = await logs[1].settle().compactMap(\.receivedMessage).count
            #expect(awaited1 == 0)
            await bot.stop()
        }
    }

    @Test(arguments: BotAttachment.allCases)
    func aBurstNeverOutrunsAHealthyInterceptor(_ attachment: BotAttachment) async throws {
        // A deadline with room for a loaded test machine; without backpressure the queue of 2,000 reviews
        // still takes far longer than it.
        try await BotHarness.start(deadline: 600, attachment: attachment).whileRunning { harness in
            try harness.write("mod.lua", Self.moderation)
            let bot = try await harness.bot()
            let chat = try await harness.tomsConversation(with: ["Jerry"])
            let (conversation, logs) = (chat.conversation, chat.logs)
            // 2,000 forbidden messages with no waiting between them: the reviews queue up behind one Lua thread.
            let burst = 2000
            let outcomes = await sendAtOnce(burst, in: conversation) { "forbidden-word \($0)" }
            #expect(outcomes.filter { $0 == 4402 }.count == burst, "every message was refused by the bot")
            let stats = harness.server.server.interceptionStats
            #expect(stats.policyApplied == 0, "the failure policy decided messages of a healthy interceptor")
            // The sender was held back: never more than its share of reviews queued in front of the bot.
            #expect(harness.server.server.reviewsInFlight.peak <= 16)
            // Every message of the burst was decided before this one was sent: one that leaked would come first.
            _ = try await conversation.send(.text("after the burst"))
            let leaked = try await logs[1].messages(before: "after the burst", in: conversation.id)
            #expect(leaked.count == 0)
            await bot.stop()
        }
    }

    @Test(arguments: BotAttachment.allCases)
    func routingRepliesAndEventsGoThroughThePlugins(_ attachment: BotAttachment) async throws {
        try await BotHarness.start(attachment: attachment).whileRunning { harness in
            try harness.write(
                "echo.lua",
                """
                return {
                  name = "echo",
                  on_receive = function(msg, ctx)
                    if msg.text == "ping" then ctx.reply("pong") end
                    if msg.attrs.translation then ctx.reply("translated: " .. msg.attrs.translation.text) end
                  end,
                  translate = function(text, from, to, ctx) if to == "fr" then return "bonjour" end end,
                  on_cmd = function(cmd, ctx) ctx.send(cmd.cid, "cmd " .. cmd.action) end,
                  on_transient = function(msg, ctx) ctx.send(msg.cid, "saw " .. (msg.text or "")) end,
                  on_member_joined = function(ev, ctx) ctx.send(ev.cid, "welcome " .. table.concat(ev.members, ",")) end,
                  before_send = function(msg, ctx)
                    if msg.from == "modbot" then msg.text = msg.text .. " [bot]"; return msg end
                  end,
                }
                """)
            let bot = try await harness.bot()
            let chat = try await harness.conversationWithBot()
            let (conversation, logs) = (chat.conversation, chat.logs)
            let welcome = try await logs[0].message(in: conversation.id)
            #expect(welcome.content.text == "welcome Tom,modbot [bot]", "creation is a members-joined event")

            _ = try await conversation.send(.text("ping"))
            let pong = try await logs[0].message(in: conversation.id)
            #expect(pong.content.text == "pong [bot]")
            #expect(pong.from == "modbot")
            #expect(pong.content.attributes?["hookbot.hop"] == 1)

            _ = try await conversation.sendCmd(action: "wave")
            let observed1 = try await logs[0].message(in: conversation.id).content.text
            #expect(observed1 == "cmd wave [bot]")
            _ = try await conversation.send(.text("typing"), options: .transient)
            let observed2 = try await logs[0].message(in: conversation.id).content.text
            #expect(observed2 == "saw typing [bot]")
            _ = try await conversation.add(members: ["Bob"])
            let observed3 = try await logs[0].message(in: conversation.id).content.text
            #expect(observed3 == "welcome Bob [bot]")
            _ = try await conversation.send(.text("hello", attributes: ["translate": "fr"]))
            let observed4 = try await logs[0].message(in: conversation.id).content.text
            #expect(observed4 == "translated: bonjour [bot]")
            await bot.stop()
        }
    }

    @Test(arguments: BotAttachment.allCases, [InterceptionFailurePolicy.failOpen, .failClosed])
    func interceptorStoppedMidStreamAppliesThePolicy(_ attachment: BotAttachment, policy: InterceptionFailurePolicy) async throws {
        try await BotHarness.start(policy: policy, attachment: attachment).whileRunning { harness in
            try harness.write("mod.lua", Self.moderation)
            let bot = try await harness.bot()
            let chat = try await harness.tomsConversation(with: ["Jerry"])
            let (conversation, logs) = (chat.conversation, chat.logs)
            var accepted = 0
            var refused = 0
            for k in 0..<60 {
                if k == 20 { await bot.stop() }
                do {
                    _ = try await conversation.send(.text("m\(k)"))
                    accepted += 1
                } catch let error as IMError {
                    #expect(error.code == 4402)
                    refused += 1
                }
            }
            var delivered: [String] = []
            while let message = try? await logs[1].message(in: conversation.id, timeout: .milliseconds(800)) {
                delivered.append(message.content.text ?? "")
            }
            #expect(delivered.count == accepted, "\(policy): every accepted message is delivered, nothing else")
            #expect(Set(delivered).count == delivered.count, "no duplicates")
            switch policy {
            case .failOpen:
                #expect(accepted == 60, "nothing lost with fail-open")
            case .failClosed:
                #expect(accepted == 20, "nothing delivered without the interceptor with fail-closed")
                #expect(refused == 40)
            }
        }
    }

    @Test(arguments: BotAttachment.allCases)
    func reloadWhileTrafficFlowsLosesAndDuplicatesNothing(_ attachment: BotAttachment) async throws {
        try await BotHarness.start(attachment: attachment).whileRunning { harness in
            let reply = { (version: String) in
                """
                return { name = "ver", on_receive = function(msg, ctx) ctx.reply("\(version) " .. msg.text) end }
                """
            }
            try harness.write("ver.lua", reply("v1"))
            let bot = try await harness.bot { $0.replyLimit = 1000 }
            let chat = try await harness.conversationWithBot()
            let (conversation, logs) = (chat.conversation, chat.logs)
            let firstGeneration = await bot.runtime.plugins.first?.generation ?? 0
            for k in 0..<120 {
                if k == 60 { try harness.write("ver.lua", reply("v2")) }
                _ = try await conversation.send(.text("\(k)"))
                if k % 10 == 0 { try await Task.sleep(for: .milliseconds(30)) }
            }
            // However slow the machine, the watcher swaps the plugin in; one more message then meets v2.
            for _ in 0..<200 {
                if await (bot.runtime.plugins.first?.generation ?? 0) != firstGeneration { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            _ = try await conversation.send(.text("120"))
            var replies: [String] = []
            for _ in 0...120 { replies.append(try await logs[0].message(in: conversation.id).content.text ?? "") }
            let extra = await logs[0].settle().compactMap(\.receivedMessage)
            #expect(extra.isEmpty, "one reply per message")
            let numbers = replies.map { $0.split(separator: " ")[1] }
            #expect(numbers == (0...120).map { "\($0)"[...] }, "every message answered once, in order")
            #expect(replies.first?.hasPrefix("v1") == true)
            #expect(replies.last?.hasPrefix("v2") == true, "the new version took over without a restart")
            let plugins = await bot.runtime.plugins
            #expect(plugins.count == 1)
            await bot.stop()
        }
    }

    @Test(arguments: BotAttachment.allCases)
    func twoBotsInOneConversationDoNotLoop(_ attachment: BotAttachment) async throws {
        try await BotHarness.start(interceptors: [], attachment: attachment).whileRunning { harness in
            try harness.write(
                "chatty.lua",
                """
                return { name = "chatty", on_receive = function(msg, ctx) ctx.reply("re: " .. (msg.text or "")) end }
                """)
            let alice = try await harness.bot("alicebot", interceptor: false)
            let bob = try await harness.bot("bobbot", interceptor: false)
            let tom = harness.server.client("Tom")
            let logs = try await openClients([tom])
            let conversation = try await tom.createConversation(members: ["alicebot", "bobbot"])
            _ = try await conversation.send(.text("hi"))
            // Wait until the conversation has been quiet for a second (at most ten seconds).
            var count = -1
            var later = try await conversation.messages(limit: 100).count
            for _ in 0..<10 where count != later {
                count = later
                try await Task.sleep(for: .seconds(1))
                later = try await conversation.messages(limit: 100).count
            }
            #expect(count == later, "the conversation went quiet")
            #expect(count <= 1 + 2 + 2 + 2, "hop limit 3: at most three rounds of bot replies")
            #expect(count >= 3, "both bots answered the human")
            _ = logs
            await alice.stop()
            await bob.stop()
        }
    }

    @Test(arguments: BotAttachment.allCases)
    func membershipChangesCanBeVetoedByAPlugin(_ attachment: BotAttachment) async throws {
        try await BotHarness.start(attachment: attachment).whileRunning { harness in
            try harness.write(
                "guard.lua",
                """
                return {
                  name = "guard",
                  membership = function(ev, ctx)
                    if ev.action == "kick" and ev.by ~= "alice" then
                      return ctx.block("only alice removes people", { code = 9 })
                    end
                  end,
                }
                """)
            let bot = try await harness.bot()
            let tom = harness.server.client("Tom")
            let alice = harness.server.client("alice")
            _ = try await openClients([tom, alice])
            let conversation = try await tom.createConversation(members: ["Jerry", "alice"])
            do {
                _ = try await conversation.remove(members: ["Jerry"])
                Issue.record("the plugin refuses Tom's kick")
            } catch let error as IMError {
                #expect(error.code == 4305)
                #expect(error.detail == "only alice removes people")
                #expect(error.appCode == 9)
            }
            let removed = try await alice.conversation(conversation.id).remove(members: ["Jerry"])
            #expect(removed == ["Jerry"])
            _ = try await conversation.add(members: ["Bob"])
            await bot.stop()
        }
    }

    // MARK: Deadlines

    /// A moderation hook that takes about 60 ms of wall time (mostly inside C calls, so well within the
    /// instruction budget) and blocks "forbidden".
    static let slowModeration = """
        return {
          name = "slow",
          moderation = function(msg, ctx)
            local started = ctx.now()
            while ctx.now() - started < 0.06 do local _ = string.rep("x", 2000) end
            if (msg.text or ""):find("forbidden", 1, true) then return ctx.block("forbidden word") end
          end,
        }
        """

    @Test(arguments: BotAttachment.allCases)
    func slowModerationWithinTheShippedDeadlineDecidesEveryMessage(_ attachment: BotAttachment) async throws {
        let shipped = BotConfiguration()
        #expect(
            shipped.server.interceptionDeadlineMillis == ServerConfiguration().interception.deadlineMillis,
            "the bot and the server ship the same deadline")
        try await BotHarness.start(deadline: shipped.server.interceptionDeadlineMillis, attachment: attachment).whileRunning { harness in
            try harness.write("slow.lua", Self.slowModeration)
            let bot = try await harness.bot { $0.plugins.limits = shipped.plugins.limits }
            let chat = try await harness.tomsConversation(with: ["Jerry"])
            let (conversation, logs) = (chat.conversation, chat.logs)
            var refused = 0
            for k in 0..<6 {
                do {
                    _ = try await conversation.send(.text(k % 2 == 0 ? "hello \(k)" : "forbidden \(k)"))
                } catch let error as IMError {
                    #expect(error.code == 4402)
                    #expect(error.detail == "forbidden word", "the bot decided, not the failure policy")
                    refused += 1
                }
            }
            #expect(refused == 3)
            let received = try await logs[1].messages(3, in: conversation.id).map(\.content.text)
            #expect(received == ["hello 0", "hello 2", "hello 4"])
            let stats = harness.server.server.interceptionStats
            #expect(stats.policyApplied == 0, "no message was decided by the failure policy")
            #expect(stats.timeouts == 0)
            // The server measured how long each message was held in review: at least the hook's 60 ms. Each is
            // recorded before its verdict takes effect, so all six are there once Tom and Jerry saw the last.
            let holds = harness.server.server.takeInterceptionHoldTimes()
            #expect(holds.count == 6, "one hold per reviewed message: \(holds)")
            #expect(holds.allSatisfy { $0 >= 59 && $0 < Double(shipped.server.interceptionDeadlineMillis) }, "\(holds)")
            #expect(harness.server.server.takeInterceptionHoldTimes().isEmpty, "taken once")
            await bot.stop()
        }
    }

    @Test(arguments: BotAttachment.allCases)
    func burstBeyondTheDeadlineIsCountedAndLogged(_ attachment: BotAttachment) async throws {
        let recorder = LogRecorder()
        try await BotHarness.start(deadline: 200, attachment: attachment, logger: recorder.logger(level: .warning))
            .whileRunning { harness in
                try harness.write("slow.lua", Self.slowModeration)
                let bot = try await harness.bot()
                let chat = try await harness.tomsConversation(with: ["Jerry"])
                let (conversation, logs) = (chat.conversation, chat.logs)
                let burst = 8
                // Eight forbidden messages at once: each review takes 60 ms on the one Lua thread, so most
                // cannot be decided within 200 ms and the (fail-open) policy decides them.
                let outcomes = await sendAtOnce(burst, in: conversation) { "forbidden \($0)" }
                let refused = outcomes.compactMap { $0 }
                #expect(refused.allSatisfy { $0 == 4402 })
                let stats = harness.server.server.interceptionStats
                #expect(stats.policyApplied > 0, "the burst exceeded what the deadline allows")
                #expect(refused.count + stats.policyApplied == burst, "every message was decided by the bot or by the policy")
                var delivered = 0
                while (try? await logs[1].message(in: conversation.id, timeout: .milliseconds(800))) != nil { delivered += 1 }
                #expect(delivered == stats.policyApplied, "fail-open delivered exactly what the policy decided")
                let logged = recorder.records("interception failure policy applied")
                #expect(logged.count == stats.policyApplied, "each policy decision is logged")
                let totals = Set(logged.compactMap { $0.metadata["policy_decisions_total"].flatMap { Int($0) } })
                #expect(totals == Set((0..<stats.policyApplied).map { $0 + 1 }), "the log carries the running count")
                #expect(logged.first?.metadata["cid"] == conversation.id)
                await bot.stop()
            }
    }

    /// Sends `count` texts into `conversation` at once (none waits for another) and returns each send's error
    /// code, nil where the message was accepted.
    private func sendAtOnce(_ count: Int, in conversation: IMConversation, _ text: @escaping @Sendable (Int) -> String) async -> [Int?] {
        await withTaskGroup(of: Int?.self) { group in
            for k in 0..<count {
                group.addTask {
                    do {
                        _ = try await conversation.send(.text(text(k)))
                        return nil
                    } catch { return (error as? IMError)?.code ?? -1 }
                }
            }
            return await group.reduce(into: [Int?]()) { $0.append($1) }
        }
    }
}
