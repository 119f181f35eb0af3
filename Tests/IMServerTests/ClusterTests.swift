import Foundation
import HookbotTestSupport
import IMCore
import IMServer
import IMSignatures
import Synchronization
import XCTest

/// Several server nodes on one PostgreSQL database (the throwaway cluster of `scripts/with-postgres.sh`),
/// with clients spread over the nodes. Skipped when no cluster runs.
final class ClusterTests: XCTestCase {
    static let secret = "cluster-interceptor-secret"

    /// `count` servers sharing a fresh schema.
    private func nodes(_ count: Int = 3, configure: @escaping (inout ServerConfiguration) -> Void = { _ in }) async throws
        -> [ServerHarness]
    {
        let url = try TestDatabase.postgresURL(schema: TestDatabase.schemaName())
        var nodes: [ServerHarness] = []
        for _ in 0..<count {
            nodes.append(
                try await ServerHarness.start { configuration in
                    configuration.databaseURL = url
                    configure(&configuration)
                })
        }
        return nodes
    }

    private func stop(_ nodes: [ServerHarness]) async {
        for node in nodes { await node.stop() }
    }

    func testMessagesFanOutInOneOrderOnEveryNodeWithEventsAndReceipts() async throws {
        let cluster = try await nodes()
        let tom = try await cluster[0].login("Tom")
        let jerry = try await cluster[1].login("Jerry")
        let spike = try await cluster[2].login("Spike")
        let cid = try await tom.startConversation(members: ["Jerry", "Spike"], name: "across")
        // Membership events reach members on the other nodes.
        for client in [jerry, spike] {
            let invited = try await client.next { $0.op == .invited }
            XCTAssertEqual(invited.cid, cid)
            let joined = try await client.next { $0.op == .membersJoined }
            XCTAssertEqual(Set(joined.m ?? []), ["Tom", "Jerry", "Spike"])
        }
        // Tom (node 0) and Jerry (node 1) send at once; every receiver sees one order: the stored one.
        async let fromTom: [Command] = (0..<40).asyncMap { try await tom.sendText("tom \($0)", to: cid) }
        async let fromJerry: [Command] = (0..<40).asyncMap { try await jerry.sendText("jerry \($0)", to: cid) }
        let acks = try await fromTom + fromJerry
        XCTAssertTrue(acks.allSatisfy { $0.uid != nil }, "every message acknowledged")
        var atSpike: [Command] = []
        for _ in 0..<80 { atSpike.append(try await spike.nextMessage()) }
        let timestamps = atSpike.compactMap(\.timestamp)
        XCTAssertEqual(timestamps, timestamps.sorted(), "node 2 delivers in timestamp order")
        XCTAssertEqual(Set(timestamps).count, 80, "timestamps are unique within the conversation")
        let history = try required(try await spike.history(cid, limit: 100).logs)
        XCTAssertEqual(atSpike.map(\.id), history.map(\.msgId), "delivered in the stored order")
        var tomSees: [String] = []
        for _ in 0..<40 { tomSees.append(try required(try await tom.nextMessage().id)) }
        XCTAssertEqual(tomSees, history.filter { $0.from == "Jerry" }.map(\.msgId), "node 0 sees Jerry's messages in order")

        // Receipts: Spike (node 2) acknowledges a message Tom (node 0) sent with a receipt, then reads it.
        let asked = try await tom.sendText("did you get this?", to: cid, receipt: true)
        let delivered = try await spike.next { $0.cmd == .direct && $0.id == asked.uid }
        spike.acknowledge(delivered)
        let rcp = try await tom.next { $0.cmd == .rcp && $0.read != true }
        XCTAssertEqual(rcp.id, asked.uid)
        XCTAssertEqual(rcp.from, "Spike")
        var read = Command(cmd: .read)
        read.cid = cid
        _ = try await spike.request(read)
        let readReceipt = try await tom.next { $0.cmd == .rcp && $0.read == true }
        XCTAssertEqual(readReceipt.from, "Spike")

        // Leaving and updates are heard on the other nodes too.
        let quit = Command.conv(.quit, cid)
        _ = try await jerry.request(quit)
        let left = try await spike.next { $0.op == .membersLeft }
        XCTAssertEqual(left.m, ["Jerry"])
        var update = Command.conv(.update, cid)
        update.attr = ["name": "renamed"]
        _ = try await tom.request(update)
        let updated = try await spike.next { $0.op == .updated && $0.i == nil }
        XCTAssertEqual(updated.cid, cid)
        // The cluster's metrics: node 2 heard the 81 messages and the events, and listens.
        let metrics = cluster[2].server.telemetry.exposition()
        XCTAssertTrue(metrics.contains("hookbot_cluster_announcements_received_total{kind=\"message\"} 81"), metrics)
        XCTAssertTrue(metrics.contains("hookbot_cluster_listening 1"), metrics)
        XCTAssertTrue(metrics.contains("hookbot_cluster_delivery_latency_seconds_count"), metrics)
        await stop(cluster)
    }

