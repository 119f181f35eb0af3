import BotHost
import Foundation
import HookbotTestSupport
import Hummingbird
import IMClient
import IMCore
import PushProviders
import ServiceLifecycle
import Synchronization
import XCTest

@testable import IMServer

/// The console's "Last pushes" panel and `GET /api/pushes` (docs/CONSOLE.md): a real bot and embedded server
/// with the webhook provider posting to a gateway on loopback, a member who is offline with a device, and the
/// page in headless Chromium.
final class ConsolePushTests: XCTestCase {
    static let secret = "the-console-test-gateway-secret"

    /// A gateway that keeps each push's JSON and answers 204.
    static func startGateway() async throws -> (ServiceGroup, String, Received) {
        let received = Received()
        let (group, port) = try await HTTPCallTests.startWebServer { router in
            router.post("/push") { request, _ -> HTTPResponse.Status in
                let body = try await request.body.collect(upTo: 1 << 16)
                let signed = request.headers[.init("X-Hookbot-Signature")!]
                guard signed == WebhookProvider.signature(of: Array(buffer: body), secret: Self.secret) else { return .unauthorized }
                received.add(String(buffer: body))
                return .noContent
            }
        }
        return (group, "http://127.0.0.1:\(port)/push", received)
    }

    static func start(gateway url: String) async throws -> ConsoleHarness {
        try await ConsoleHarness.start { configuration in
            configuration.push.providers = [.webhook(WebhookSettings(url: url, secret: Self.secret))]
        }
    }

    /// Jerry joins the lobby, registers a webhook device and leaves (logged out, the device stays: it was
    /// registered under another device id than the login's).
    func offlineJerry(_ harness: ConsoleHarness) async throws {
        let (jerry, _, _) = try await harness.lobbyMember("Jerry")
        _ = try await jerry.registerDevice(IMPushDevice(provider: .webhook, token: "jerry-phone-token", deviceId: "jerry-phone"))
        await jerry.close()
        try await eventually("Jerry to be offline") { harness.hub.server.service.registry.connections(of: "Jerry").isEmpty }
    }

    func testTheAPIListsThePushesOfflineMembersGotWithCountsPerProvider() async throws {
        let (gateway, url, received) = try await Self.startGateway()
        addTeardownBlock(releasing: gateway) { await $0.triggerGracefulShutdown() }
        let harness = try await Self.start(gateway: url)
        addTeardownBlock(releasing: harness) { await $0.stop() }
        try await offlineJerry(harness)

        let unauthorized = try await harness.http("GET", "/api/pushes")
        XCTAssertEqual(unauthorized.status, 401)
        let (tom, lobby, _) = try await harness.lobbyMember("Tom")
        addTeardownBlock(releasing: tom) { await $0.close() }
        _ = try await lobby.send(.text("cheese is in the kitchen"))
        try await eventually("the push") { received.count == 1 }
        var answer = try await harness.admin("GET", "/api/pushes").object()
        try await eventually("the push to be recorded") {
            answer = try await harness.admin("GET", "/api/pushes").object()
            return (answer["entries"] as? [[String: Any]])?.count == 1
        }
        XCTAssertEqual(answer["enabled"] as? Bool, true)
        let entry = try XCTUnwrap((answer["entries"] as? [[String: Any]])?.first)
        XCTAssertEqual(entry["receiver"] as? String, "Jerry")
        XCTAssertEqual(entry["provider"] as? String, "webhook")
        XCTAssertEqual(entry["body"] as? String, "Tom: cheese is in the kitchen")
        XCTAssertEqual(entry["cid"] as? String, harness.hub.lobbyID)
        XCTAssertEqual(entry["badge"] as? Int, 1)
        XCTAssertEqual(entry["outcome"] as? String, "delivered")
        XCTAssertEqual(answer["next"] as? Int, entry["seq"] as? Int)
        XCTAssertEqual((answer["providers"] as? [String: [String: Int]])?["webhook"]?["delivered"], 1)
        // What is new since a poll, of one conversation; bad query values are 400.
        let later = try await harness.admin("GET", "/api/pushes?after=\(entry["seq"] as? Int ?? 0)").object()
        XCTAssertEqual((later["entries"] as? [Any])?.count, 0)
        let other = try await harness.admin("GET", "/api/pushes?cid=nothing-here").object()
        XCTAssertEqual((other["entries"] as? [Any])?.count, 0)
        let bad = try await harness.admin("GET", "/api/pushes?after=-1")
        XCTAssertEqual(bad.status, 400)
        XCTAssertTrue(bad.text.contains("after"), bad.text)
    }

    func testAnOfflineMembersPushAppearsInTheChatsLastPushesPanel() async throws {
        try requireBrowser()
        let (gateway, url, received) = try await Self.startGateway()
        addTeardownBlock(releasing: gateway) { await $0.triggerGracefulShutdown() }
        let harness = try await Self.start(gateway: url)
        addTeardownBlock(releasing: harness) { await $0.stop() }
        try await offlineJerry(harness)
        try await withBrowser(width: 1280, height: 800, screenshot: "push") { browser in
            try await browser.logIntoLobby(harness)
            try await browser.sendFromComposer("where is the cheese? 🧀")
            try await browser.waitUntil(
                "Jerry's push in the panel",
                """
                const item = document.querySelector('#push-list .push-item[data-receiver="Jerry"]');
                return !!item && item.dataset.outcome === 'delivered'
                  && item.querySelector('.push-body')?.textContent === 'Tom: where is the cheese? 🧀'
                  && item.textContent.includes('webhook') && item.textContent.includes('badge 1')
                """)
            XCTAssertEqual(received.count, 1)
            // A second message shows up live, newest first.
            try await browser.sendFromComposer("still waiting")
            try await browser.waitUntil(
                "the second push on top",
                """
                const first = document.querySelector('#push-list .push-item .push-body');
                return first?.textContent === 'Tom: still waiting' && document.querySelectorAll('#push-list .push-item').length === 2
                """)
            // The interception tab counts pushes per provider.
            try await browser.click("#tab-interception")
            try await browser.waitUntil(
                "the push counters",
                """
                const text = document.querySelector('#push-stats')?.textContent || '';
                return text.includes('webhook') && text.includes('2') && text.includes('0 failed')
                """)
            let severe = try await browser.consoleLog().filter { ($0["level"] as? String) == "SEVERE" }
            XCTAssertEqual(severe.map { $0["message"] as? String ?? "" }, [], "errors in the browser console")
        }
    }
}

/// The bodies a test's gateway received.
final class Received: Sendable {
    private let bodies = Mutex<[String]>([])
    var count: Int { bodies.withLock { $0.count } }
    func add(_ body: String) { bodies.withLock { $0.append(body) } }
}
