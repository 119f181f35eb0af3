@preconcurrency import Crypto
import Foundation
import IMCore
import XCTest

@testable import PushProviders

/// The webhook against a local gateway that checks `X-Hookbot-Signature` with the shared secret; and what all
/// providers share: a time limit on a provider that hangs, bounded concurrency, Retry-After dates.
final class WebhookProviderTests: XCTestCase {
    private static let secret = "s3cret-of-the-operator-gateway"

    /// A gateway that recomputes the HMAC of the body (401 when it differs) and answers what `answer` says for
    /// the device token.
    private func gateway(answer: @escaping @Sendable (String) -> CannedResponse = { _ in CannedResponse(status: 204) }) async throws
        -> TestPushServer
    {
        try await TestPushServer { request in
            let expected = HMAC<SHA256>.authenticationCode(for: request.body, using: SymmetricKey(data: Array(Self.secret.utf8)))
            guard request.path == "/push", request.header("content-type") == "application/json",
                request.header("x-hookbot-signature") == "sha256=" + expected.map { String(format: "%02x", $0) }.joined()
            else { return CannedResponse(status: 401, json: #"{"error":"bad signature"}"#) }
            return answer(jsonObject(request.body)?["device"]?["token"]?.stringValue ?? "")
        }
    }

    func testTheGatewayGetsSignedJSONAndItsAnswersMapToOutcomes() async throws {
        let server = try await gateway { token in
            switch token {
            case "gone": CannedResponse(status: 410)
            case "later": CannedResponse(status: 503, headers: [("retry-after", "5")])
            case "bad": CannedResponse(status: 422, json: #"{"error":"unknown app"}"#)
            default: CannedResponse(status: 204)
            }
        }
        let http = try pushClient()
        let webhook = try WebhookProvider(settings: WebhookSettings(url: "\(server.baseURL)/push", secret: Self.secret), http: http)
        let notification = PushNotification(title: "Tom", body: "ping", badge: 1, data: ["cid": .string("lobby")])
        func send(_ token: String) async throws -> PushOutcome {
            try await webhook.send(notification, to: PushDevice(provider: "webhook", token: token))
        }
        let delivered = try await send("device-1")
        XCTAssertEqual(delivered, .delivered(id: nil))
        let gone = try await send("gone")
        XCTAssertEqual(gone, .deviceGone(reason: "410 Gone"))
        let later = try await send("later")
        XCTAssertEqual(later, .retryLater(after: .seconds(5), reason: "503 Service Unavailable"))
        let bad = try await send("bad")
        XCTAssertEqual(bad, .rejected(status: 422, reason: "unknown app"))

        let requests = await server.requests()
        let first = try XCTUnwrap(jsonObject(requests[0].body))
        XCTAssertEqual(first["device"], .object(["provider": .string("webhook"), "token": .string("device-1")]))
        XCTAssertEqual(first["notification"], notification.jsonValue)
        let sentAt = try XCTUnwrap(first["sent_at"]?.intValue)
        XCTAssertLessThan(abs(sentAt / 1000 - unixNow()), 60)
        // docs/PUSH.md's openssl example gives the same signature for the same body and secret.
        let documented = #"{"device":{"provider":"webhook","token":"t"},"notification":{"priority":"high","title":"x"},"sent_at":1}"#
        XCTAssertEqual(
            WebhookProvider.signature(of: Array(documented.utf8), secret: "at-least-16-bytes-of-secret"),
            "sha256=4be615cb0e9f5be3b04e43493f8970af851897ac1369285d919120c6e75bc444")

        // Signed with another secret: the gateway refuses, and that is a rejection, not a retry.
        let impostor = try WebhookProvider(
            settings: WebhookSettings(url: "\(server.baseURL)/push", secret: "another-secret-of-16+"), http: http)
        let refused = try await impostor.send(notification, to: PushDevice(provider: "webhook", token: "device-1"))
        XCTAssertEqual(refused, .rejected(status: 401, reason: "bad signature"))

        XCTAssertThrowsError(try WebhookProvider(settings: WebhookSettings(url: "\(server.baseURL)/push", secret: "short"), http: http)) {
            XCTAssertEqual(($0 as? PushError)?.code, 4705)
        }
        XCTAssertThrowsError(try WebhookProvider(settings: WebhookSettings(url: "file:///etc/passwd", secret: Self.secret), http: http)) {
            XCTAssertEqual(($0 as? PushError)?.code, 4705)
        }
        await assertPushError(4701) { try await webhook.send(notification, to: PushDevice(provider: "webhook", token: "")) }
        try await http.shutdown()
        await server.shutdown()
    }

    func testAProviderThatHangsAnswersRetryLaterWhileTheOthersGoOn() async throws {
        let hanging = try await TestPushServer { _ in
            try? await Task.sleep(for: .seconds(10))
            return CannedResponse(status: 204)
        }
        let healthy = try await gateway()
        let http = try pushClient(PushHTTPSettings(requestTimeout: .milliseconds(1500)))
        let stuck = try WebhookProvider(settings: WebhookSettings(url: "\(hanging.baseURL)/push", secret: Self.secret), http: http)
        let fine = try WebhookProvider(
            name: "gateway", settings: WebhookSettings(url: "\(healthy.baseURL)/push", secret: Self.secret), http: http)
        let clock = ContinuousClock()
        let started = clock.now
        async let stuckOutcome = stuck.send(PushNotification(title: "t"), to: PushDevice(provider: "webhook", token: "a"))
        // While the first hangs, the other provider's sends complete on the same client.
        for _ in 0..<3 {
            let outcome = try await fine.send(PushNotification(title: "t"), to: PushDevice(provider: "gateway", token: "b"))
            XCTAssertEqual(outcome, .delivered(id: nil))
        }
        XCTAssertLessThan(clock.now - started, .milliseconds(1400), "the healthy provider did not wait for the hanging one")
        guard case .retryLater(nil, let reason) = try await stuckOutcome else { return XCTFail("expected retryLater") }
        XCTAssertTrue(reason.hasPrefix("no answer"), reason)
        let elapsed = clock.now - started
        XCTAssertGreaterThanOrEqual(elapsed, .milliseconds(1400))
        XCTAssertLessThan(elapsed, .seconds(5))
        // Nothing listening at all: retry later too.
        await hanging.shutdown()
        let closed = try WebhookProvider(settings: WebhookSettings(url: "\(hanging.baseURL)/push", secret: Self.secret), http: http)
        guard case .retryLater = try await closed.send(PushNotification(title: "t"), to: PushDevice(provider: "webhook", token: "a")) else {
            return XCTFail("expected retryLater")
        }
        try await http.shutdown()
        await healthy.shutdown()
    }

    func testAtMostMaxConcurrentRequestsOfOneProviderAreInFlight() async throws {
        let gauge = InFlight()
        let server = try await TestPushServer { _ in
            await gauge.enter()
            try? await Task.sleep(for: .milliseconds(100))
            await gauge.leave()
            return CannedResponse(status: 204)
        }
        let http = try pushClient()
        var settings = WebhookSettings(url: "\(server.baseURL)/push", secret: Self.secret)
        settings.maxConcurrentRequests = 2
        let webhook = try WebhookProvider(settings: settings, http: http)
        let outcomes = try await withThrowingTaskGroup(of: PushOutcome.self) { group in
            for index in 0..<6 {
                group.addTask {
                    try await webhook.send(PushNotification(title: "t"), to: PushDevice(provider: "webhook", token: "d\(index)"))
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        XCTAssertEqual(outcomes, Array(repeating: .delivered(id: nil), count: 6))
        let peak = await gauge.peak
        XCTAssertEqual(peak, 2)
        try await http.shutdown()
        await server.shutdown()
    }

    func testRetryAfterIsReadAsSecondsOrAnHTTPDate() {
        let now = Date(timeIntervalSince1970: 1_445_412_000) // Wed, 21 Oct 2015 07:20:00 GMT
        XCTAssertEqual(parseRetryAfter("120", now: now), .seconds(120))
        XCTAssertEqual(parseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT", now: now), .seconds(480))
        XCTAssertEqual(parseRetryAfter("Wed, 21 Oct 2015 07:00:00 GMT", now: now), .seconds(0))
        XCTAssertNil(parseRetryAfter("soon", now: now))
        XCTAssertNil(parseRetryAfter("-5", now: now))
    }
}

/// Requests a test server is handling at once, and the most there ever were.
private actor InFlight {
    private var now = 0
    private(set) var peak = 0
    func enter() {
        now += 1
        peak = max(peak, now)
    }
    func leave() { now -= 1 }
}
