import Foundation
import HookbotTestSupport
import IMCore
import IMServer
import IMSignatures
import Synchronization
import Testing

@Suite(.serialized) struct InterceptionTests {
    static let secret = "interceptor-secret"

    /// How the interceptor reaches the server; every scenario runs over both.
    enum Attachment: CaseIterable, Sendable { case webSocket, inProcess }

    private func server(policy: InterceptionFailurePolicy = .failOpen, deadline: Int = 200) async throws -> ServerHarness {
        try await ServerHarness.start { configuration in
            configuration.interception.interceptors = [.init(clientID: "modbot", secret: Self.secret)]
            configuration.interception.failurePolicy = policy
            configuration.interception.deadlineMillis = deadline
            // These tests hold many reviews open at once on purpose (an interceptor that stops answering,
            // verdicts out of order); the per-sender backpressure has tests of its own (BotHostTests).
            configuration.interception.reviewsPerSender = 100
        }
    }

    /// Logs in as the interceptor (over a WebSocket, or attached in process) and answers every hook
    /// request with `decide`.
    private func interceptor(
        _ server: ServerHarness, _ attachment: Attachment,
        decide: @escaping @Sendable (Command) -> Command?
    ) async throws -> (TestClient, Task<Void, Never>) {
        let client =
            switch attachment {
            case .webSocket: try await TestClient.connect(port: server.port)
            case .inProcess: try TestClient.attach(to: server.server)
            }
        let reply = try await client.request(Command.interceptorOpen("modbot", secret: Self.secret))
        #expect(reply.op == .opened)
        try await waitUntilInterceptorAttached(server.server, "modbot")
        #expect(server.server.isInterceptorAttached("modbot"))
        let loop = Task {
            while !Task.isCancelled, let request = try? await client.next(timeout: .seconds(30), where: { $0.cmd == .hook }) {
                guard var verdict = decide(request) else { continue }
                verdict.cmd = .hook
                verdict.op = .verdict
                verdict.id = request.id
                client.send(verdict)
            }
        }
        return (client, loop)
    }

    private static func verdict(_ kind: String) -> Command {
        var command = Command(cmd: .hook, op: .verdict)
        command.verdict = kind
        return command
    }

    /// Blocks "forbidden", rewrites "darn", sends "secret" only to Jerry, silently drops "spam".
    private static func moderate(_ request: Command) -> Command? {
        let text = request.msg.flatMap(TypedMessage.decode)?.text ?? request.msg ?? ""
        if text.contains("forbidden") {
            var drop = verdict("drop")
            drop.reason = "contains a forbidden word"
            drop.appCode = 42
            return drop
        }
        if text.contains("spam") {
            var drop = verdict("drop")
            drop.silent = true
            return drop
        }
        if text.contains("darn") {
            var modify = verdict("modify")
            modify.msg = TypedMessage.text(text.replacingOccurrences(of: "darn", with: "****")).encoded()
            return modify
        }
        if text.contains("secret") {
            var modify = verdict("modify")
            modify.m = ["Jerry"]
            return modify
        }
        return verdict("allow")
    }

    @Test(arguments: Attachment.allCases)
    func verdictsApplyBeforeDelivery(_ attachment: Attachment) async throws {
        try await server().whileRunning { server in
            let (bot, loop) = try await interceptor(server, attachment, decide: Self.moderate)
            defer { loop.cancel() }
            let tom = try await server.login("Tom")
            let jerry = try await server.login("Jerry")
            let bob = try await server.login("Bob")
            let cid = try await tom.startConversation(members: ["Jerry", "Bob"])

            let blocked = try await tom.sendText("this is forbidden", to: cid)
            #expect(blocked.code == 4402)
            #expect(blocked.reason == "MESSAGE_REJECTED_BY_APP")
            #expect(blocked.detail == "contains a forbidden word")
            #expect(blocked.appCode == 42)

            let silent = try await tom.sendText("buy spam", to: cid)
            #expect(silent.code == nil)
            #expect(silent.uid != nil, "a silent drop looks delivered to the sender")

            try await tom.sendText("oh darn", to: cid)
            try await tom.sendText("a secret", to: cid)
            try await tom.sendText("hello", to: cid)

            let jerryTexts = [try await jerry.nextMessage(), try await jerry.nextMessage(), try await jerry.nextMessage()].map(\.text)
            #expect(jerryTexts == ["oh ****", "a secret", "hello"])
            let bobTexts = [try await bob.nextMessage(), try await bob.nextMessage()].map(\.text)
            #expect(bobTexts == ["oh ****", "hello"])
            let leaks = await jerry.settle { $0.cmd == .direct } + (await bob.settle { $0.cmd == .direct })
            #expect(leaks.isEmpty, "blocked, dropped and restricted messages never reach others")

            let bobHistory = try #require(try await bob.history(cid).logs).compactMap { TypedMessage.decode($0.data)?.text }
            #expect(bobHistory == ["oh ****", "hello"])
            let tomHistory = try #require(try await tom.history(cid).logs).compactMap { TypedMessage.decode($0.data)?.text }
            #expect(tomHistory == ["oh ****", "a secret", "hello"])
            #expect(server.server.interceptionStats.dropped == 2)
            #expect(server.server.interceptionStats.modified == 2)
            await bot.close()
        }
    }

