import Foundation
import HookbotTestSupport
import IMCore
import XCTest

@testable import IMServer

/// Push devices (docs/PUSH.md, "Devices"): LeanCloud's `deviceToken` at `session open`, `session close`
/// removing it, and Hookbot's `device add` / `remove` / `query`, against a real server on loopback (SQLite,
/// and PostgreSQL in make test's PostgreSQL pass).
final class PushDeviceTests: XCTestCase {
    static let apnsToken = String(repeating: "ab12", count: 16)
    static let fcmToken = "dQw4w9WgXcQ:APA91bHun4MxP5egoKMwt2KZFBaFUH-1RYqx"
    // RFC 8291's example subscription (section 5): a real P-256 point and a 16-byte auth secret.
    static let p256dh = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
    static let auth = "BTBZMqHH6r4Tts7J_aSIgg"

    func open(_ server: ServerHarness, _ clientID: String, deviceToken: String? = nil, deviceID: String? = nil) async throws
        -> TestClient
    {
        let client = try await TestClient.connect(port: server.port)
        var open = Command(cmd: .session, op: .open)
        open.peerId = clientID
        open.deviceToken = deviceToken
        open.deviceId = deviceID
        let reply = try await client.request(open)
        XCTAssertEqual(reply.op, .opened, "\(reply)")
        return client
    }

    func devices(_ client: TestClient) async throws -> [[String: JSONValue]] {
        let reply = try await client.request(Command(cmd: .device, op: .query))
        XCTAssertEqual(reply.op, .results, "\(reply)")
        return try XCTUnwrap(reply.devices?.arrayValue, "\(reply)").compactMap(\.objectValue)
    }

    func add(_ client: TestClient, _ device: [String: JSONValue]) async throws -> Command {
        var add = Command(cmd: .device, op: .add)
        add.device = .object(device)
        return try await client.request(add)
    }

    func mustAdd(_ client: TestClient, _ device: [String: JSONValue], file: StaticString = #filePath, line: UInt = #line) async throws {
        let reply = try await add(client, device)
        XCTAssertEqual(reply.op, .added, "\(reply)", file: file, line: line)
    }

    func testADeviceTokenAtLoginRegistersAndMovesToTheNextClientLoggingInWithIt() async throws {
        let server = try await startServer()
        let tom = try await open(server, "Tom", deviceToken: Self.apnsToken, deviceID: "iphone-1")
        var found = try await devices(tom)
        XCTAssertEqual(found.count, 1)
        XCTAssertEqual(found.first?["provider"], .string("apns"))
        XCTAssertEqual(found.first?["token"], .string(Self.apnsToken))
        XCTAssertEqual(found.first?["deviceId"], .string("iphone-1"))

        // Jerry logs in on the same phone: the token is his now, Tom's list is empty.
        let jerry = try await open(server, "Jerry", deviceToken: Self.apnsToken, deviceID: "iphone-1")
        found = try await devices(jerry)
        XCTAssertEqual(found.map { $0["token"] }, [.string(Self.apnsToken)])
        found = try await devices(tom)
        XCTAssertEqual(found.count, 0, "\(found)")

        // An Android token (not 64 hex digits) is FCM's.
        let spike = try await open(server, "Spike", deviceToken: Self.fcmToken)
        found = try await devices(spike)
        XCTAssertEqual(found.first?["provider"], .string("fcm"))
        XCTAssertNil(found.first?["deviceId"])

        // A token no provider takes is not stored; the login goes on.
        let tyke = try await open(server, "Tyke", deviceToken: "not a token!")
        found = try await devices(tyke)
        XCTAssertEqual(found.count, 0)
    }

    func testSessionCloseRemovesTheLoginDeviceAndADroppedConnectionKeepsIt() async throws {
        let server = try await startServer()
        let tom = try await open(server, "Tom", deviceToken: Self.apnsToken)
        let web = try await add(
            tom,
            [
                "provider": "webpush", "token": "https://updates.push.services.mozilla.com/wpush/v2/gAAAA",
                "keys": ["p256dh": .string(Self.p256dh), "auth": .string(Self.auth)],
            ])
        XCTAssertEqual(web.op, .added, "\(web)")
        let closed = try await tom.request(Command(cmd: .session, op: .close))
        XCTAssertEqual(closed.op, .closed)
        // Logged out: the phone's token is gone; the browser subscription registered apart stays.
        let again = try await open(server, "Tom")
        var found = try await devices(again)
        XCTAssertEqual(found.map { $0["provider"] }, [.string("webpush")], "\(found)")

        // A connection that drops without `session close` is an offline client: its device stays.
        let jerry = try await open(server, "Jerry", deviceToken: Self.fcmToken, deviceID: "pixel")
        await jerry.close()
        // Once the server has seen the connection go (Jerry offline), his device is still there.
        try await again.waitUntilOffline(["Jerry"])
        let jerryAgain = try await open(server, "Jerry")
        found = try await devices(jerryAgain)
        XCTAssertEqual(found.map { $0["token"] }, [.string(Self.fcmToken)])
    }

