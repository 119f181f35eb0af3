import Foundation
import HookbotTestSupport
import IMCore
import IMServer
import Synchronization
import Testing

/// An in-process interceptor that answers by callback (`connectLocally(receive:closed:answering:)`, what the bot host
/// of `hookbot run` uses): the server applies each verdict on the thread that gives it, before the call returns, so
/// that no task waits for the answer and no pool thread is woken to carry it on (issue 30, W2).
@Suite(.serialized) struct InterceptorCallbackTests {
    static let secret = "interceptor-secret"

    /// What the interceptor saw of one answer: the thread it answered on, and the server's counters right after.
    struct Answer: Sendable {
        var text: String
        var thread: ObjectIdentifier
        var decidedAfter: Int
    }

    private func server(deadline: Int) async throws -> ServerHarness {
        try await ServerHarness.start { configuration in
            configuration.interception.interceptors = [.init(clientID: "modbot", secret: Self.secret)]
            configuration.interception.deadlineMillis = deadline
        }
    }

    /// Logs in as the interceptor with `answering`.
    private func interceptor(_ server: ServerHarness, answering: @escaping HookAnswerer) async throws -> LocalRawClient {
        let bot = try LocalRawClient(server.server, answering: answering)
        let reply = try await bot.request(Command.interceptorOpen("modbot", secret: Self.secret))
        #expect(reply.op == .opened)
        try await waitUntilInterceptorAttached(server.server, "modbot")
        return bot
    }

    private static func text(of request: HookRequest) -> String {
        guard case .message(_, _, let content, _, _) = request, let data = content.text else { return "" }
        return TypedMessage.decode(data)?.text ?? data
    }

    @Test func aVerdictGivenByCallbackIsAppliedOnTheThreadThatGaveItBeforeTheCallReturns() async throws {
        try await server(deadline: 5000).whileRunning { server in
            let answers = Mutex<[String: Answer]>([:])
            let decided: @Sendable () -> Int = { server.server.interceptionStats.allowed + server.server.interceptionStats.dropped }
            // Each answer comes from a thread of its own, neither the server's nor Swift's pool, as the bot's
            // come from its Lua thread.
            let bot = try await interceptor(server) { request, answer in
                let text = Self.text(of: request)
                Thread {
                    answer(text.contains("禁止") ? .drop(reason: "不允许的词", appCode: 7) : .allow)
                    let after = decided()
                    answers.withLock { $0[text] = Answer(text: text, thread: ObjectIdentifier(Thread.current), decidedAfter: after) }
                }.start()
            }
            let tom = try await LocalRawClient.login("Tom", to: server.server)
            let jerry = try await server.login("Jerry")
            let cid = try await tom.startConversation(members: ["Jerry"])

            let sent = ["你好 Jerry 👋", "周末一起去爬山吗？🏔️", "这句话有禁止的内容", "@Jerry 明天见"]
            var refusals: [(command: Command, thread: ObjectIdentifier)] = []
            for text in sent {
                let reply = try await tom.sendTextWithThread(text, to: cid)
                if reply.command.code != nil { refusals.append(reply) }
            }
            var received: [String] = []
            for _ in 0..<3 { received.append(try await jerry.nextMessage().text ?? "") }
            #expect(received == ["你好 Jerry 👋", "周末一起去爬山吗？🏔️", "@Jerry 明天见"])
            #expect(await jerry.settle { $0.cmd == .direct }.isEmpty, "the refused message never reached Jerry")

            let answered = answers.withLock { $0 }
            let given = try sent.map { try #require(answered[$0], "no answer recorded for \($0)") }
            // Counted and applied inside `answer`: the n-th message's answer finds n verdicts decided when it returns
            // (Tom sends each after the reply to the one before).
            #expect(given.enumerated().allSatisfy { $0.element.decidedAfter >= $0.offset + 1 }, "\(given.map(\.decidedAfter))")
            // The refusal reached Tom from the interceptor's own thread: nothing handed the verdict on to another.
            let refusal = try #require(refusals.first)
            #expect(refusals.count == 1)
            #expect(refusal.command.code == 4402)
            #expect(refusal.command.detail == "不允许的词")
            #expect(refusal.command.appCode == 7)
            #expect(refusal.thread == given[2].thread, "the verdict was applied on another thread than the one that gave it")
            #expect(server.server.interceptionStats.policyApplied == 0)
            tom.close()
            bot.close()
        }
    }

    @Test func anAnswerNeverGivenIsDecidedByThePolicyAtTheDeadlineAndALateOrSecondOneIsIgnored() async throws {
        try await server(deadline: 200).whileRunning { server in
            let held = Mutex<[@Sendable (HookVerdict?) -> Void]>([])
            let bot = try await interceptor(server) { request, answer in
                if Self.text(of: request).hasPrefix("稍等") {
                    held.withLock { $0.append(answer) } // not answered until after the deadline
                } else {
                    answer(.allow)
                    answer(.drop(reason: "second answer")) // ignored: the first one decided
                }
            }
            let tom = try await server.login("Tom")
            let jerry = try await server.login("Jerry")
            let cid = try await tom.startConversation(members: ["Jerry"])
            let clock = ContinuousClock()
            let start = clock.now
            let first = try await tom.sendText("稍等一下，我查查 🔍", to: cid)
            #expect(first.code == nil, "fail-open: delivered by the policy at the deadline")
            #expect(clock.now - start >= .milliseconds(190))
            let second = try await tom.sendText("好了 ✅", to: cid)
            #expect(second.code == nil)
            for answer in held.withLock({ $0 }) { answer(.drop(reason: "too late")) }
            let received = [try await jerry.nextMessage().text, try await jerry.nextMessage().text]
            #expect(received == ["稍等一下，我查查 🔍", "好了 ✅"])
            let stats = server.server.interceptionStats
            #expect(stats.timeouts == 1)
            #expect(stats.policyApplied == 1)
            #expect(stats.allowed == 2)
            #expect(stats.dropped == 0)
            await tom.close()
            bot.close()
        }
    }
}