    @Test(arguments: Attachment.allCases)
    func orderIsPreservedWhenVerdictsArriveOutOfOrder(_ attachment: Attachment) async throws {
        try await server(deadline: 5000).whileRunning { server in
            let (bot, loop) = try await interceptor(server, attachment) { _ in nil } // answered by hand below
            loop.cancel()
            let tom = try await server.login("Tom")
            let jerry = try await server.login("Jerry")
            let cid = try await tom.startConversation(members: ["Jerry"])
            let texts = (0..<20).map { "m\($0)" }
            for text in texts {
                var direct = Command(cmd: .direct)
                direct.cid = cid
                direct.msg = TypedMessage.text(text).encoded()
                tom.send(direct)
            }
            var requests: [Command] = []
            for _ in texts { requests.append(try await bot.next { $0.cmd == .hook }) }
            #expect(requests.count == 20, "reviews are requested concurrently, not one at a time")
            for request in requests.reversed() {
                var verdict = Self.verdict("allow")
                verdict.id = request.id
                bot.send(verdict)
            }
            var received: [String] = []
            for _ in texts { received.append(try await jerry.nextMessage().text ?? "") }
            #expect(received == texts)
        }
    }

    /// Verdicts are applied in order per conversation: a review held in one conversation holds up the
    /// messages after it there, and nothing anywhere else.
    @Test(arguments: Attachment.allCases)
    func slowConversationDoesNotDelayAnother(_ attachment: Attachment) async throws {
        try await server(deadline: 10_000).whileRunning { server in
            let slow = Mutex<String?>(nil)
            let held = Inbox<Command>()
            let (bot, loop) = try await interceptor(server, attachment) { request in
                guard request.cid == slow.withLock({ $0 }) else { return Self.verdict("allow") }
                held.append(request) // the slow conversation's reviews are answered by hand below
                return nil
            }
            defer { loop.cancel() }
            let tom = try await server.login("Tom")
            let jerry = try await server.login("Jerry")
            let slowCID = try await tom.startConversation(members: ["Jerry"], name: "slow")
            let fastCID = try await tom.startConversation(members: ["Jerry"], name: "fast")
            slow.withLock { $0 = slowCID }
            var first = Command(cmd: .direct)
            first.cid = slowCID
            first.msg = TypedMessage.text("slow 1").encoded()
            tom.send(first)
            let firstRequest = try #require(await held.take(timeout: .seconds(10), where: { _ in true }))
            var second = first
            second.msg = TypedMessage.text("slow 2").encoded()
            tom.send(second)
            try await tom.sendText("fast 1", to: fastCID)
            try await tom.sendText("fast 2", to: fastCID)
            let fast = [try await jerry.nextMessage(), try await jerry.nextMessage()]
            #expect(fast.map(\.text) == ["fast 1", "fast 2"], "the other conversation was not held up")
            #expect(fast.map(\.cid) == [fastCID, fastCID])
            // The second slow message is reviewed, but waits behind the first in its conversation.
            let secondRequest = try #require(await held.take(timeout: .seconds(10), where: { _ in true }))
            var allow = Self.verdict("allow")
            allow.id = secondRequest.id
            bot.send(allow)
            let early = await jerry.settle(for: .milliseconds(200)) { $0.cmd == .direct }
            #expect(early.isEmpty, "order within the slow conversation is kept")
            allow.id = firstRequest.id
            bot.send(allow)
            let slowTexts = [try await jerry.nextMessage(), try await jerry.nextMessage()].map(\.text)
            #expect(slowTexts == ["slow 1", "slow 2"])
            await bot.close()
        }
    }