    func testATagTakenOnAnotherNodeClosesTheOlderSessionWith4111() async throws {
        let cluster = try await nodes(2)
        let phone = try await cluster[0].login("Tom", tag: "mobile", deviceID: "phone")
        let tablet = try await cluster[1].login("Tom", tag: "mobile", deviceID: "tablet")
        let closed = try await phone.next { $0.cmd == .session && $0.op == .closed }
        XCTAssertEqual(closed.code, 4111)
        // The newer session stays.
        let cid = try await tablet.startConversation(members: ["Jerry"])
        XCTAssertFalse(cid.isEmpty)
        let stray = await tablet.settle { $0.cmd == .session && $0.op == .closed }
        XCTAssertTrue(stray.isEmpty, "the newest login keeps its session")
        // Online status is cluster-wide.
        let jerry = try await cluster[0].login("Jerry")
        var query = Command(cmd: .session, op: .query)
        query.sessionPeerIds = ["Tom", "Nobody"]
        let online = try await jerry.request(query)
        XCTAssertEqual(online.onlineSessionPeerIds, ["Tom"])
        await stop(cluster)
    }

    func testASignatureUsedOnOneNodeIsRefusedOnAnotherAndTokensWorkEverywhere() async throws {
        let cluster = try await nodes(2) { configuration in
            configuration.appID = "app"
            configuration.masterKey = "master-secret"
        }
        let t = Int64(Date().timeIntervalSince1970)
        var open = Command(cmd: .session, op: .open)
        open.peerId = "Tom"
        open.t = t
        open.n = UUID().uuidString
        open.s = Signer(appID: "app", masterKey: "master-secret").sign(.open, clientID: "Tom", timestamp: t, nonce: open.n ?? "")
        let first = try await TestClient.connect(port: cluster[0].port)
        let opened = try await first.request(open)
        XCTAssertEqual(opened.op, .opened)
        let replay = try await TestClient.connect(port: cluster[1].port)
        let refused = try await replay.request(open)
        XCTAssertEqual(refused.code, IMErrorCode.signatureFailed.rawValue, "the nonce was spent on node 0")
        // The session token from node 0 resumes the session on node 1.
        var resume = Command(cmd: .session, op: .open)
        resume.peerId = "Tom"
        resume.st = opened.st
        let resumed = try await replay.request(resume)
        XCTAssertEqual(resumed.op, .opened)
        await stop(cluster)
    }

    /// A burst stored through one node gets timestamps ahead of the clock; a receiver logging in on another node,
    /// whose own pipeline never saw it, still gets all of it flagged offline, and what is sent after the login live.
    func testABurstStoredThroughAnotherNodeIsOfflineAtLogin() async throws {
        let cluster = try await nodes(2)
        try await assertABurstArrivesOffline(sentThrough: cluster[0], receivedThrough: cluster[1])
        await stop(cluster)
    }