    func testRegisterListAndRemoveDevices() async throws {
        let server = try await startServer()
        let tom = try await open(server, "Tom")
        let endpoint = "https://fcm.googleapis.com/fcm/send/dXJ1bmlmaWVk"
        let added = try await add(
            tom,
            [
                "provider": "webpush", "token": .string(endpoint), "deviceId": "firefox",
                "keys": ["p256dh": .string(Self.p256dh), "auth": .string(Self.auth)],
            ])
        XCTAssertEqual(added.op, .added, "\(added)")
        XCTAssertEqual(added.device?.objectValue?["token"], .string(endpoint))
        // What docs/PROTOCOL.md shows for `device added`.
        XCTAssertEqual(
            added.device?.objectValue?.keys.sorted(), ["createdAt", "deviceId", "keys", "provider", "token", "updatedAt"])
        try await mustAdd(tom, ["provider": "webhook", "token": "tom@gateway"])
        try await mustAdd(tom, ["provider": "unifiedpush", "token": "https://ntfy.sh/upAbC123?up=1"])
        try await mustAdd(tom, ["provider": "fcm", "token": .string(Self.fcmToken), "deviceId": "pixel"])

        var found = try await devices(tom)
        // Most recently registered first; the Web Push keys come back as registered.
        XCTAssertEqual(found.map { $0["provider"] }, [.string("fcm"), .string("unifiedpush"), .string("webhook"), .string("webpush")])
        XCTAssertEqual(found.last?["keys"], .object(["p256dh": .string(Self.p256dh), "auth": .string(Self.auth)]))

        // The same app install (deviceId) with a new token replaces its old token.
        try await mustAdd(tom, ["provider": "fcm", "token": "rotated-token", "deviceId": "pixel"])
        found = try await devices(tom)
        XCTAssertEqual(found.filter { $0["provider"] == .string("fcm") }.map { $0["token"] }, [.string("rotated-token")])

        var remove = Command(cmd: .device, op: .remove)
        remove.device = ["provider": "webhook", "token": "tom@gateway"]
        var removed = try await tom.request(remove)
        XCTAssertEqual(removed.op, .removed, "\(removed)")
        XCTAssertEqual(removed.count, 1)
        remove.device = ["deviceId": "firefox"]
        removed = try await tom.request(remove)
        XCTAssertEqual(removed.count, 1)
        // Another client cannot remove Tom's device.
        let jerry = try await open(server, "Jerry")
        remove.device = ["provider": "fcm", "token": "rotated-token"]
        removed = try await jerry.request(remove)
        XCTAssertEqual(removed.count, 0)
        found = try await devices(tom)
        XCTAssertEqual(found.map { $0["provider"] }, [.string("fcm"), .string("unifiedpush")])
        let jerrys = try await devices(jerry)
        XCTAssertEqual(jerrys.count, 0)
    }

    func testBadDevicesAreRefusedWithCodes() async throws {
        let server = try await startServer()
        let tom = try await open(server, "Tom")
        let keys: JSONValue = ["p256dh": .string(Self.p256dh), "auth": .string(Self.auth)]
        let cases: [(JSONValue, Int, String)] = [
            (["provider": "apns", "token": "abc"], 4701, "hex digits"),
            (["provider": "fcm", "token": "has spaces in it"], 4701, "FCM"),
            (["provider": "webpush", "token": "https://127.0.0.1:5432/push", "keys": keys], 4701, "loopback"),
            (["provider": "webpush", "token": "https://169.254.169.254/latest", "keys": keys], 4701, "link-local"),
            (["provider": "webpush", "token": "http://push.example.com/x", "keys": keys], 4701, "not https"),
            (["provider": "unifiedpush", "token": "https://[::ffff:10.0.0.1]/up"], 4701, "private"),
            (["provider": "webpush", "token": "https://push.example.com/x"], 4702, "p256dh and auth"),
            (
                ["provider": "webpush", "token": "https://push.example.com/x", "keys": ["p256dh": .string(Self.p256dh), "auth": "AAAA"]],
                4702, "16"
            ),
            (
                ["provider": "webpush", "token": "https://push.example.com/x", "keys": ["p256dh": "BAAA", "auth": .string(Self.auth)]],
                4702, "P-256"
            ),
            (["provider": "webpush", "token": "https://push.example.com/x", "keys": "nope"], 4702, "p256dh"),
            (["provider": "pigeon", "token": "coop-7"], 4706, "unknown push provider"),
            (["provider": "apns"], 4903, "token"),
            ("just a string", 4903, "object"),
            (["provider": "fcm", "token": 42], 4903, "string"),
        ]
        for (device, code, words) in cases {
            var add = Command(cmd: .device, op: .add)
            add.device = device
            let reply = try await tom.request(add)
            XCTAssertEqual(reply.cmd, .error, "\(device): \(reply)")
            XCTAssertEqual(reply.code, code, "\(device): \(reply)")
            XCTAssertTrue(reply.detail?.contains(words) == true, "\(device): \(reply)")
        }
        var remove = Command(cmd: .device, op: .remove)
        remove.device = ["provider": "fcm"]
        let refused = try await tom.request(remove)
        XCTAssertEqual(refused.code, 4903, "\(refused)")
        let left = try await devices(tom)
        XCTAssertEqual(left.count, 0)
    }

    func testTheEleventhDeviceDropsTheLeastRecentlyRegistered() async throws {
        let server = try await startServer()
        let tom = try await open(server, "Tom")
        for n in 0..<PushDevices.maxPerClient {
            try await mustAdd(tom, ["provider": "fcm", "token": .string("token-\(n)")])
        }
        // Registering token-0 again makes it the most recent; the 11th then drops token-1.
        try await mustAdd(tom, ["provider": "fcm", "token": "token-0"])
        try await mustAdd(tom, ["provider": "fcm", "token": "token-10"])
        let tokens = try await devices(tom).compactMap { $0["token"]?.stringValue }
        XCTAssertEqual(tokens.count, 10)
        XCTAssertEqual(tokens.first, "token-10")
        XCTAssertTrue(tokens.contains("token-0"))
        XCTAssertFalse(tokens.contains("token-1"), "\(tokens)")
    }
}
