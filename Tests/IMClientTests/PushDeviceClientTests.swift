import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import XCTest

/// The Swift SDK's push devices (docs/PUSH.md, "From the Swift SDK") against a real server on loopback:
/// `IMClientOptions.deviceToken` at login, `registerDevice`, `devices()`, `removeDevice`, and the server's
/// refusals as typed errors.
final class PushDeviceClientTests: XCTestCase {
    static let apnsToken = String(repeating: "0f9e", count: 16)
    // RFC 8291's example subscription (section 5): a real P-256 point and a 16-byte auth secret.
    static let keys = IMPushSubscriptionKeys(
        p256dh: "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4", auth: "BTBZMqHH6r4Tts7J_aSIgg")

    func testTheLoginTokenIsRegisteredMovesToTheNextClientAndCloseRemovesIt() async throws {
        let server = try await startServer()
        var options = server.options()
        options.deviceToken = Self.apnsToken
        let tom = IMClient(clientId: "Tom", deviceId: "iphone-7", options: options)
        try await tom.open()
        let mine = try await tom.devices()
        XCTAssertEqual(mine.map(\.provider), [.apns])
        XCTAssertEqual(mine.first?.token, Self.apnsToken)
        XCTAssertEqual(mine.first?.deviceId, "iphone-7")
        XCTAssertNotNil(mine.first?.createdAt)

        // Jerry logs in on the same phone: the token is his; Tom keeps no device.
        let jerry = IMClient(clientId: "Jerry", deviceId: "iphone-7", options: options)
        try await jerry.open()
        let got1 = try await jerry.devices()
        XCTAssertEqual(got1.map(\.token), [Self.apnsToken])
        let tomsNow = try await tom.devices()
        XCTAssertEqual(tomsNow, [])

        // close() is the SDK's logout (session close): the device gets no more pushes for Jerry.
        await jerry.close()
        let again = IMClient(clientId: "Jerry", deviceId: "laptop", options: server.options())
        try await again.open()
        let jerrysAfterLogout = try await again.devices()
        XCTAssertEqual(jerrysAfterLogout, [])
        await again.close()
        await tom.close()
    }

    func testRegisterListAndRemoveDevicesOfEveryKind() async throws {
        let server = try await startServer()
        let tom = try await openedClient(of: server, "Tom")
        let none = try await tom.devices()
        XCTAssertEqual(none, [])

        let endpoint = "https://updates.push.services.mozilla.com/wpush/v2/gAAAAABf"
        let web = try await tom.registerDevice(IMPushDevice(provider: .webPush, token: endpoint, deviceId: "firefox", keys: Self.keys))
        XCTAssertEqual(web.provider, .webPush)
        XCTAssertEqual(web.keys, Self.keys)
        XCTAssertEqual(web.deviceId, "firefox")
        XCTAssertNotNil(web.updatedAt)
        try await tom.registerDevice(IMPushDevice(provider: .fcm, token: "dQw4w9WgXcQ:APA91bHun4MxP5egoKMwt2KZFBaFUH-1RYqx"))
        try await tom.registerDevice(IMPushDevice(provider: .webhook, token: "gateway-id-42", deviceId: "kiosk"))
        let listed = try await tom.devices()
        XCTAssertEqual(listed.map(\.provider), [.webhook, .fcm, .webPush]) // most recently registered first
        XCTAssertEqual(listed.last?.keys, Self.keys)

        let got3 = try await tom.removeDevice(token: "dQw4w9WgXcQ:APA91bHun4MxP5egoKMwt2KZFBaFUH-1RYqx", provider: .fcm)
        XCTAssertEqual(got3, 1)
        let got4 = try await tom.removeDevice(deviceId: "kiosk")
        XCTAssertEqual(got4, 1)
        let got5 = try await tom.removeDevice(token: "not-registered")
        XCTAssertEqual(got5, 0)
        let got6 = try await tom.devices()
        XCTAssertEqual(got6.map(\.token), [endpoint])
    }

    func testRefusedDevicesAreTypedErrorsWithTheServersCodes() async throws {
        let server = try await startServer()
        let tom = try await openedClient(of: server, "Tom")
        let refused: [(IMPushDevice, IMPushDeviceErrorCode)] = [
            (IMPushDevice(provider: .apns, token: "not-hex"), .invalidToken),
            // The server will not post into its own network for a client.
            (IMPushDevice(provider: .webPush, token: "https://127.0.0.1:8080/admin", keys: Self.keys), .invalidToken),
            (IMPushDevice(provider: .webPush, token: "https://push.example.com/x"), .invalidKeys),
            (
                IMPushDevice(provider: .webPush, token: "https://push.example.com/x", keys: .init(p256dh: "AAAA", auth: "BBBB")),
                .invalidKeys
            ),
        ]
        for (device, expected) in refused {
            do {
                try await tom.registerDevice(device)
                XCTFail("\(device) was registered")
            } catch {
                XCTAssertEqual(error.pushDeviceCode, expected, "\(device): \(error)")
                XCTAssertEqual(error.code, expected.rawValue)
            }
        }
        do {
            _ = try await tom.removeDevice(token: "")
            XCTFail("an empty token was sent")
        } catch {
            XCTAssertEqual(error.clientCode, .invalidArgument)
        }
        let got7 = try await tom.devices()
        XCTAssertEqual(got7, [])
        // A login token no provider takes is not stored, and the login goes on.
        var options = server.options()
        options.deviceToken = "bad token with spaces"
        let jerry = IMClient(clientId: "Jerry", options: options)
        try await jerry.open()
        let got8 = try await jerry.devices()
        XCTAssertEqual(got8, [])
        await jerry.close()
    }
}