    func testUniqueStartsInParallelOnDifferentNodesMakeOneConversation() async throws {
        let cluster = try await nodes()
        var clients: [TestClient] = []
        for (index, name) in ["Tom", "Jerry", "Spike"].enumerated() { clients.append(try await cluster[index].login(name)) }
        let ids = try await withThrowingTaskGroup(of: String.self) { group in
            for round in 0..<12 {
                let client = clients[round % 3]
                group.addTask { try await client.startConversation(members: ["Tom", "Jerry", "Spike"], unique: true) }
            }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        XCTAssertEqual(ids.count, 1, "one unique conversation: \(ids)")
        await stop(cluster)
    }

    func testChatRoomCountsAndMessagesAreClusterWide() async throws {
        let cluster = try await nodes()
        let tom = try await cluster[0].login("Tom")
        var start = Command(cmd: .conv, op: .start)
        start.transient = true
        start.name = "room"
        let cid = try required(try await tom.request(start).cid)
        var visitors: [TestClient] = []
        for (index, name) in ["Jerry", "Spike", "Tyke"].enumerated() {
            let visitor = try await cluster[(index + 1) % 3].login(name)
            let join = Command.conv(.join, cid)
            _ = try await visitor.request(join)
            visitors.append(visitor)
        }
        let count = Command.conv(.count, cid)
        for client in [tom, visitors[0], visitors[1]] {
            let reply = try await client.request(count)
            XCTAssertEqual(reply.count, 4, "every node counts the whole room")
        }
        try await tom.sendText("hello room", to: cid)
        for visitor in visitors {
            let message = try await visitor.nextMessage()
            XCTAssertEqual(message.text, "hello room")
        }
        let quit = Command.conv(.quit, cid)
        _ = try await visitors[0].request(quit)
        let after = try await tom.request(count)
        XCTAssertEqual(after.count, 3)
        await stop(cluster)
    }

    func testMessagesSentOnANodeWithoutTheInterceptorAreReviewed() async throws {
        try await checkMessagesSentOnANodeWithoutTheInterceptorAreReviewed(inProcess: false)
    }

    /// The interceptor attached in process to node 0: node 1's requests reach it as values and its answers
    /// go back to node 1 as verdict commands.
    func testMessagesSentOnANodeWithoutAnInProcessInterceptorAreReviewed() async throws {
        try await checkMessagesSentOnANodeWithoutTheInterceptorAreReviewed(inProcess: true)
    }

    private func checkMessagesSentOnANodeWithoutTheInterceptorAreReviewed(inProcess: Bool) async throws {
        let cluster = try await nodes(2) { configuration in
            configuration.interception.interceptors = [.init(clientID: "modbot", secret: Self.secret)]
            configuration.interception.deadlineMillis = 2000
        }
        // The interceptor is on node 0; Tom and Jerry are on node 1.
        let bot = try await inProcess ? TestClient.attach(to: cluster[0].server) : TestClient.connect(port: cluster[0].port)
        let opened = try await bot.request(Command.interceptorOpen("modbot", secret: Self.secret))
        XCTAssertEqual(opened.op, .opened)
        try await waitUntilInterceptorAttached(cluster[1].server, "modbot")
        let reviews = Collected()
        let loop = Task {
            while !Task.isCancelled, let request = try? await bot.next(timeout: .seconds(30), where: { $0.cmd == .hook }) {
                reviews.add(request.kind ?? "")
                var verdict = Command(cmd: .hook, op: .verdict)
                verdict.id = request.id
                let text = request.msg.flatMap(TypedMessage.decode)?.text ?? ""
                if request.kind == "message", text.contains("forbidden") {
                    verdict.verdict = "drop"
                    verdict.reason = "contains a forbidden word"
                    verdict.appCode = 42
                } else if request.kind == "membership", request.m == ["Spike"] {
                    verdict.verdict = "drop"
                    verdict.reason = "no Spike here"
                } else {
                    verdict.verdict = "allow"
                }
                bot.send(verdict)
            }
        }
        defer { loop.cancel() }
        let tom = try await cluster[1].login("Tom")
        let jerry = try await cluster[1].login("Jerry")
        let cid = try await tom.startConversation(members: ["Jerry"])
        let refused = try await tom.sendText("this is forbidden", to: cid)
        XCTAssertEqual(refused.code, IMErrorCode.messageRejectedByApp.rawValue)
        XCTAssertEqual(refused.appCode, 42)
        let allowed = try await tom.sendText("this is fine", to: cid)
        XCTAssertNotNil(allowed.uid)
        let delivered = try await jerry.nextMessage()
        XCTAssertEqual(delivered.text, "this is fine")
        let leaked = await jerry.settle { $0.text == "this is forbidden" }
        XCTAssertTrue(leaked.isEmpty)
        // Membership changes made on node 1 are reviewed on node 0 too.
        var invite = Command.conv(.add, cid, members: ["Spike"])
        let refusedInvite = try await tom.request(invite)
        XCTAssertEqual(refusedInvite.code, IMErrorCode.conversationRejectedByApp.rawValue)
        invite.m = ["Tyke"]
        let allowedInvite = try await tom.request(invite)
        XCTAssertEqual(allowedInvite.allowedPids, ["Tyke"])
        XCTAssertEqual(reviews.all, ["message", "message", "membership", "membership"])
        await stop(cluster)
    }

    /// A node whose listening connection is cut cannot know what it missed: it tells its clients to go away,
    /// listens again and is ready again; what was sent meanwhile reaches a client that logs in again.
    func testANodeThatLosesItsAnnouncementsSendsItsClientsAwayAndRecovers() async throws {
        let cluster = try await nodes(2)
        let tom = try await cluster[0].login("Tom")
        let jerry = try await cluster[1].login("Jerry")
        let cid = try await tom.startConversation(members: ["Jerry"])
        _ = try await jerry.next { $0.op == .invited }
        try psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query ILIKE 'LISTEN%'")
        for client in [tom, jerry] { _ = try await client.next { $0.cmd == .goaway } }
        for node in cluster {
            let deadline = ContinuousClock.now + .seconds(15)
            while await node.server.notReadyReason() != nil, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
            let reason = await node.server.notReadyReason()
            XCTAssertNil(reason)
        }
        let tomAgain = try await cluster[0].login("Tom")
        let sent = try await tomAgain.sendText("after the cut", to: cid)
        let jerryAgain = try await cluster[1].login("Jerry")
        let received = try await jerryAgain.nextMessage()
        XCTAssertEqual(received.id, sent.uid)
        let live = try await tomAgain.sendText("live again", to: cid)
        let second = try await jerryAgain.nextMessage()
        XCTAssertEqual(second.id, live.uid, "announcements flow again")
        let failures = cluster[1].server.telemetry.exposition()
        XCTAssertTrue(failures.contains("hookbot_cluster_listener_failures_total 1"), failures)
        await stop(cluster)
    }

    /// Runs a statement on the throwaway cluster with psql.
    private func psql(_ statement: String) throws {
        let (status, output) = try runProcess(
            URL(fileURLWithPath: "/usr/bin/env"),
            ["psql", "-q", "-v", "ON_ERROR_STOP=1", try XCTUnwrap(TestDatabase.clusterURL), "-c", statement])
        XCTAssertEqual(status, 0, "psql -c \(statement): \(output)")
    }

    /// Clients on all three nodes (separate `hookbot server` processes) send as fast as they can; one node
    /// is killed with SIGKILL. Every acknowledged message is stored exactly once, and a member whose node
    /// died gets what it missed when it logs in on another node.
    func testANodeKilledMidStreamLosesNothingCollected() async throws {
        let binary = try XCTUnwrap(ServerProcess.binaryURL(), "build the hookbot executable first (swift build)")
        let url = try TestDatabase.postgresURL(schema: TestDatabase.schemaName())
        let processes = try await [
            ServerProcess.launch(binary: binary, store: ["--database", url]),
            ServerProcess.launch(binary: binary, store: ["--database", url]),
            ServerProcess.launch(binary: binary, store: ["--database", url]),
        ]
        defer { for process in processes { process.kill() } }
        let senders = try await [
            TestClient.login("Tom", port: processes[0].port), TestClient.login("Jerry", port: processes[1].port),
            TestClient.login("Spike", port: processes[2].port),
        ]
        let cid = try await senders[0].startConversation(members: ["Jerry", "Spike", "Eve"])
        // Eve listens on the node that dies.
        let eve = try await TestClient.login("Eve", port: processes[2].port)
        let acked = Collected()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, sender) in senders.enumerated() {
                group.addTask {
                    for k in 0..<150 {
                        guard let ack = try? await sender.sendText("s\(index)-\(k)", to: cid, timeout: .seconds(5)) else { return }
                        guard let uid = ack.uid else { return }
                        acked.add(uid)
                    }
                }
            }
            group.addTask {
                while acked.all.count < 150 { try await Task.sleep(for: .milliseconds(2)) }
                processes[2].kill()
            }
            try await group.waitForAll()
        }
        let acknowledged = acked.all
        XCTAssertGreaterThanOrEqual(acknowledged.count, 300, "the live nodes' senders went on")
        let eveSawLive = Set(eve.drain().filter { $0.cmd == .direct }.compactMap(\.id))