    @Test(arguments: Attachment.allCases, [InterceptionFailurePolicy.failOpen, .failClosed])
    func timeoutsAndMissingInterceptorFollowThePolicy(_ attachment: Attachment, policy: InterceptionFailurePolicy) async throws {
        try await server(policy: policy, deadline: 100).whileRunning { server in
            let tom = try await server.login("Tom")
            let jerry = try await server.login("Jerry")
            let cid = try await tom.startConversation(members: ["Jerry"])

            let noInterceptor = try await tom.sendText("nobody home", to: cid)
            let (bot, loop) = try await interceptor(server, attachment) { _ in nil } // never answers
            let timedOut = try await tom.sendText("too slow", to: cid)
            switch policy {
            case .failOpen:
                #expect(noInterceptor.code == nil)
                #expect(timedOut.code == nil)
                let observed1 = try await jerry.nextMessage().text
                #expect(observed1 == "nobody home")
                let observed2 = try await jerry.nextMessage().text
                #expect(observed2 == "too slow")
            case .failClosed:
                #expect(noInterceptor.code == 4402)
                #expect(timedOut.code == 4402)
                let leaked = await jerry.settle { $0.cmd == .direct }
                #expect(leaked.isEmpty)
            }
            let stats = server.server.interceptionStats
            #expect(stats.timeouts == 1, "\(policy)")
            #expect(stats.policyApplied == 2, "\(policy)")
            loop.cancel()
            await bot.close()
        }
    }

    @Test(arguments: Attachment.allCases, [InterceptionFailurePolicy.failOpen, .failClosed])
    func interceptorKilledMidStream(_ attachment: Attachment, policy: InterceptionFailurePolicy) async throws {
        try await server(policy: policy, deadline: 5000).whileRunning { server in
            let tom = try await server.login("Tom")
            let jerry = try await server.login("Jerry")
            let cid = try await tom.startConversation(members: ["Jerry"])
            let answered = Counter()
            let (bot, loop) = try await interceptor(server, attachment) { _ in
                answered.increment() < 10 ? Self.verdict("allow") : nil // stops answering after ten
            }
            let acks = try await withThrowingTaskGroup(of: Command.self) { group in
                for k in 0..<30 { group.addTask { try await tom.sendText("m\(k)", to: cid) } }
                // Every request has reached the interceptor (ten answered, twenty pending) before it dies.
                try await waitUntil("30 requests at the interceptor (\(answered.value) came)", timeout: .seconds(30)) {
                    answered.value >= 30
                }
                #expect(answered.value == 30)
                loop.cancel()
                await bot.close() // the interceptor dies with requests pending
                var acks: [Command] = []
                for try await ack in group { acks.append(ack) }
                return acks
            }
            let accepted = acks.filter { $0.code == nil }.count
            var delivered = 0
            while (try? await jerry.next(timeout: .milliseconds(500), where: { $0.cmd == .direct })) != nil { delivered += 1 }
            switch policy {
            case .failOpen:
                #expect(accepted == 30, "nothing lost with fail-open")
                #expect(delivered == 30)
            case .failClosed:
                #expect(accepted == 10, "only allowed messages pass with fail-closed")
                #expect(delivered == 10)
            }
        }
    }

    @Test func anInterceptorResumesWithItsSessionTokenAndOthersCannot() async throws {
        try await server().whileRunning { server in
            let first = try await TestClient.connect(port: server.port)
            let opened = try await first.request(Command.interceptorOpen("modbot", secret: Self.secret))
            let token = try #require(opened.st)
            await first.close()
            // The reconnect presents the token only (what an SDK does), and gets back in.
            let again = try await TestClient.connect(port: server.port)
            var resume = Command(cmd: .session, op: .open)
            resume.peerId = "modbot"
            resume.st = token
            resume.r = true
            let resumed = try await again.request(resume)
            #expect(resumed.op == .opened)
            // Another client's token does not open the interceptor id.
            let tom = try await server.login("Tom")
            _ = tom
            let stranger = try await TestClient.connect(port: server.port)
            var tomsOpen = Command(cmd: .session, op: .open)
            tomsOpen.peerId = "Tom"
            let tomsReply = try await stranger.request(tomsOpen)
            let tomsToken = try #require(tomsReply.st)
            let impostor = try await TestClient.connect(port: server.port)
            var forged = Command(cmd: .session, op: .open)
            forged.peerId = "modbot"
            forged.st = tomsToken
            let refused = try await impostor.request(forged)
            #expect(refused.code == 4102)
            await again.close()
        }
    }

