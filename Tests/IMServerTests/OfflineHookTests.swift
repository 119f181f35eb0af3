import Foundation
import HookbotTestSupport
import IMCore
import PushProviders
import Synchronization
import XCTest

@testable import IMServer

/// The `on_offline` exchange on a real server (docs/PUSH.md, "on_offline"): the interceptor, logged in over a
/// WebSocket, gets a hook request of kind `offline` for each stored message with offline receivers and its
/// answer decides each receiver's push; no answer, a bad answer or no interceptor send the defaults. The
/// pushes reach a webhook gateway on loopback that checks their signature.
final class OfflineHookTests: XCTestCase {
    static let secret = "interceptor-secret"

    func start(gateway: PushGateway, deadline: Int) async throws -> ServerHarness {
        try await ServerHarness.start { configuration in
            configuration.push.providers = [
                PushProviderConfiguration(.webhook(WebhookSettings(url: gateway.url, secret: PushPipelineTests.secret)))
            ]
            configuration.push.queue.pollInterval = .milliseconds(50)
            configuration.interception.interceptors = [.init(clientID: "modbot", secret: Self.secret)]
            configuration.push.offlineHookDeadlineMillis = deadline
        }
    }

    func send(_ client: TestClient, _ cid: String, _ text: String) async throws {
        var direct = Command(cmd: .direct)
        direct.cid = cid
        direct.msg = TypedMessage.text(text).encoded()
        let ack = try await client.request(direct)
        XCTAssertNil(ack.code, "\(ack)")
    }

    /// The interceptor: message reviews are allowed; `offline` requests are recorded and answered with
    /// `decide` (nil: not answered).
    func interceptor(
        _ server: ServerHarness, requests: PushTestBox<[Command]>, decide: @escaping @Sendable (Command) -> Command?
    ) async throws -> (TestClient, Task<Void, Never>) {
        let client = try await TestClient.connect(port: server.port)
        let reply = try await client.request(Command.interceptorOpen("modbot", secret: Self.secret))
        XCTAssertEqual(reply.op, .opened)
        try await waitUntilInterceptorAttached(server.server, "modbot")
        let loop = Task {
            while !Task.isCancelled, let request = try? await client.next(timeout: .seconds(30), where: { $0.cmd == .hook }) {
                var answer: Command?
                if request.kind == "offline" {
                    requests.withLock { $0.append(request) }
                    answer = decide(request)
                } else {
                    answer = Command(cmd: .hook, op: .verdict)
                    answer?.verdict = "allow"
                }
                guard var answer else { continue }
                answer.cmd = .hook
                answer.op = .verdict
                answer.id = request.id
                client.send(answer)
            }
        }
        return (client, loop)
    }

    static func answer(_ verdict: String, _ msg: String? = nil) -> Command {
        var command = Command(cmd: .hook, op: .verdict)
        command.verdict = verdict
        command.msg = msg
        return command
    }

