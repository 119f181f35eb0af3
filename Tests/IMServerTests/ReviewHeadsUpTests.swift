import Foundation
import HookbotTestSupport
import IMCore
import NIOCore
import Synchronization
import Testing

@testable import IMServer

/// An in-process interceptor's heads-up (`ReviewHeadsUp`, issue 30, round 9): the server tells it as soon as a frame
/// that sends a message arrives, before it decodes the frame and asks for the review, so that the bot's Lua thread
/// is awake when the review comes.
@Suite(.serialized) struct ReviewHeadsUpTests {
    static let secret = "interceptor-secret"

    @Test func aFrameThatSendsAMessageGivesTheInterceptorAHeadsUpBeforeTheReview() async throws {
        try await ServerHarness.start { configuration in
            configuration.interception.interceptors = [.init(clientID: "modbot", secret: Self.secret)]
            configuration.interception.deadlineMillis = 5000
        }.whileRunning { server in
            let log = Mutex<[String]>([])
            let bot = try LocalRawClient(
                server.server,
                answering: { request, answer in
                    if case .message = request { log.withLock { $0.append("review") } }
                    answer(.allow)
                },
                headsUp: { log.withLock { $0.append("heads-up") } })
            #expect(try await bot.request(Command.interceptorOpen("modbot", secret: Self.secret)).op == .opened)
            try await waitUntilInterceptorAttached(server.server, "modbot")
            // Over WebSockets, in Hookbot's JSON protocol.
            let tom = try await server.login("Tom")
            let jerry = try await server.login("Jerry")
            let cid = try await tom.startConversation(members: ["Jerry"])
            _ = try await jerry.request(Command(cmd: .conv, op: .query))
            #expect(log.withLock { $0 }.isEmpty, "logins, a conversation's start and a query are no messages")

            try await tom.sendText("周末一起去爬山吗？🏔️", to: cid)
            try await tom.sendText("@Jerry 明天见 👋", to: cid)
            #expect(log.withLock { $0 } == ["heads-up", "review", "heads-up", "review"])
            #expect(try await jerry.nextMessage().text == "周末一起去爬山吗？🏔️")
            await tom.close()
            await jerry.close()
            bot.close()
        }
    }

    /// The heads-up is called through the same frames at the fiftieth message as at the first (the call once went
    /// through one more reabstraction thunk per frame received before it).
    @Test func theHeadsUpIsCalledTheSameWayAtEveryMessage() async throws {
        try await ServerHarness.start { configuration in
            configuration.interception.interceptors = [.init(clientID: "modbot", secret: Self.secret)]
            configuration.interception.deadlineMillis = 5000
        }.whileRunning { server in
            let depths = Mutex<[Int]>([])
            let bot = try LocalRawClient(
                server.server, answering: { _, answer in answer(.allow) },
                headsUp: { depths.withLock { $0.append(Thread.callStackReturnAddresses.count) } })
            #expect(try await bot.request(Command.interceptorOpen("modbot", secret: Self.secret)).op == .opened)
            try await waitUntilInterceptorAttached(server.server, "modbot")
            let tom = try await server.login("Tom")
            let cid = try await tom.startConversation(members: ["Jerry"])
            for k in 1...50 { try await tom.sendText("第 \(k) 条 ✉️", to: cid) }
            let seen = depths.withLock { $0 }
            #expect(seen.count == 50)
            #expect(Set(seen).count == 1, "stack depths at the heads-ups: \(seen)")
            await tom.close()
            bot.close()
        }
    }

    @Test func noHeadsUpGoesToAnInterceptorThatIsNotFirstInTheChainOrHasLeft() async throws {
        try await ServerHarness.start { configuration in
            configuration.interception.interceptors = [
                .init(clientID: "first", secret: Self.secret), .init(clientID: "second", secret: Self.secret),
            ]
            configuration.interception.deadlineMillis = 5000
        }.whileRunning { server in
            let headsUps = Mutex<[String]>([])
            func interceptor(_ name: String) async throws -> LocalRawClient {
                let client = try LocalRawClient(
                    server.server, answering: { _, answer in answer(.allow) }, headsUp: { headsUps.withLock { $0.append(name) } })
                #expect(try await client.request(Command.interceptorOpen(name, secret: Self.secret)).op == .opened)
                try await waitUntilInterceptorAttached(server.server, name)
                return client
            }
            let first = try await interceptor("first")
            let second = try await interceptor("second")
            let tom = try await server.login("Tom")
            let cid = try await tom.startConversation(members: ["Jerry"])
            try await tom.sendText("你好 👋", to: cid)
            // The second is asked after the first has answered: a heads-up to it would come a review too early.
            #expect(headsUps.withLock { $0 } == ["first"])
            first.close()
            try await waitUntil("the first interceptor to leave") { !server.server.isInterceptorAttached("first") }
            try await tom.sendText("再见 👋", to: cid)
            #expect(headsUps.withLock { $0 } == ["first"], "a closed connection's heads-up is forgotten")
            await tom.close()
            second.close()
        }
    }

    /// What each wire format's frame of a `direct` command starts with, as the server's own codec writes it (the
    /// LeanCloud SDKs' protobuf encoders also write fields in number order), and of other commands.
    @Test func theFrameTestKnowsAMessageInEachWireFormat() throws {
        var direct = Command(cmd: .direct)
        direct.cid = "5f1c0d2e"
        direct.msg = TypedMessage.text("你好").encoded()
        direct.i = 7
        var transient = direct
        transient.transient = true
        let others = [
            Command(cmd: .session, op: .open), Command(cmd: .conv, op: .query), Command(cmd: .ack), Command(cmd: .read),
            Command(cmd: .session, op: .close),
        ]
        for format in [WireFormat.json, .protobuf, .protobufBase64] {
            let codec = FrameCodec(format)
            func payload(_ command: Command) -> ByteBuffer {
                switch codec.encode(command) {
                case .text(let text): ByteBuffer(string: text)
                case .binary(let buffer): buffer
                default: ByteBuffer()
                }
            }
            #expect(format.probablySendsMessage(payload(direct)), "\(format)")
            // A transient message is not reviewed; the frame test does not tell it apart (a heads-up in vain).
            #expect(format.probablySendsMessage(payload(transient)), "\(format)")
            for other in others {
                #expect(!format.probablySendsMessage(payload(other)), "\(format) \(other.cmd) \(other.op?.rawValue ?? "")")
            }
            #expect(!format.probablySendsMessage(ByteBuffer()), "\(format)")
        }
    }
}
