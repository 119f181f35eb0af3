@preconcurrency import Crypto
import Foundation
import IMCore
import XCTest
@preconcurrency import _CryptoExtras

@testable import PushProviders

/// FCM HTTP v1 against a local server that is both Google's OAuth token endpoint (it verifies the RS256 JWT
/// grant with the service account's public key) and FCM (it checks the bearer token and the message JSON).
final class FCMProviderTests: XCTestCase {
    private static let rsaKey = try! _RSA.Signing.PrivateKey(keySize: .bits2048)
    private let registrationToken = "fZ3a9:APA91bH-test_token.1"

    /// The service account JSON file as the Firebase console gives it, pointing at `server`.
    private func serviceAccount(_ server: TestPushServer) throws -> FCMServiceAccount {
        let json = JSONValue.object([
            "type": .string("service_account"), "project_id": .string("hookbot-test"), "private_key_id": .string("kid-1"),
            "private_key": .string(Self.rsaKey.pkcs8PEMRepresentation),
            "client_email": .string("push@hookbot-test.iam.gserviceaccount.com"),
            "token_uri": .string("\(server.baseURL)/token"),
        ]).jsonString()
        let directory = try temporaryDirectory("hookbot-fcm")
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("service-account.json").path
        try json.write(toFile: file, atomically: true, encoding: .utf8)
        return try FCMServiceAccount(file: file)
    }

    /// A Google token endpoint and FCM in one server. `issue` names the access tokens it hands out (1, 2, ...)
    /// with `expiresIn`; `answer` is FCM's reply for a request whose bearer token was issued.
    private final class Google: Sendable {
        let publicKey: _RSA.Signing.PublicKey
        let expiresIn: Int
        let answer: @Sendable (_ accessToken: String, _ message: [String: JSONValue]) -> CannedResponse
        private let state = GoogleState()