    func testTheAnswerRewritesOneReceiverDropsAnotherAndReleasesTheRestAtOnce() async throws {
        let gateway = try await PushGateway(secret: PushPipelineTests.secret) { _ in 204 }
        addTeardownBlock(releasing: gateway) { await $0.shutdown() }
        // A long hold: pushes that arrive well before it were released by the answer.
        let server = try await start(gateway: gateway, deadline: 5000)
        addTeardownBlock(releasing: server) { await $0.stop() }
        for member in ["Jerry", "Spike", "Tyke"] { try await server.registerOffline(member, token: "\(member)-phone") }
        try await server.registerOffline("Tyke", token: "Tyke-tablet")
        let requests = PushTestBox<[Command]>([])
        let (bot, loop) = try await interceptor(server, requests: requests) { _ in
            Self.answer(
                "modify",
                #"{"Jerry": {"body": "Tom whispers", "badge": 5, "data": {"secret": 1, "from": null}}, "Spike": false, "*": {"sound": "bell"}}"#
            )
        }
        defer { loop.cancel() }
        let tom = try await server.login("Tom")
        let cid = try await tom.startConversation(members: ["Jerry", "Spike", "Tyke", "modbot"], name: "Kitchen")
        let sent = ContinuousClock.now
        try await send(tom, cid, "cheese")
        _ = try await gateway.waitFor(count: 3)
        let elapsed = ContinuousClock.now - sent
        let pushes = await gateway.settle()
        XCTAssertLessThan(elapsed, .milliseconds(4000), "released by the answer, not by the end of the hold")
        XCTAssertTrue(pushes.allSatisfy(\.signatureValid))
        var byToken: [String: [String: JSONValue]] = [:]
        for push in pushes {
            byToken[push.json?["device"]?["token"]?.stringValue ?? ""] = push.json?["notification"]?.objectValue
        }
        XCTAssertEqual(byToken.keys.sorted(), ["Jerry-phone", "Tyke-phone", "Tyke-tablet"], "Spike's push was dropped")
        let jerry = try XCTUnwrap(byToken["Jerry-phone"])
        XCTAssertEqual(jerry["body"], "Tom whispers")
        XCTAssertEqual(jerry["title"], "Kitchen", "fields the answer does not name keep the default")
        XCTAssertEqual(jerry["badge"], 5)
        XCTAssertEqual(jerry["sound"], "default", "\"*\" is for the receivers not named")
        XCTAssertEqual(jerry["data"]?["secret"], 1)
        XCTAssertEqual(jerry["data"]?["cid"]?.stringValue, cid)
        XCTAssertNil(jerry["data"]?["from"], "null removes a data key")
        for token in ["Tyke-phone", "Tyke-tablet"] {
            XCTAssertEqual(byToken[token]?["body"], "Tom: cheese")
            XCTAssertEqual(byToken[token]?["sound"], "bell")
            XCTAssertEqual(byToken[token]?["badge"], 1, "the badge stays the unread count")
        }
        // What the interceptor was asked.
        let asked = requests.withLock { $0 }
        XCTAssertEqual(asked.count, 1)
        let request = try XCTUnwrap(asked.first)
        XCTAssertEqual(request.cid, cid)
        XCTAssertEqual(request.fromPeerId, "Tom")
        XCTAssertNotNil(request.mid)
        XCTAssertEqual(request.msg, TypedMessage.text("cheese").encoded())
        XCTAssertEqual(request.m?.sorted(), ["Jerry", "Spike", "Tyke"], "each offline receiver with a device, once")
        XCTAssertEqual(request.attr?["deadline"], 5000)
        XCTAssertEqual(request.attr?["notification"]?["body"], "Tom: cheese")
        XCTAssertEqual(request.attr?["notification"]?["title"], "Kitchen")
        XCTAssertNil(request.attr?["notification"]?["badge"], "no badge: the unread count when it is sent")
        let depth = try await (server.server.service.store as? any PushQueueStore)?.pushQueueDepth()
        XCTAssertEqual(depth, 0)
        await bot.close()
    }

    /// Durability first: the default pushes are in the queue before the interceptor is asked, so a server killed
    /// while it waits for the answer sends them after a restart, once the hold has ended, exactly once.
    func testPushesHeldForAnAnswerSurviveASIGKILLAndGoAfterTheHold() async throws {
        try XCTSkipIf(TestDatabase.backend == .postgres, "one SQLite file across the kill")
        let binary = try XCTUnwrap(ServerProcess.binaryURL(), "build the hookbot executable first (swift build)")
        let gateway = try await PushGateway(secret: PushPipelineTests.secret) { _ in 204 }
        addTeardownBlock(releasing: gateway) { await $0.shutdown() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-offline-kill-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let settings = directory.appendingPathComponent("push.toml")
        let hold = 3000
        try """
        [push]
        offline_hook_deadline_ms = \(hold)

        [push.webhook]
        url = "\(gateway.url)"
        secret = "\(PushPipelineTests.secret)"
        """.write(to: settings, atomically: true, encoding: .utf8)
        let store = [
            "--db", directory.appendingPathComponent("kill.sqlite").path, "--push-config", settings.path,
            "--interceptor", "modbot=\(Self.secret)",
        ]
        let first = try await ServerProcess.launch(binary: binary, store: store)
        var killed = false
        defer { if !killed { first.kill() } }
        let jerry = try await TestClient.login("Jerry", port: first.port)
        var add = Command(cmd: .device, op: .add)
        add.device = .object(["provider": "webhook", "token": "jerry-phone"])
        let added = try await jerry.request(add)
        XCTAssertEqual(added.op, .added, "\(added)")
        await jerry.close()
        // The interceptor allows messages and never answers about offline receivers.
        let asked = PushTestBox(0)
        let (bot, loop) = try await silentInterceptor(port: first.port, asked: asked)
        defer { loop.cancel() }
        let tom = try await TestClient.login("Tom", port: first.port)
        let cid = try await tom.startConversation(members: ["Jerry", "modbot"])
        try await tom.waitUntilOffline(["Jerry"])
        let sent = ContinuousClock.now
        _ = try await tom.sendText("cheese", to: cid)
        // Killed while the interceptor is being asked: the push is queued (held), nothing sent yet.
        try await waitUntil("the interceptor to be asked", every: .milliseconds(10)) { asked.withLock { $0 } > 0 }
        XCTAssertEqual(asked.withLock { $0 }, 1)
        first.kill()
        killed = true
        XCTAssertEqual(gateway.requests().count, 0)

        let second = try await ServerProcess.launch(binary: binary, store: store)
        defer { second.kill() }
        let pushes = try await gateway.waitFor(count: 1)
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - sent, .milliseconds(hold - 200), "not before the hold ends")
        let settled = await gateway.settle()
        XCTAssertEqual(settled.count, 1, "exactly once")
        XCTAssertEqual(pushes.first?.json?["notification"]?["body"], "Tom: cheese")
        XCTAssertTrue(pushes.first?.signatureValid == true)
        await tom.close()
        await bot.close()
    }

