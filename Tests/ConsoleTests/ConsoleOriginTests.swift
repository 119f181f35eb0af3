import BotHost
import Console
import Foundation
import HTTPTypes
import HookbotTestSupport
import Hummingbird
import Logging
import ServiceLifecycle
import Synchronization
import XCTest

/// The console talks to its own origin only: a link that names another API or WebSocket in its query
/// (`?api=…&ws=…`), opened in a tab that holds the admin token, sends nothing to that address — checked in
/// headless Chromium against a real listener that answers as an attacker's would (permissive CORS, its
/// own `/api/info`) and records every request it gets.
final class ConsoleOriginTests: XCTestCase {
    func testALinkToAForeignAPIReachesNothingThere() async throws {
        try requireBrowser()
        let evil = try await RecordingWebServer.start()
        addTeardownBlock(releasing: evil) { await $0.stop() }
        let harness = try await startConsole()
        try await withBrowser(screenshot: "origin") { browser in
            // The tab holds the token, as after opening the URL `hookbot run` prints.
            try await browser.openAsAdmin(harness)
            try await browser.waitUntil(
                "the token to be kept for the tab",
                "return sessionStorage.getItem('hookbot.adminToken') === arguments[0]", [harness.console.token])

            // The attacker's link: same console, foreign API and WebSocket in the query.
            let foreign = "http://127.0.0.1:\(evil.port)"
            try await browser.open("\(harness.base)/?api=\(foreign)&ws=ws://127.0.0.1:\(evil.port)/ws")
            // Admin calls (the plugins panel) and the chat's WebSocket (a login) all go to the console's origin.
            try await browser.click("#tab-plugins")
            var waited: (any Error)?
            do {
                try await browser.waitUntil(
                    "the plugins panel from the console's own API",
                    "return !!document.querySelector('[data-plugin=\"greeter\"]')")
                try await browser.click("#tab-chat")
                try await browser.logIn(as: "Tom")
                try await browser.waitUntil(
                    "Tom to be logged in over the console's own WebSocket",
                    "return document.querySelector('#current-user')?.textContent.includes('Tom') === true")
                try await Task.sleep(for: .milliseconds(300))
            } catch {
                waited = error
            }
            let requests = evil.requests
            XCTAssertEqual(requests.map(\.line), [], "requests reached the foreign origin")
            XCTAssertFalse(requests.contains { $0.authorization?.contains(harness.console.token) == true }, "the admin token leaked")
            if let waited { throw waited }
        }
    }
}

/// An HTTP listener on loopback that records every request and answers as a hostile API would: any
/// origin may call it with any header (CORS), `/api/info` names its own WebSocket, the rest is `[]`.
final class RecordingWebServer: Sendable {
    struct Request: Sendable, Equatable {
        var line: String
        var authorization: String?
    }

    let port: Int
    private let group: ServiceGroup
    private let recorded: Recorded

    final class Recorded: Sendable {
        let requests = Mutex<[Request]>([])
        let port = Mutex(0)
    }

    var requests: [Request] { recorded.requests.withLock { $0 } }

    private init(port: Int, group: ServiceGroup, recorded: Recorded) {
        self.port = port
        self.group = group
        self.recorded = recorded
    }

    static func start() async throws -> RecordingWebServer {
        let recorded = Recorded()
        let responder = CallbackResponder<BasicRequestContext> { request, _ in
            recorded.requests.withLock {
                $0.append(.init(line: "\(request.method) \(request.uri)", authorization: request.headers[.authorization]))
            }
            var headers: HTTPFields = [
                .accessControlAllowOrigin: "*", .accessControlAllowMethods: "GET, POST, DELETE",
                .accessControlAllowHeaders: "authorization, content-type, accept", .contentType: "application/json",
            ]
            headers[HTTPField.Name("Access-Control-Allow-Private-Network")!] = "true"
            if request.method == .options { return Response(status: .noContent, headers: headers) }
            let port = recorded.port.withLock { $0 }
            let body = request.uri.path == "/api/info" ? #"{"bot": "evil", "lobbyName": "evil", "ws": "ws://127.0.0.1:\#(port)/ws"}"# : "[]"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
        }
        let (group, port) = try await startLoopbackWebServer(responder, label: "the recording web server")
        recorded.port.withLock { $0 = port }
        return RecordingWebServer(port: port, group: group, recorded: recorded)
    }

    func stop() async { await group.triggerGracefulShutdown() }
}
