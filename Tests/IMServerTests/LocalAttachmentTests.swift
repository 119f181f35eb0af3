import Foundation
import HookbotTestSupport
import IMCore
import IMServer
import Testing

/// In-process attachments (the embedded bot's connection): commands sent all at once, from several tasks
/// or from one, are handled one at a time in the order they were sent, as a WebSocket's frames are.
@Suite struct LocalAttachmentTests {
    @Test func manyCommandsSentAtOnceAreHandledInOrder() async throws {
        try await ServerHarness.start().whileRunning { server in
            let bot = try TestClient.attach(to: server.server)
            var open = Command(cmd: .session, op: .open)
            open.peerId = "小助手"
            let opened = try await bot.request(open)
            #expect(opened.op == .opened)
            let jerry = try await server.login("Jerry")
            let cid = try await bot.startConversation(members: ["Jerry"], name: "早安 ☀️")

            // 300 messages, none waiting for another: a reply to each, an ack per message in order.
            let count = 300
            let texts = (0..<count).map { "第 \($0) 条 🎉 @Jerry" }
            for (k, text) in texts.enumerated() {
                var direct = Command(cmd: .direct, i: 10_000 + k)
                direct.cid = cid
                direct.msg = TypedMessage.text(text).encoded()
                direct.mentionPids = ["Jerry"]
                bot.send(direct)
            }
            var acks: [Command] = []
            for k in 0..<count { acks.append(try await bot.next { $0.i == 10_000 + k }) }
            #expect(acks.allSatisfy { $0.cmd == .ack && $0.code == nil }, "every message stored")
            let timestamps = acks.compactMap(\.t)
            #expect(timestamps.count == count)
            #expect(timestamps == timestamps.sorted(), "stored in the order sent")

            var received: [String] = []
            for _ in 0..<count { received.append(TypedMessage.decode(try await jerry.nextMessage().msg ?? "")?.text ?? "") }
            #expect(received == texts, "delivered in the order sent")
            let history = try #require(try await jerry.history(cid, limit: count).logs).compactMap { TypedMessage.decode($0.data)?.text }
            #expect(history.reversed() == texts || history == texts, "history holds each once")
            #expect(Set(history).count == count)

            // Closing after a burst: what was sent before the close is still handled, then the connection ends.
            var last = Command(cmd: .direct, i: 99_999)
            last.cid = cid
            last.msg = TypedMessage.text("晚安 🌙").encoded()
            bot.send(last)
            await bot.close()
            #expect(bot.isClosed, "close() returns once the attachment has ended")
            let goodNight = try await jerry.nextMessage()
            #expect(TypedMessage.decode(goodNight.msg ?? "")?.text == "晚安 🌙")
        }
    }
}
