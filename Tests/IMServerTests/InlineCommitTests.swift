import Dispatch
import Foundation
import HookbotTestSupport
import IMCore
import NIOCore
import XCTest

@testable import IMServer

/// An idle SQLite pipeline commits a message on the event loop that enqueued it (`MessagePipeline.commitInline`), a
/// busy one on its writer thread; either way a conversation's messages are stored, delivered and acknowledged in order.
final class InlineCommitTests: XCTestCase {
    /// One sender at human pace: every message is committed on the event loop that read it (no writer-thread batch), and
    /// each arrives, acknowledged, with an id and a timestamp above the one before.
    func testAnIdlePipelineCommitsOnTheEventLoopThatReadTheMessage() async throws {
        try XCTSkipIf(TestDatabase.backend == .postgres, "PostgreSQL commits on Swift's pool")
        // A budget no commit exceeds, however busy the machine running the tests.
        let server = try await startServer { $0.inlineCommitBudget = .seconds(60) }
        let (tom, jerry) = try await server.login("Tom", "Jerry")
        let cid = try await tom.startConversation(members: ["Jerry"], name: "早安 ☕️")
        let counters = server.server.service.storageCounters
        let before = (counters.snapshot.transactions, counters.inlineTransactions)
        var last: Int64 = 0
        for k in 0..<20 {
            let ack = try await tom.sendText("第 \(k) 条 @Jerry 🐭", to: cid)
            let t = try XCTUnwrap(ack.t)
            XCTAssertGreaterThan(t, last)
            last = t
            let received = try await jerry.nextMessage()
            XCTAssertEqual(received.text, "第 \(k) 条 @Jerry 🐭")
            XCTAssertEqual(received.id, ack.uid)
            jerry.acknowledge(received)
        }
        let transactions = counters.snapshot.transactions - before.0
        let inline = counters.inlineTransactions - before.1
        XCTAssertGreaterThanOrEqual(inline, 20, "each message alone, committed inline")
        XCTAssertLessThanOrEqual(inline, transactions)
    }

    /// `inlineCommitLimit = 0` keeps every commit on the writer thread.
    func testALimitOfZeroCommitsEverythingOnTheWriterThread() async throws {
        try XCTSkipIf(TestDatabase.backend == .postgres, "PostgreSQL commits on Swift's pool")
        let server = try await startServer { $0.inlineCommitLimit = 0 }
        let (tom, jerry) = try await server.login("Tom", "Jerry")
        let cid = try await tom.startConversation(members: ["Jerry"])
        for k in 0..<5 {
            let ack = try await tom.sendText("消息 \(k)", to: cid)
            XCTAssertNil(ack.code)
            let received = try await jerry.nextMessage()
            XCTAssertEqual(received.id, ack.uid)
        }
        XCTAssertEqual(server.server.service.storageCounters.inlineTransactions, 0)
        XCTAssertGreaterThanOrEqual(server.server.service.storageCounters.snapshot.transactions, 5)
    }

    /// While recent one-message commits take longer than `inlineCommitBudget` on average (a slow disk), commits stay on
    /// the writer thread: with a budget of zero only the first, before any was timed, is made inline.
    func testCommitsSlowerThanTheBudgetStayOnTheWriterThread() async throws {
        try XCTSkipIf(TestDatabase.backend == .postgres, "PostgreSQL commits on Swift's pool")
        let server = try await startServer { $0.inlineCommitBudget = .zero }
        let (tom, jerry) = try await server.login("Tom", "Jerry")
        let cid = try await tom.startConversation(members: ["Jerry"])
        for k in 0..<10 {
            let ack = try await tom.sendText("慢盘 \(k) 🐢", to: cid)
            let received = try await jerry.nextMessage()
            XCTAssertEqual(received.id, ack.uid)
        }
        XCTAssertLessThanOrEqual(server.server.inlineTransactions, 1)
        XCTAssertGreaterThanOrEqual(server.server.storageStats.transactions, 10)
    }