        let check = try await TestClient.login("Tom", port: processes[0].port)
        let logs = try required(try await check.history(cid, limit: 1000).logs)
        let stored = logs.map(\.msgId)
        XCTAssertEqual(stored.count, Set(stored).count, "no message stored twice")
        XCTAssertTrue(
            Set(acknowledged).isSubset(of: Set(stored)), "\(Set(acknowledged).subtracting(stored).count) acknowledged messages lost")

        // Eve reconnects (to node 1) and receives, as offline messages, everything she had not acknowledged.
        let eveAgain = try await TestClient.login("Eve", port: processes[1].port)
        var offline = Set<String>()
        while offline.count < stored.count, let message = try? await eveAgain.nextMessage(timeout: .seconds(5)) {
            offline.insert(try required(message.id))
        }
        XCTAssertEqual(offline.union(eveSawLive), Set(stored), "Eve has every stored message after reconnecting")
        XCTAssertEqual(offline, Set(stored), "nothing Eve did not acknowledge is missing from her backlog")
    }
}

/// Strings collected from several tasks (acknowledged message ids, reviews seen).
private final class Collected: Sendable {
    private let ids = Mutex<[String]>([])
    func add(_ id: String) { ids.withLock { $0.append(id) } }
    var all: [String] { ids.withLock { $0 } }
}

extension Sequence where Element: Sendable {
    /// Maps in order, one element at a time.
    fileprivate func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}