    /// What the interceptor is asked, read as `HookRequest`s: a message with its mentions and priority
    /// (Chinese and emoji intact), a binary message, an invitation and a member leaving by herself.
    @Test(arguments: Attachment.allCases)
    func requestsSayWhatWasAsked(_ attachment: Attachment) async throws {
        try await server().whileRunning { server in
            let asked = Mutex<[HookRequest?]>([])
            let (_, loop) = try await interceptor(server, attachment) { request in
                asked.withLock { $0.append(HookRequest(command: request)) }
                return Self.verdict("allow")
            }
            defer { loop.cancel() }
            let tom = try await server.login("Tom")
            let jerry = try await server.login("Jerry")
            let cid = try await tom.startConversation(members: ["Jerry"])
            let typed = TypedMessage.text("@Jerry 周末一起吃火锅吗？🍲").encoded()
            var direct = Command(cmd: .direct)
            direct.cid = cid
            direct.msg = typed
            direct.mentionPids = ["Jerry"]
            direct.priority = "high"
            let sent = try await tom.request(direct)
            #expect(sent.uid != nil)
            var binary = Command(cmd: .direct)
            binary.cid = cid
            binary.binaryMsg = Data([0, 1, 2, 255]).base64EncodedString()
            let sentBinary = try await tom.request(binary)
            #expect(sentBinary.uid != nil)
            var add = Command(cmd: .conv, op: .add)
            add.cid = cid
            add.m = ["Bob"]
            let added = try await tom.request(add)
            #expect(added.op == .added)
            var quit = Command(cmd: .conv, op: .remove)
            quit.cid = cid
            quit.m = ["Jerry"]
            let left = try await jerry.request(quit)
            #expect(left.op == .removed)
            #expect(
                asked.withLock { $0 } == [
                    .message(cid: cid, from: "Tom", content: .text(typed), priority: "high", mentionPids: ["Jerry"]),
                    .message(cid: cid, from: "Tom", content: .binary(base64: "AAEC/w=="), priority: nil, mentionPids: nil),
                    .membership(cid: cid, actor: "Tom", members: ["Bob"], action: .invite),
                    .membership(cid: cid, actor: "Jerry", members: ["Jerry"], action: .quit),
                ])
        }
    }

    @Test(arguments: Attachment.allCases)
    func membershipChangesCanBeVetoedAndInterceptorsAreAuthenticated(_ attachment: Attachment) async throws {
        try await server().whileRunning { server in
            let reviewed = Counter()
            let (_, loop) = try await interceptor(server, attachment) { request in
                guard request.kind == "membership" else { return Self.verdict("allow") }
                _ = reviewed.increment()
                if request.action == "kick" {
                    var drop = Self.verdict("drop")
                    drop.reason = "kicks need a moderator"
                    return drop
                }
                return Self.verdict("allow")
            }
            defer { loop.cancel() }
            let tom = try await server.login("Tom")
            let cid = try await tom.startConversation(members: ["Jerry"])
            var add = Command(cmd: .conv, op: .add)
            add.cid = cid
            add.m = ["Bob"]
            let observed3 = try await tom.request(add).op
            #expect(observed3 == .added)
            var kick = Command(cmd: .conv, op: .remove)
            kick.cid = cid
            kick.m = ["Bob"]
            let vetoed = try await tom.request(kick)
            #expect(vetoed.code == 4305)
            #expect(vetoed.detail == "kicks need a moderator")
            #expect(reviewed.value == 2)
            // Changes the server refuses anyway are never put to the interceptor.
            let mallory = try await server.login("Mallory")
            add.m = ["Eve"]
            let refusedAdd = try await mallory.request(add)
            #expect(refusedAdd.code == 4317)
            let refusedKick = try await mallory.request(kick)
            #expect(refusedKick.code == 4317)
            #expect(reviewed.value == 2, "refused changes were reviewed")

            let impostor = try await TestClient.connect(port: server.port)
            var open = Command(cmd: .session, op: .open)
            open.peerId = "modbot"
            let observed4 = try await impostor.request(open).code
            #expect(observed4 == 4102, "an interceptor id needs its signature")
            var fakeVerdict = Self.verdict("allow")
            fakeVerdict.id = "h1"
            let observed5 = try await tom.request(fakeVerdict).code
            #expect(observed5 == 4904)
        }
    }
}

final class Counter: Sendable {
    private let count = Mutex(0)
    var value: Int { count.withLock { $0 } }

    /// Returns the value before incrementing.
    func increment() -> Int {
        count.withLock { count in
            defer { count += 1 }
            return count
        }
    }
}
