@preconcurrency import Crypto
import Foundation
import HookbotTestSupport
import IMCore
import XCTest

@testable import PushProviders

/// APNs against a local HTTP/2-only TLS server (certificate from a throwaway CA) that checks what Apple
/// documents: `POST /3/device/<token>`, the headers, and the ES256 provider token verified with the key's
/// public half; it answers 200, 410, 403 ExpiredProviderToken, ... as each test asks.
final class APNsProviderTests: XCTestCase {
    private var directory: URL!
    private var caFile = ""
    private var certificate = ""
    private var key = ""
    private let signingKey = P256.Signing.PrivateKey()
    private let token = String(repeating: "ab12", count: 16)

    override func setUpWithError() throws {
        directory = try temporaryDirectory("hookbot-apns")
        let authority = try TestCertificateAuthority(name: "APNs Test CA", in: directory)
        certificate = directory.appendingPathComponent("apns.pem").path
        key = directory.appendingPathComponent("apns.key").path
        try authority.issueServerCertificate(commonName: "api.push.test", serial: "A1", certificatePath: certificate, keyPath: key)
        caFile = authority.certificatePath
    }

    override func tearDown() {
        try? FileManager.default.removeItem(at: directory)
    }

    /// A provider for the test server at `server`, its key read from a `.p8` file as an operator gives it.
    private func provider(_ server: TestPushServer, http: PushHTTPClient, tokenLifetime: Duration? = nil) throws -> APNsProvider {
        let keyFile = directory.appendingPathComponent("AuthKey_KEY123.p8").path
        try signingKey.pemRepresentation.write(toFile: keyFile, atomically: true, encoding: .utf8)
        var settings = try APNsSettings(
            teamID: "TEAM456", keyID: "KEY123", keyFile: keyFile, topic: "com.example.chat", environment: .sandbox,
            endpoint: server.baseURL)
        if let tokenLifetime { settings.tokenLifetime = tokenLifetime }
        return try APNsProvider(settings: settings, http: http)
    }

    private func client(timeout: Duration = .seconds(5)) throws -> PushHTTPClient {
        try pushClient(PushHTTPSettings(requestTimeout: timeout, additionalTrustRootsFile: caFile))
    }

    /// What the server checks on every request; nil when it is right, else why not.
    private static func problem(with request: ReceivedRequest, key: P256.Signing.PublicKey) -> String? {
        guard request.httpMajorVersion == 2 else { return "not HTTP/2" }
        guard request.method == "POST", request.path.hasPrefix("/3/device/") else { return "path \(request.path)" }
        guard request.header("apns-topic") == "com.example.chat" else { return "apns-topic" }
        guard let authorization = request.header("authorization"), authorization.hasPrefix("bearer "),
            let jwt = ReceivedJWT(String(authorization.dropFirst(7)))
        else { return "no bearer JWT" }
        guard jwt.verifiesES256(with: key) else { return "bad ES256 signature" }
        guard jwt.header["kid"] == .string("KEY123"), jwt.claims["iss"] == .string("TEAM456"),
            let iat = jwt.claims["iat"]?.intValue, abs(iat - unixNow()) < 60
        else { return "claims \(jwt.header) \(jwt.claims)" }
        return nil
    }

