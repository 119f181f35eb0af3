@preconcurrency import Crypto
import Foundation
import IMCore
import XCTest

@testable import PushProviders

/// Web Push and UnifiedPush against a local push service that holds the subscription's private key: it
/// decrypts each body as a browser would (RFC 8291) and verifies the VAPID JWT (RFC 8292) with the `k=` key.
final class WebPushProviderTests: XCTestCase {
    /// A browser's subscription: its key pair and auth secret.
    private struct Browser: Sendable {
        let key = P256.KeyAgreement.PrivateKey()
        let auth: [UInt8] = (0..<16).map { _ in UInt8.random(in: 0...255) }
        var keys: PushSubscriptionKeys {
            PushSubscriptionKeys(p256dh: Base64URL.encode(key.publicKey.x963Representation), auth: Base64URL.encode(auth))
        }
    }

    private let vapidKey = P256.Signing.PrivateKey()

    /// A push service at `/push/<id>`: checks VAPID, decrypts, then answers what `answer` says for the id.
    private func pushService(
        browser: Browser, deliveries: DeliveryLog,
        answer: @escaping @Sendable (String) -> CannedResponse = { _ in CannedResponse(status: 201) }
    ) async throws -> TestPushServer {
        let origin = Box()
        let vapidPublic = Base64URL.encode(vapidKey.publicKey.x963Representation)
        let server = try await TestPushServer { request in
            let id = String(request.path.dropFirst("/push/".count))
            guard request.method == "POST", request.path.hasPrefix("/push/") else { return CannedResponse(status: 404) }
            // RFC 8292 §3: Authorization: vapid t=<JWT>, k=<public key>; the JWT's aud is the push resource's origin.
            var subject: String?
            if let authorization = request.header("authorization") {
                let fields = Dictionary(
                    authorization.dropFirst("vapid ".count).split(separator: ",").map { part -> (String, String) in
                        let pair = part.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1).map(String.init)
                        return (pair[0], pair.count > 1 ? pair[1] : "")
                    }, uniquingKeysWith: { a, _ in a })
                guard authorization.hasPrefix("vapid "), fields["k"] == vapidPublic, let jwt = fields["t"].flatMap(ReceivedJWT.init),
                    let key = Base64URL.decode(vapidPublic).flatMap({ try? P256.Signing.PublicKey(x963Representation: $0) }),
                    jwt.verifiesES256(with: key), jwt.claims["aud"] == .string(origin.value),
                    let exp = jwt.claims["exp"]?.intValue, exp > unixNow(), exp <= unixNow() + 24 * 3600
                else { return CannedResponse(status: 401, json: #"{"error":"Unauthorized","message":"bad VAPID"}"#) }
                subject = jwt.claims["sub"]?.stringValue
            }
            guard request.header("ttl").flatMap(Int.init) != nil else { return CannedResponse(status: 400, json: #"{"error":"TTL"}"#) }
            let plaintext: [UInt8]
            if request.header("content-encoding") == "aes128gcm" {
                guard let decrypted = try? WebPushEncryption.decrypt(request.body, userAgentKey: browser.key, authSecret: browser.auth)
                else {
                    return CannedResponse(status: 400, json: #"{"error":"Bad Request","message":"cannot decrypt"}"#)
                }
                plaintext = decrypted
            } else {
                plaintext = request.body
            }
            await deliveries.append(PushServiceDelivery(plaintext: plaintext, vapidSubject: subject))
            return answer(id)
        }
        origin.value = server.baseURL
        return server
    }

    func testTheBrowserDecryptsThePayloadAndTheVAPIDSignatureVerifies() async throws {
        let browser = Browser()
        let deliveries = DeliveryLog()
        let server = try await pushService(browser: browser, deliveries: deliveries) { id in
            CannedResponse(status: 201, headers: [("location", "/message/\(id)-1")])
        }
        let http = try pushClient()
        // The VAPID key as `web-push generate-vapid-keys` prints it: base64url of the private scalar.
        var vapid = VAPIDSettings(subject: "mailto:ops@example.com", privateKey: Base64URL.encode(vapidKey.rawRepresentation))
        vapid.tokenLifetime = .seconds(3600)
        let webPush = try WebPushProvider(settings: WebPushSettings(vapid: vapid).onLoopback, http: http)
        XCTAssertEqual(webPush.applicationServerKey, Base64URL.encode(vapidKey.publicKey.x963Representation))
        let notification = PushNotification(
            title: "Tom", body: "ping 🏓", badge: 2, data: ["cid": .string("lobby")], collapseID: "conversation lobby/1", priority: .normal,
            ttl: 120)
        let device = PushDevice(provider: "webpush", token: "\(server.baseURL)/push/sub1", keys: browser.keys)
        let outcome = try await webPush.send(notification, to: device)
        XCTAssertEqual(outcome, .delivered(id: "/message/sub1-1"))

        let received = await deliveries.all
        XCTAssertEqual(received.count, 1)
        XCTAssertEqual(jsonObject(received.first?.plaintext ?? []).map(JSONValue.object), notification.jsonValue)
        XCTAssertEqual(received.first?.vapidSubject, "mailto:ops@example.com")
        let requests = await server.requests()
        let request = try XCTUnwrap(requests.first)
        XCTAssertEqual(request.header("content-encoding"), "aes128gcm")
        XCTAssertEqual(request.header("ttl"), "120")
        XCTAssertEqual(request.header("urgency"), "normal")
        // "conversation lobby/1" is not a valid Topic: it is replaced by 32 base64url characters of its hash.
        let topic = try XCTUnwrap(request.header("topic"))
        XCTAssertEqual(topic.count, 32)
        XCTAssertTrue(topic.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        XCTAssertEqual(WebPushSender.topic("lobby"), "lobby")
        XCTAssertEqual(VAPIDSigner.origin(of: URL(string: "https://Push.Example.com/wpush/v2/x")!), "https://push.example.com")
        XCTAssertEqual(VAPIDSigner.origin(of: URL(string: "https://[2001:db8::1]:8443/x")!), "https://[2001:db8::1]:8443")
        // The encrypted body is not the plaintext (and is random: the salt and server key are new each time).
        XCTAssertNil(jsonObject(request.body))
        try await http.shutdown()
        await server.shutdown()
    }

    func testPushServiceAnswersMapToGoneRetryAndRejected() async throws {
        let browser = Browser()
        let server = try await pushService(browser: browser, deliveries: DeliveryLog()) { id in
            switch id {
            case "gone404":
                CannedResponse(
                    status: 404, json: #"{"code":404,"errno":102,"error":"Not Found","message":"Request did not validate invalid token"}"#)
            case "gone410":
                CannedResponse(status: 410, json: #"{"code":410,"errno":106,"error":"Gone","message":"Subscription has expired"}"#)
            case "toolarge":
                CannedResponse(status: 413, json: #"{"code":413,"errno":104,"error":"Payload Too Large","message":"too large"}"#)
            case "busy": CannedResponse(status: 429, headers: [("retry-after", "12")], body: Array("slow down".utf8))
            case "down": CannedResponse(status: 502)
            case "moved": CannedResponse(status: 301, headers: [("location", "/push/elsewhere")])
            default: CannedResponse(status: 201)
            }
        }
        let http = try pushClient()
        let webPush = try WebPushProvider(
            settings: WebPushSettings(vapid: VAPIDSettings(subject: "https://example.com/contact", privateKey: vapidKey.pemRepresentation))
                .onLoopback, http: http)
        try await assertOutcomes(
            [
                ("gone404", .deviceGone(reason: "404 Not Found: Request did not validate invalid token")),
                ("gone410", .deviceGone(reason: "410 Gone: Subscription has expired")),
                ("toolarge", .rejected(status: 413, reason: "Payload Too Large: too large")),
                ("busy", .retryLater(after: .seconds(12), reason: "429 slow down")),
                ("down", .retryLater(after: nil, reason: "502 Bad Gateway")),
                // Redirects are not followed.
                ("moved", .rejected(status: 301, reason: "Moved Permanently")),
            ]
        ) { id in
            try await webPush.send(
                PushNotification(title: "t"), to: PushDevice(provider: "webpush", token: "\(server.baseURL)/push/\(id)", keys: browser.keys)
            )
        }
        let requests = await server.requests()
        XCTAssertFalse(requests.map(\.path).contains("/push/elsewhere"))
        // One VAPID JWT per push service origin, reused.
        XCTAssertEqual(Set(requests.map { $0.header("authorization") }).count, 1)
        try await http.shutdown()
        await server.shutdown()
    }

    func testBadSubscriptionsEndpointsAndPayloadsAreRefusedBeforeSending() async throws {
        let server = try await pushService(browser: Browser(), deliveries: DeliveryLog())
        let http = try pushClient()
        let webPush = try WebPushProvider(
            settings: WebPushSettings(
                vapid: VAPIDSettings(subject: "mailto:a@b.c", privateKey: Base64URL.encode(vapidKey.rawRepresentation))
            ).onLoopback, http: http)
        let endpoint = "\(server.baseURL)/push/x"
        let good = Browser().keys
        let cases: [(Int, PushDevice)] = [
            (4702, PushDevice(provider: "webpush", token: endpoint)),
            (4702, PushDevice(provider: "webpush", token: endpoint, keys: PushSubscriptionKeys(p256dh: "!!!", auth: good.auth))),
            (
                4702,
                PushDevice(
                    provider: "webpush", token: endpoint, keys: PushSubscriptionKeys(p256dh: Base64URL.encode([4, 1, 2]), auth: good.auth))
            ),
            // 65 bytes starting with 4 but not a point on the curve.
            (
                4702,
                PushDevice(
                    provider: "webpush", token: endpoint,
                    keys: PushSubscriptionKeys(p256dh: Base64URL.encode([4] + [UInt8](repeating: 7, count: 64)), auth: good.auth))
            ),
            (
                4702,
                PushDevice(
                    provider: "webpush", token: endpoint,
                    keys: PushSubscriptionKeys(p256dh: good.p256dh, auth: Base64URL.encode([1, 2, 3])))
            ),
            (4701, PushDevice(provider: "webpush", token: "not a url", keys: good)),
            (4701, PushDevice(provider: "webpush", token: "ftp://127.0.0.1/push", keys: good)),
        ]
        for (code, device) in cases {
            await assertPushError(code) { try await webPush.send(PushNotification(title: "t"), to: device) }
        }
        await assertPushError(4703) {
            try await webPush.send(
                PushNotification(title: "t", body: String(repeating: "x", count: 4000)),
                to: PushDevice(provider: "webpush", token: endpoint, keys: good))
        }
        let requestCount = await server.requests().count
        XCTAssertEqual(requestCount, 0)
        for key in ["", "short", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----"] {
            XCTAssertThrowsError(
                try WebPushProvider(settings: WebPushSettings(vapid: VAPIDSettings(subject: "mailto:a@b.c", privateKey: key)), http: http)
            ) {
                XCTAssertEqual(($0 as? PushError)?.code, 4704)
            }
        }
        XCTAssertThrowsError(
            try WebPushProvider(
                settings: WebPushSettings(
                    vapid: VAPIDSettings(subject: "ops@example.com", privateKey: Base64URL.encode(vapidKey.rawRepresentation))),
                http: http)
        ) { XCTAssertEqual(($0 as? PushError)?.code, 4705) }
        try await http.shutdown()
        await server.shutdown()
    }

    func testEndpointsOnTheServersOwnNetworkAreRefusedByDefault() async throws {
        let received = DeliveryLog()
        let server = try await pushService(browser: Browser(), deliveries: received)
        let http = try pushClient()
        let vapid = VAPIDSettings(subject: "mailto:a@b.c", privateKey: Base64URL.encode(vapidKey.rawRepresentation))
        let webPush = try WebPushProvider(settings: WebPushSettings(vapid: vapid), http: http)
        let unified = try UnifiedPushProvider(http: http)
        let keys = Browser().keys
        // A client registering its own endpoint could otherwise make the server POST into its network.
        let refused = [
            "\(server.baseURL)/push/x", "https://127.0.0.1/x", "https://127.1/x", "https://2130706433/x", "https://10.1.2.3/x",
            "https://172.20.0.1/x", "https://192.168.1.1/x", "https://169.254.169.254/latest/meta-data", "https://100.64.0.1/x",
            "https://0.0.0.0/x", "https://localhost/x", "https://db.localhost/x", "https://[::1]/x", "https://[fd00::1]/x",
            "https://[fe80::1]/x", "https://[::ffff:127.0.0.1]/x", "http://push.example.com/x",
        ]
        for endpoint in refused {
            await assertPushError(4701) {
                try await webPush.send(PushNotification(title: "t"), to: PushDevice(provider: "webpush", token: endpoint, keys: keys))
            }
            await assertPushError(4701) {
                try await unified.send(PushNotification(title: "t"), to: PushDevice(provider: "unifiedpush", token: endpoint))
            }
        }
        let requestCount = await server.requests().count
        XCTAssertEqual(requestCount, 0)
        // Public hosts pass the default policy (checked without sending); allowedHosts narrows it to named services.
        for endpoint in [
            "https://fcm.googleapis.com/fcm/send/abc", "https://updates.push.services.mozilla.com/wpush/v2/x", "https://8.8.8.8/x",
            "https://[2001:4860::1]/x",
        ] {
            XCTAssertNoThrow(try PushEndpointPolicy.publicHTTPS.check(endpoint), endpoint)
        }
        let named = PushEndpointPolicy(allowedHosts: ["mozilla.com", "fcm.googleapis.com"])
        XCTAssertNoThrow(try named.check("https://updates.push.services.mozilla.com/wpush/v2/x"))
        XCTAssertNoThrow(try named.check("https://fcm.googleapis.com/fcm/send/abc"))
        XCTAssertThrowsError(try named.check("https://evilmozilla.com/x")) { XCTAssertEqual(($0 as? PushError)?.code, 4701) }
        XCTAssertThrowsError(try named.check("https://push.example.com/x")) { XCTAssertEqual(($0 as? PushError)?.code, 4701) }
        try await http.shutdown()
        await server.shutdown()
    }

    func testUnifiedPushPostsPlainJSONWithoutKeysAndEncryptsWithKeys() async throws {
        let browser = Browser()
        let deliveries = DeliveryLog()
        let server = try await pushService(browser: browser, deliveries: deliveries) { id in
            id == "gone" ? CannedResponse(status: 404) : CannedResponse(status: 201)
        }
        let http = try pushClient()
        var unifiedSettings = UnifiedPushSettings()
        unifiedSettings.endpointPolicy = .any
        let unified = try UnifiedPushProvider(settings: unifiedSettings, http: http)
        let notification = PushNotification(title: "Jerry", body: "hi", data: ["cid": .string("c1")])
        let plain = try await unified.send(notification, to: PushDevice(provider: "unifiedpush", token: "\(server.baseURL)/push/up1"))
        XCTAssertEqual(plain, .delivered(id: nil))
        let encrypted = try await unified.send(
            notification, to: PushDevice(provider: "unifiedpush", token: "\(server.baseURL)/push/up2", keys: browser.keys))
        XCTAssertEqual(encrypted, .delivered(id: nil))
        let gone = try await unified.send(notification, to: PushDevice(provider: "unifiedpush", token: "\(server.baseURL)/push/gone"))
        XCTAssertEqual(gone, .deviceGone(reason: "404 Not Found"))

        let received = await deliveries.all
        XCTAssertEqual(received.count, 3)
        for delivery in received { XCTAssertEqual(jsonObject(delivery.plaintext).map(JSONValue.object), notification.jsonValue) }
        XCTAssertNil(received[0].vapidSubject, "no VAPID configured: no Authorization header")
        let requests = await server.requests()
        XCTAssertEqual(requests[0].header("content-type"), "application/json")
        XCTAssertNil(requests[0].header("content-encoding"))
        XCTAssertEqual(requests[1].header("content-encoding"), "aes128gcm")
        XCTAssertEqual(requests[1].header("ttl"), String(28 * 24 * 3600))
        XCTAssertEqual(requests[1].header("urgency"), "high")
        try await http.shutdown()
        await server.shutdown()
    }
}

extension WebPushSettings {
    /// The test push service is on loopback over http, which the default endpoint policy refuses.
    fileprivate var onLoopback: WebPushSettings {
        var settings = self
        settings.endpointPolicy = .any
        return settings
    }
}

/// What a test push service decrypted, in order.
private actor DeliveryLog {
    var all: [PushServiceDelivery] = []
    func append(_ delivery: PushServiceDelivery) { all.append(delivery) }
}

/// What the push service made of one request: the decrypted (or plain) body and the VAPID JWT's subject.
private struct PushServiceDelivery: Sendable {
    var plaintext: [UInt8]
    var vapidSubject: String?
}