    /// Twelve members of a group send at once, several rounds, while the writer thread is busy with some batches and
    /// idle at others: both kinds of commit happen, every member receives every other member's messages exactly once, in
    /// timestamp order, and each sender's acks come back in the order it sent.
    func testInlineAndWriterThreadCommitsInterleaveInOrder() async throws {
        try XCTSkipIf(TestDatabase.backend == .postgres, "PostgreSQL commits on Swift's pool")
        let server = try await startServer { $0.inlineCommitBudget = .seconds(60) }
        let names = (1...12).map { "member\($0)" }
        var clients: [TestClient] = []
        for name in names { clients.append(try await server.login(name)) }
        let cid = try await clients[0].startConversation(members: Array(names.dropFirst()), name: "大家好 👋")
        let counters = server.server.service.storageCounters
        let rounds = 15
        for round in 0..<rounds {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (k, client) in clients.enumerated() {
                    group.addTask {
                        // Two at once per sender: its acks must come back in the order of its serials.
                        async let first = client.sendText("r\(round) m\(k) a", to: cid)
                        async let second = client.sendText("r\(round) m\(k) b 🎉", to: cid)
                        let (a, b) = try await (first, second)
                        XCTAssertNil(a.code)
                        XCTAssertNil(b.code)
                    }
                }
                try await group.waitForAll()
            }
            if round % 3 == 0 { try await Task.sleep(for: .milliseconds(20)) }
        }
        let expected = rounds * 2 * (names.count - 1)
        for (k, client) in clients.enumerated() {
            var times: [Int64] = []
            var seen = Set<String>()
            for _ in 0..<expected {
                let message = try await client.nextMessage()
                times.append(try XCTUnwrap(message.timestamp))
                XCTAssertTrue(seen.insert(try XCTUnwrap(message.id)).inserted, "delivered twice: \(message)")
                XCTAssertFalse(message.text?.contains("m\(k) ") ?? true, "a member's own message came back")
            }
            XCTAssertEqual(times, times.sorted(), "member\(k + 1) received out of commit order")
            let extra = await client.settle(for: .milliseconds(50)) { $0.cmd == .direct }
            XCTAssertTrue(extra.isEmpty, "\(extra)")
        }
        let (transactions, messages) = counters.snapshot
        XCTAssertGreaterThanOrEqual(messages, rounds * 2 * names.count)
        XCTAssertGreaterThan(counters.inlineTransactions, 0, "some batches committed inline")
        XCTAssertGreaterThan(transactions - counters.inlineTransactions, 0, "some on the writer thread")
    }

    /// A frame written on a session's event loop waits behind frames other threads handed to that loop earlier and the
    /// loop has not written yet (`LoopWrites.writeInLoop`): a batch committed inline must not overtake the writer
    /// thread's batch before it.
    func testAFrameWrittenOnTheLoopGoesOutAfterTheFramesHandedOverBeforeIt() async throws {
        let server = try await startServer()
        let (tom, jerry) = try await server.login("Tom", "Jerry")
        let cid = try await tom.startConversation(members: ["Jerry"])
        let connection = try XCTUnwrap(server.server.service.registry.connections(of: "Jerry").first)
        let loop = try XCTUnwrap(connection.transport.writer?.eventLoop)
        func direct(_ text: String) -> Command {
            var command = Command(cmd: .direct)
            command.cid = cid
            command.id = Identifiers.messageID()
            command.msg = text
            command.fromPeerId = "Tom"
            command.timestamp = Identifiers.nowMillis()
            return command
        }
        let handedOver = DispatchSemaphore(value: 0)
        // The loop is held until the first frame has been handed over from this thread (not the loop's), so the loop's
        // task that writes it waits behind this one; then, on the loop, the second frame goes out through an outbox.
        let onLoop = loop.submit {
            handedOver.wait()
            let outbox = Outbox()
            connection.send(direct("第二 (on the loop)"), via: outbox)
            outbox.send()
        }
        XCTAssertFalse(loop.inEventLoop)
        connection.send(direct("第一 (handed over)"))
        handedOver.signal()
        try await onLoop.get()
        let first = try await jerry.nextMessage()
        let second = try await jerry.nextMessage()
        XCTAssertEqual([first.msg, second.msg], ["第一 (handed over)", "第二 (on the loop)"])
    }
}