        init(
            publicKey: _RSA.Signing.PublicKey, expiresIn: Int = 3600,
            answer: @escaping @Sendable (String, [String: JSONValue]) -> CannedResponse = { _, _ in
                CannedResponse(status: 200, json: #"{"name":"projects/hookbot-test/messages/0:1"}"#)
            }
        ) {
            self.publicKey = publicKey
            self.expiresIn = expiresIn
            self.answer = answer
        }

        var tokensIssued: Int { get async { await state.issued.count } }

        func handle(_ request: ReceivedRequest, tokenURI: String) async -> CannedResponse {
            if request.path == "/token" {
                let form = Dictionary(
                    request.text.split(separator: "&").map { pair -> (String, String) in
                        let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding ?? "" }
                        return (parts[0], parts.count > 1 ? parts[1] : "")
                    }, uniquingKeysWith: { a, _ in a })
                guard request.header("content-type") == "application/x-www-form-urlencoded",
                    form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer",
                    let jwt = form["assertion"].flatMap(ReceivedJWT.init),
                    jwt.verifiesRS256(with: publicKey), jwt.header["kid"] == .string("kid-1"),
                    jwt.claims["iss"] == .string("push@hookbot-test.iam.gserviceaccount.com"),
                    jwt.claims["scope"] == .string("https://www.googleapis.com/auth/firebase.messaging"),
                    jwt.claims["aud"] == .string(tokenURI), let iat = jwt.claims["iat"]?.intValue, abs(iat - unixNow()) < 60,
                    jwt.claims["exp"]?.intValue == iat + 3600
                else {
                    return CannedResponse(status: 400, json: #"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#)
                }
                let token = await state.issue()
                return CannedResponse(status: 200, json: #"{"access_token":"\#(token)","expires_in":\#(expiresIn),"token_type":"Bearer"}"#)
            }
            guard request.method == "POST", request.path == "/v1/projects/hookbot-test/messages:send" else {
                return CannedResponse(status: 404, json: #"{"error":{"code":404,"message":"no such path","status":"NOT_FOUND"}}"#)
            }
            let bearer = String((request.header("authorization") ?? "").dropFirst("Bearer ".count))
            guard await state.issued.contains(bearer) else {
                return CannedResponse(status: 401, json: #"{"error":{"code":401,"message":"bad token","status":"UNAUTHENTICATED"}}"#)
            }
            guard let message = jsonObject(request.body)?["message"]?.objectValue else {
                return CannedResponse(status: 400, json: #"{"error":{"code":400,"message":"no message","status":"INVALID_ARGUMENT"}}"#)
            }
            return answer(bearer, message)
        }
    }

    private actor GoogleState {
        var issued: [String] = []
        func issue() -> String {
            issued.append("access-\(issued.count + 1)")
            return issued.last!
        }
    }

    private func start(_ google: Google) async throws -> (TestPushServer, FCMProvider, PushHTTPClient) {
        let uri = Box()
        let server = try await TestPushServer { request in await google.handle(request, tokenURI: uri.value) }
        uri.value = "\(server.baseURL)/token"
        let http = try pushClient()
        let fcm = try FCMProvider(settings: FCMSettings(serviceAccount: serviceAccount(server), endpoint: server.baseURL), http: http)
        return (server, fcm, http)
    }

    func testTheJWTGrantIsVerifiedTheTokenCachedAndTheMessageIsFCMsV1Format() async throws {
        let messages = Messages()
        let google = Google(publicKey: Self.rsaKey.publicKey) { _, message in
            messages.append(message)
            return CannedResponse(status: 200, json: #"{"name":"projects/hookbot-test/messages/0:1"}"#)
        }
        let (server, fcm, http) = try await start(google)
        let device = PushDevice(provider: "fcm", token: registrationToken)
        let notification = PushNotification(
            title: "Tom", body: "ping", badge: 4, sound: "default",
            data: ["cid": .string("lobby"), "n": .int(2), "flags": .array([.bool(true)])],
            collapseID: "lobby", priority: .normal, ttl: 600)
        let first = try await fcm.send(notification, to: device)
        let second = try await fcm.send(PushNotification(data: ["sync": .string("1")]), to: device)
        XCTAssertEqual(first, .delivered(id: "projects/hookbot-test/messages/0:1"))
        XCTAssertEqual(second, .delivered(id: "projects/hookbot-test/messages/0:1"))
        let issued = await google.tokensIssued
        XCTAssertEqual(issued, 1, "the access token is reused until shortly before it expires")

        let sent = messages.all
        XCTAssertEqual(sent.count, 2)
        let message = sent[0]
        XCTAssertEqual(message["token"], .string(registrationToken))
        XCTAssertEqual(message["notification"], .object(["title": .string("Tom"), "body": .string("ping")]))
        // FCM data values are strings: non-strings go as their JSON text.
        XCTAssertEqual(message["data"], .object(["cid": .string("lobby"), "n": .string("2"), "flags": .string("[true]")]))
        XCTAssertEqual(message["android"]?["priority"], .string("NORMAL"))
        XCTAssertEqual(message["android"]?["collapse_key"], .string("lobby"))
        XCTAssertEqual(message["android"]?["ttl"], .string("600s"))
        XCTAssertEqual(message["android"]?["notification"], .object(["sound": .string("default"), "notification_count": .int(4)]))
        XCTAssertEqual(message["apns"]?["headers"]?["apns-priority"], .string("5"))
        XCTAssertEqual(message["apns"]?["headers"]?["apns-collapse-id"], .string("lobby"))
        XCTAssertEqual(message["apns"]?["payload"], .object(["aps": .object(["badge": .int(4), "sound": .string("default")])]))
        // A background push is a data-only message.
        XCTAssertNil(sent[1]["notification"])
        XCTAssertEqual(sent[1]["data"], .object(["sync": .string("1")]))
        try await http.shutdown()
        await server.shutdown()
    }

    func testATokenAboutToExpireIsNotReused() async throws {
        // expires_in 100 s is inside the 120 s refresh margin: every send gets a new token.
        let google = Google(publicKey: Self.rsaKey.publicKey, expiresIn: 100)
        let (server, fcm, http) = try await start(google)
        for _ in 0..<2 {
            let outcome = try await fcm.send(PushNotification(title: "t"), to: PushDevice(provider: "fcm", token: registrationToken))
            XCTAssertEqual(outcome, .delivered(id: "projects/hookbot-test/messages/0:1"))
        }
        let issued = await google.tokensIssued
        XCTAssertEqual(issued, 2)
        try await http.shutdown()
        await server.shutdown()
    }

    func testA401MakesANewTokenOnceAndSendsAgain() async throws {
        // FCM refuses the first access token (as after a key rotation), accepts the next.
        let google = Google(publicKey: Self.rsaKey.publicKey) { token, message in
            if token == "access-1" || message["token"] == .string("always401") {
                return CannedResponse(status: 401, json: #"{"error":{"code":401,"message":"revoked","status":"UNAUTHENTICATED"}}"#)
            }
            return CannedResponse(status: 200, json: #"{"name":"projects/hookbot-test/messages/2"}"#)
        }
        let (server, fcm, http) = try await start(google)
        let outcome = try await fcm.send(PushNotification(title: "t"), to: PushDevice(provider: "fcm", token: registrationToken))
        XCTAssertEqual(outcome, .delivered(id: "projects/hookbot-test/messages/2"))
        var issued = await google.tokensIssued
        XCTAssertEqual(issued, 2)
        // Refused again after the new token: refused, not retried for ever.
        let refused = try await fcm.send(PushNotification(title: "t"), to: PushDevice(provider: "fcm", token: "always401"))
        XCTAssertEqual(refused, .rejected(status: 401, reason: "UNAUTHENTICATED: revoked"))
        issued = await google.tokensIssued
        XCTAssertEqual(issued, 3)
        let requestCount = await server.requests().count
        XCTAssertEqual(requestCount, 7) // token, send (401), token, send; then send (401), token, send (401)
        try await http.shutdown()
        await server.shutdown()
    }

    func testFCMErrorsMapToGoneRetryAndRejected() async throws {
        let google = Google(publicKey: Self.rsaKey.publicKey) { _, message in
            switch message["token"]?.stringValue {
            case "unregistered":
                return CannedResponse(
                    status: 404,
                    json:
                        #"{"error":{"code":404,"message":"Requested entity was not found.","status":"NOT_FOUND","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"UNREGISTERED"}]}}"#
                )
            case "quota":
                return CannedResponse(
                    status: 429, headers: [("retry-after", "30")],
                    json:
                        #"{"error":{"code":429,"message":"Quota exceeded.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"QUOTA_EXCEEDED"}]}}"#
                )
            case "unavailable":
                return CannedResponse(
                    status: 503, json: #"{"error":{"code":503,"message":"The service is currently unavailable.","status":"UNAVAILABLE"}}"#)
            default:
                return CannedResponse(
                    status: 400,
                    json:
                        #"{"error":{"code":400,"message":"Invalid value","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"INVALID_ARGUMENT"}]}}"#
                )
            }
        }
        let (server, fcm, http) = try await start(google)
        try await assertOutcomes(
            [
                ("unregistered", .deviceGone(reason: "404 UNREGISTERED: Requested entity was not found.")),
                ("quota", .retryLater(after: .seconds(30), reason: "429 QUOTA_EXCEEDED: Quota exceeded.")),
                ("unavailable", .retryLater(after: nil, reason: "503 UNAVAILABLE: The service is currently unavailable.")),
                ("invalid", .rejected(status: 400, reason: "INVALID_ARGUMENT: Invalid value")),
            ]
        ) { token in
            try await fcm.send(PushNotification(title: "t"), to: PushDevice(provider: "fcm", token: token))
        }
        try await http.shutdown()
        await server.shutdown()
    }

    func testARefusedGrantIsRejectedAndNothingIsSentToFCM() async throws {
        // The token endpoint knows another key: the grant's signature does not verify.
        let other = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let google = Google(publicKey: other.publicKey)
        let (server, fcm, http) = try await start(google)
        let outcome = try await fcm.send(PushNotification(title: "t"), to: PushDevice(provider: "fcm", token: registrationToken))
        XCTAssertEqual(outcome, .rejected(status: 400, reason: "OAuth token: invalid_grant"))
        let paths = await server.requests().map(\.path)
        XCTAssertEqual(paths, ["/token"])
        try await http.shutdown()
        await server.shutdown()
    }

    func testATokenEndpointThatIsDownMeansRetryLater() async throws {
        let server = try await TestPushServer { request in
            request.path == "/token"
                ? CannedResponse(status: 503, headers: [("retry-after", "3")], json: #"{"error":"backendError"}"#)
                : CannedResponse(status: 200, json: #"{"name":"n"}"#)
        }
        let http = try pushClient()
        let fcm = try FCMProvider(settings: FCMSettings(serviceAccount: serviceAccount(server), endpoint: server.baseURL), http: http)
        let outcome = try await fcm.send(PushNotification(title: "t"), to: PushDevice(provider: "fcm", token: registrationToken))
        XCTAssertEqual(outcome, .retryLater(after: .seconds(3), reason: "503 OAuth token: backendError"))
        // The failed fetch is not cached: the next send asks again.
        _ = try await fcm.send(PushNotification(title: "t"), to: PushDevice(provider: "fcm", token: registrationToken))
        let paths = await server.requests().map(\.path)
        XCTAssertEqual(paths, ["/token", "/token"])
        await server.shutdown()
    }

    func testBadTokensDataKeysAndServiceAccountsAreRefusedBeforeSending() async throws {
        let google = Google(publicKey: Self.rsaKey.publicKey)
        let (server, fcm, http) = try await start(google)
        for bad in ["", "has space", "slash/token", "emoji😀", String(repeating: "a", count: 4097)] {
            await assertPushError(4701) { try await fcm.send(PushNotification(title: "t"), to: PushDevice(provider: "fcm", token: bad)) }
        }
        for key in ["from", "google.sent_time", "gcm.x", "notification"] {
            await assertPushError(4707) {
                try await fcm.send(
                    PushNotification(title: "t", data: [key: .string("x")]), to: PushDevice(provider: "fcm", token: self.registrationToken))
            }
        }
        let requestCount = await server.requests().count
        XCTAssertEqual(requestCount, 0)
        XCTAssertThrowsError(try FCMServiceAccount(json: Array("not json".utf8))) { XCTAssertEqual(($0 as? PushError)?.code, 4704) }
        XCTAssertThrowsError(try FCMServiceAccount(json: Array(#"{"project_id":"p","client_email":"e"}"#.utf8))) {
            XCTAssertEqual(($0 as? PushError)?.code, 4704)
        }
        let badKey = FCMServiceAccount(
            projectID: "p", clientEmail: "e", privateKeyPEM: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----",
            tokenURI: server.baseURL)
        XCTAssertThrowsError(try FCMProvider(settings: FCMSettings(serviceAccount: badKey), http: http)) {
            XCTAssertEqual(($0 as? PushError)?.code, 4704)
        }
        try await http.shutdown()
        await server.shutdown()
    }
}

/// The messages an FCM test server accepted.
final class Messages: @unchecked Sendable {
    private let lock = NSLock()
    private var messages: [[String: JSONValue]] = []
    func append(_ message: [String: JSONValue]) { lock.withLock { messages.append(message) } }
    var all: [[String: JSONValue]] { lock.withLock { messages } }
}

/// A value set after the server starts (its own URL), read by its handler.
final class Box: @unchecked Sendable {
    private let lock = NSLock()
    private var stored = ""
    var value: String {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}