    /// An interceptor on `port` that allows every message and never answers `offline` requests (counted).
    func silentInterceptor(port: Int, asked: PushTestBox<Int>) async throws -> (TestClient, Task<Void, Never>) {
        let bot = try await TestClient.connect(port: port)
        let opened = try await bot.request(Command.interceptorOpen("modbot", secret: Self.secret))
        XCTAssertEqual(opened.op, .opened)
        let loop = Task {
            while !Task.isCancelled, let request = try? await bot.next(timeout: .seconds(30), where: { $0.cmd == .hook }) {
                var allow = Command(cmd: .hook, op: .verdict)
                allow.verdict = "allow"
                allow.id = request.id
                if request.kind == "offline" { asked.withLock { $0 += 1 } } else { bot.send(allow) }
            }
        }
        return (bot, loop)
    }

    func testNoAnswerWaitsForTheHoldWhileABadAnswerUnhookedOrNoInterceptorSendTheDefaultsAtOnce() async throws {
        let gateway = try await PushGateway(secret: PushPipelineTests.secret) { _ in 204 }
        addTeardownBlock(releasing: gateway) { await $0.shutdown() }
        let hold = 1500
        let server = try await start(gateway: gateway, deadline: hold)
        addTeardownBlock(releasing: server) { await $0.stop() }
        try await server.registerOffline("Jerry", token: "jerry-phone")
        let mode = PushTestBox("silent")
        let requests = PushTestBox<[Command]>([])
        let (bot, loop) = try await interceptor(server, requests: requests) { _ -> Command? in
            switch mode.withLock({ $0 }) {
            case "bad": return Self.answer("modify", #"{"Jerry": {"body": 42}}"#)
            case "unhooked": return Self.answer("unhooked")
            default: return nil
            }
        }
        defer { loop.cancel() }
        let tom = try await server.login("Tom")
        let cid = try await tom.startConversation(members: ["Jerry", "modbot"], name: "Kitchen")

        /// Sends `text` and answers how long its push took; it must say the default.
        func pushDelay(_ text: String, count: Int) async throws -> Duration {
            let sent = ContinuousClock.now
            try await send(tom, cid, text)
            let pushes = try await gateway.waitFor(count: count)
            XCTAssertEqual(pushes.count, count)
            XCTAssertEqual(pushes.last?.json?["notification"]?["body"]?.stringValue, "Tom: \(text)")
            return ContinuousClock.now - sent
        }

        // Never answered: the default goes when the hold ends, not before.
        var delay = try await pushDelay("one", count: 1)
        XCTAssertGreaterThanOrEqual(delay, .milliseconds(hold - 100), "held for the hook's deadline")
        // An answer that is not a valid one: the default, at once.
        mode.withLock { $0 = "bad" }
        delay = try await pushDelay("two", count: 2)
        XCTAssertLessThan(delay, .milliseconds(hold - 100))
        // "unhooked": the default at once, and the interceptor is not asked about the next message.
        mode.withLock { $0 = "unhooked" }
        delay = try await pushDelay("three", count: 3)
        XCTAssertLessThan(delay, .milliseconds(hold - 100))
        delay = try await pushDelay("four", count: 4)
        XCTAssertLessThan(delay, .milliseconds(hold - 100))
        XCTAssertEqual(requests.withLock { $0.count }, 3, "asked about one, two and three, not four")
        // No interceptor logged in: nobody to ask, the default at once.
        await bot.close()
        try await waitUntil("the interceptor modbot to detach", every: .milliseconds(10)) { !server.server.isInterceptorAttached("modbot") }
        delay = try await pushDelay("five", count: 5)
        XCTAssertLessThan(delay, .milliseconds(hold - 100))
        let settled = await gateway.settle()
        XCTAssertEqual(settled.count, 5)
        XCTAssertTrue(settled.allSatisfy(\.signatureValid))
        // /metrics counts what became of each question.
        let metrics = String(decoding: try await MediaRouteTests.call(server.port, "GET", "/metrics").body, as: UTF8.self)
        func asked(_ outcome: String) -> Int? {
            metrics.split(separator: "\n").first {
                $0.hasPrefix("hookbot_push_offline_hook_total") && $0.contains(#"outcome="\#(outcome)""#)
            }.flatMap { Int($0.split(separator: " ").last ?? "") }
        }
        XCTAssertEqual(asked("no_answer"), 1, metrics)
        XCTAssertEqual(asked("invalid"), 1, metrics)
        XCTAssertEqual(asked("unhooked"), 1, metrics)
        XCTAssertNil(asked("answered"), metrics)
    }
}