    func testAnAlertGoesOverHTTP2WithAVerifiedProviderTokenAndApplesHeaders() async throws {
        let publicKey = signingKey.publicKey
        let server = try await TestPushServer(tls: (certificate, key)) { request in
            if let problem = Self.problem(with: request, key: publicKey) {
                return CannedResponse(status: 403, json: #"{"reason":"\#(problem)"}"#)
            }
            return CannedResponse(status: 200, headers: [("apns-id", "6E0A2E4C-0000-0000-0000-000000000001")])
        }
        let http = try client()
        let apns = try provider(server, http: http)
        let device = PushDevice(provider: "apns", token: token)
        let alert = PushNotification(
            title: "Tom", body: "ping", badge: 3, sound: "default", data: ["cid": .string("lobby"), "n": .int(2)], collapseID: "lobby",
            priority: .high, ttl: 3600)
        let outcome = try await apns.send(alert, to: device)
        XCTAssertEqual(outcome, .delivered(id: "6E0A2E4C-0000-0000-0000-000000000001"))
        let background = PushNotification(data: ["sync": .bool(true)], priority: .high)
        let second = try await apns.send(background, to: device)
        XCTAssertEqual(second, .delivered(id: "6E0A2E4C-0000-0000-0000-000000000001"))

        let requests = await server.requests()
        XCTAssertEqual(requests.count, 2)
        let first = requests[0]
        XCTAssertEqual(first.path, "/3/device/\(token)")
        XCTAssertEqual(first.header("apns-push-type"), "alert")
        XCTAssertEqual(first.header("apns-priority"), "10")
        XCTAssertEqual(first.header("apns-collapse-id"), "lobby")
        let expiration = try XCTUnwrap(first.header("apns-expiration").flatMap(Int.init))
        XCTAssertLessThan(abs(expiration - (unixNow() + 3600)), 60)
        let body = try XCTUnwrap(jsonObject(first.body))
        XCTAssertEqual(
            body["aps"],
            .object(["alert": .object(["title": .string("Tom"), "body": .string("ping")]), "badge": .int(3), "sound": .string("default")]))
        XCTAssertEqual(body["cid"], .string("lobby"))
        XCTAssertEqual(body["n"], .int(2))
        // A background push: priority 5 (Apple requires it), content-available, no alert.
        XCTAssertEqual(requests[1].header("apns-push-type"), "background")
        XCTAssertEqual(requests[1].header("apns-priority"), "5")
        XCTAssertNil(requests[1].header("apns-expiration"))
        XCTAssertEqual(jsonObject(requests[1].body)?["aps"], .object(["content-available": .int(1)]))
        // The provider token is reused, not signed per request.
        XCTAssertEqual(requests[0].header("authorization"), requests[1].header("authorization"))
        try await http.shutdown()
        await server.shutdown()
    }

    func testTheProviderTokenIsSignedAnewWhenItsLifetimeIsOver() async throws {
        let publicKey = signingKey.publicKey
        let server = try await TestPushServer(tls: (certificate, key)) { request in
            if let problem = Self.problem(with: request, key: publicKey) {
                return CannedResponse(status: 403, json: #"{"reason":"\#(problem)"}"#)
            }
            return CannedResponse(status: 200)
        }
        let http = try client()
        // 50 minutes in production; 300 ms here.
        let apns = try provider(server, http: http, tokenLifetime: .milliseconds(300))
        let device = PushDevice(provider: "apns", token: token)
        for pause in [Duration.zero, .zero, .milliseconds(400)] {
            try await Task.sleep(for: pause)
            _ = try await apns.send(PushNotification(title: "t", body: "b"), to: device)
        }
        let tokens = await server.requests().map { $0.header("authorization") }
        XCTAssertEqual(tokens[0], tokens[1])
        XCTAssertNotEqual(tokens[1], tokens[2])
        XCTAssertEqual(APNsSettings.Environment.production.url, "https://api.push.apple.com")
        XCTAssertEqual(APNsSettings.Environment.sandbox.url, "https://api.sandbox.push.apple.com")
        await server.shutdown()
    }

    func testAnExpiredProviderTokenIsMadeAnewOnceAndTheRequestSentAgain() async throws {
        let expired = Tokens()
        let publicKey = signingKey.publicKey
        let server = try await TestPushServer(tls: (certificate, key)) { request in
            if let problem = Self.problem(with: request, key: publicKey) {
                return CannedResponse(status: 403, json: #"{"reason":"\#(problem)"}"#)
            }
            let bearer = request.header("authorization") ?? ""
            // The first token the server sees has "expired"; `alwaysExpired` devices refuse every token.
            if await expired.firstOrKnown(bearer) || request.path.hasSuffix("ff") {
                return CannedResponse(status: 403, json: #"{"reason":"ExpiredProviderToken"}"#)
            }
            return CannedResponse(status: 200, headers: [("apns-id", "ok")])
        }
        let http = try client()
        let apns = try provider(server, http: http)
        let outcome = try await apns.send(PushNotification(title: "t", body: "b"), to: PushDevice(provider: "apns", token: token))
        XCTAssertEqual(outcome, .delivered(id: "ok"))
        var requests = await server.requests()
        XCTAssertEqual(requests.count, 2)
        XCTAssertNotEqual(requests[0].header("authorization"), requests[1].header("authorization"))

        // A token refused again after the refresh: refused, not retried for ever.
        let stuck = String(repeating: "ab", count: 31) + "ff"
        let refused = try await apns.send(PushNotification(title: "t", body: "b"), to: PushDevice(provider: "apns", token: stuck))
        XCTAssertEqual(refused, .rejected(status: 403, reason: "ExpiredProviderToken"))
        requests = await server.requests()
        XCTAssertEqual(requests.count, 4)
        try await http.shutdown()
        await server.shutdown()
    }

    func testApnsAnswersMapToGoneRetryAndRejected() async throws {
        // The device token's last byte picks the answer.
        let answers: [String: CannedResponse] = [
            "01": CannedResponse(status: 410, json: #"{"reason":"Unregistered","timestamp":1700000000000}"#),
            "02": CannedResponse(status: 400, json: #"{"reason":"BadDeviceToken"}"#),
            "03": CannedResponse(status: 429, headers: [("retry-after", "7")], json: #"{"reason":"TooManyRequests"}"#),
            "04": CannedResponse(status: 503, json: #"{"reason":"ServiceUnavailable"}"#),
            "05": CannedResponse(status: 400, json: #"{"reason":"BadTopic"}"#),
            "06": CannedResponse(status: 403, json: #"{"reason":"InvalidProviderToken"}"#),
        ]
        let publicKey = signingKey.publicKey
        let server = try await TestPushServer(tls: (certificate, key)) { request in
            if let problem = Self.problem(with: request, key: publicKey) {
                return CannedResponse(status: 403, json: #"{"reason":"\#(problem)"}"#)
            }
            return answers[String(request.path.suffix(2))] ?? CannedResponse(status: 200)
        }
        let http = try client()
        let apns = try provider(server, http: http)
        try await assertOutcomes(
            [
                ("01", .deviceGone(reason: "410 Unregistered")),
                ("02", .deviceGone(reason: "400 BadDeviceToken")),
                ("03", .retryLater(after: .seconds(7), reason: "429 TooManyRequests")),
                ("04", .retryLater(after: nil, reason: "503 ServiceUnavailable")),
                ("05", .rejected(status: 400, reason: "BadTopic")),
                ("06", .rejected(status: 403, reason: "InvalidProviderToken")),
            ]
        ) { last in
            try await apns.send(
                PushNotification(title: "t", body: "b"), to: PushDevice(provider: "apns", token: String(repeating: "0", count: 62) + last))
        }
        let requestCount = await server.requests().count
        XCTAssertEqual(requestCount, 6)
        try await http.shutdown()
        await server.shutdown()
    }

    func testBadTokensKeysAndPayloadsAreRefusedBeforeSending() async throws {
        let server = try await TestPushServer(tls: (certificate, key)) { _ in CannedResponse(status: 200) }
        let http = try client()
        let apns = try provider(server, http: http)
        for bad in ["", "xyz", String(repeating: "g", count: 64), String(repeating: "a", count: 63), "../../etc/passwd"] {
            await assertPushError(4701) { try await apns.send(PushNotification(title: "t"), to: PushDevice(provider: "apns", token: bad)) }
        }
        await assertPushError(4706) {
            try await apns.send(PushNotification(title: "t"), to: PushDevice(provider: "fcm", token: self.token))
        }
        await assertPushError(4703) {
            try await apns.send(
                PushNotification(title: "t", body: String(repeating: "x", count: 5000)), to: PushDevice(provider: "apns", token: self.token)
            )
        }
        await assertPushError(4707) {
            try await apns.send(
                PushNotification(title: "t", collapseID: String(repeating: "c", count: 65)),
                to: PushDevice(provider: "apns", token: self.token))
        }
        await assertPushError(4707) {
            try await apns.send(
                PushNotification(title: "t", collapseID: "a\r\nauthorization: x"), to: PushDevice(provider: "apns", token: self.token))
        }
        let requestCount = await server.requests().count
        XCTAssertEqual(requestCount, 0)
        XCTAssertThrowsError(
            try APNsProvider(
                settings: APNsSettings(teamID: "T", keyID: "K", privateKeyPEM: "not a key", topic: "t", endpoint: server.baseURL),
                http: http)
        ) { XCTAssertEqual(($0 as? PushError)?.code, 4704) }
        XCTAssertThrowsError(try APNsSettings(teamID: "T", keyID: "K", keyFile: "/nonexistent/AuthKey.p8", topic: "t")) {
            XCTAssertEqual(($0 as? PushError)?.code, 4704)
        }
        try await http.shutdown()
        await server.shutdown()
    }
}

/// The bearer tokens an APNs test server has seen: the first one counts as expired.
private actor Tokens {
    private var expired: String?
    func firstOrKnown(_ token: String) -> Bool {
        if expired == nil { expired = token }
        return token == expired
    }
}

/// Asserts that `body` throws a `PushError` with `code`.
func assertPushError(
    _ code: Int, file: StaticString = #filePath, line: UInt = #line, _ body: () async throws -> some Any
) async {
    do {
        let value = try await body()
        XCTFail("expected PushError \(code), got \(value)", file: file, line: line)
    } catch let error as PushError {
        XCTAssertEqual(error.code, code, "\(error)", file: file, line: line)
    } catch {
        XCTFail("expected PushError \(code), got \(error)", file: file, line: line)
    }
}
