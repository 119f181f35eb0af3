import Foundation
import HookbotTestSupport
import IMCore
import IMProto
import IMServer
import SwiftProtobuf
import XCTest

/// Push devices over LeanCloud's protobuf subprotocol (docs/PUSH.md, "Devices"): the `deviceToken` field of
/// an SDK's `session open` frame, and Hookbot's `device` commands (CommandType 100, the device in
/// `hookbotFields`).
final class PushDeviceProtobufTests: XCTestCase {
    static let apnsToken = String(repeating: "0f", count: 32)

    /// `session open` as the iOS SDK sends it over `lc.protobuf2.3`, with its device token.
    func open(_ server: ServerHarness, _ clientID: String, deviceToken: String?) async throws -> WireClient {
        let client = try await WireClient.connect(port: server.port, mode: .binary)
        var open = LCProtoGenericCommand()
        open.cmd = .session
        open.op = .open
        open.appID = "app"
        open.peerID = clientID
        open.sessionMessage.ua = "ios/13.0.0"
        open.sessionMessage.deviceID = "iphone-\(clientID)"
        if let deviceToken { open.sessionMessage.deviceToken = deviceToken }
        let opened = try await client.request(open)
        XCTAssertEqual(opened.op, .opened, "\(opened)")
        return client
    }

    func tokens(_ client: WireClient) async throws -> [String] {
        var query = LCProtoGenericCommand()
        query.cmd = .device
        query.op = .query
        let reply = try await client.request(query)
        XCTAssertEqual(reply.cmd, .device, "\(reply)")
        XCTAssertEqual(reply.op, .results, "\(reply)")
        return try XCTUnwrap(reply.devices?.arrayValue, "\(reply)").compactMap { $0.objectValue?["token"]?.stringValue }
    }

    func testDeviceTokenAndDeviceCommandsOverProtobuf() async throws {
        let server = try await startServer()
        let tom = try await open(server, "Tom", deviceToken: Self.apnsToken)
        var found = try await tokens(tom)
        XCTAssertEqual(found, [Self.apnsToken])

        // device add, written as a protobuf client would: cmd 100, op add, the device in hookbotFields.
        var add = LCProtoGenericCommand()
        add.cmd = .device
        add.op = .add
        add.hookbotFields = #"{"device":{"provider":"webhook","token":"tom@gateway"}}"#
        let added = try await tom.request(add)
        XCTAssertEqual(added.op, .added, "\(added)")
        XCTAssertEqual(added.device?.objectValue?["provider"], .string("webhook"))
        // The command survives LeanCloud's wire format: cmd is number 100 on the wire.
        var raw = LCProtoGenericCommand()
        raw.cmd = .device
        let bytes: [UInt8] = try raw.serializedBytes()
        XCTAssertEqual(bytes, [0x08, 100])
        XCTAssertEqual(raw.textFormatString().trimmingCharacters(in: .whitespacesAndNewlines), "cmd: device")

        // A refused endpoint answers an error frame with the code.
        add.hookbotFields = #"{"device":{"provider":"unifiedpush","token":"https://10.1.2.3/up"}}"#
        let refused = try await tom.request(add)
        XCTAssertEqual(refused.cmd, .error, "\(refused)")
        XCTAssertEqual(refused.code, 4701, "\(refused)")

        // Jerry logs in on the same phone: the APNs token moves to him.
        let jerry = try await open(server, "Jerry", deviceToken: Self.apnsToken)
        found = try await tokens(tom)
        XCTAssertEqual(found, ["tom@gateway"])
        found = try await tokens(jerry)
        XCTAssertEqual(found, [Self.apnsToken])

        // device remove through the model command (the codec puts the device in hookbotFields).
        var remove = Command(cmd: .device, op: .remove)
        remove.device = ["provider": "webhook", "token": "tom@gateway"]
        let removed = try await tom.request(remove)
        XCTAssertEqual(removed.op, .removed, "\(removed)")
        XCTAssertEqual(removed.count, 1)

        // Jerry logs out (session close): his phone gets no more pushes.
        var close = LCProtoGenericCommand()
        close.cmd = .session
        close.op = .close
        let closed = try await jerry.request(close)
        XCTAssertEqual(closed.op, .closed, "\(closed)")
        let jerryAgain = try await open(server, "Jerry", deviceToken: nil)
        found = try await tokens(jerryAgain)
        XCTAssertEqual(found, [])
    }
}
