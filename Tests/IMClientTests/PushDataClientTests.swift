import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import IMServer
import PushProviders
import Synchronization
import XCTest

/// `IMSendOptions.pushData` (docs/PUSH.md, "From the Swift SDK and `hookbot chat`"): the documented example as
/// written, against a real server whose webhook gateway is not listening, so each push is tried once and kept
/// in the server's record of recent pushes with the text it was sent with.
final class PushDataClientTests: XCTestCase {
    /// A server (stopped after the test) with a webhook push provider on loopback port 9, where nothing listens:
    /// each push is tried, recorded among the recent pushes, and retried only much later.
    private func startServerPushingNowhere() async throws -> ServerHarness {
        let server = try await startServer { configuration in
            configuration.push.providers = [
                PushProviderConfiguration(.webhook(WebhookSettings(url: "http://127.0.0.1:9/push", secret: "sixteen-bytes-or-more")))
            ]
            configuration.push.queue.retryDelay = .seconds(60)
            configuration.push.queue.pollInterval = .milliseconds(50)
        }
        return server
    }

    func testTheDocumentedExampleSendsPushDataAndTheServerPushesItsText() async throws {
        let server = try await startServerPushingNowhere()
        let jerry = try await openedClient(of: server, "Jerry")
        _ = try await jerry.registerDevice(IMPushDevice(provider: .webhook, token: "jerry-phone", deviceId: "phone"))
        await jerry.close() // logout: the devices of this login's device id go, the phone's stays
        let tom = try await openedClient(of: server, "Tom")
        addTeardownBlock(releasing: tom) { await $0.close() }
        let conversation = try await tom.createConversation(name: "kitchen", members: ["Jerry"])

        // docs/PUSH.md, as written:
        let push = IMPushData(title: "Tom", body: "New order #42", badge: .number(1), sound: "default", payload: ["order": 42])
        try await conversation.send(.text("order 42 is ready"), options: IMSendOptions(pushData: push))
        // sent as {"alert":{"body":"New order #42","title":"Tom"},"badge":1,"order":42,"sound":"default"}

        // Written by hand, as LeanCloud's other SDKs take it ("Increment": the receiver's unread count):
        let raw = try IMPushData(json: #"{"alert": "Tom needs you", "badge": "Increment", "sound": "default"}"#)
        try await conversation.send(.text("come to the kitchen"), options: IMSendOptions(pushData: raw))

        XCTAssertEqual(push.encoded, #"{"alert":{"body":"New order #42","title":"Tom"},"badge":1,"order":42,"sound":"default"}"#)
        XCTAssertEqual(raw.body, "Tom needs you")
        XCTAssertEqual(raw.badge, .increment)
        var entries: [PushHistoryEntry] = []
        for _ in 0..<200 {
            entries = server.server.recentPushes(cid: conversation.id).entries
            if entries.count == 2 { break }
            try await Task.sleep(for: .milliseconds(25))
        }
        // The two may be sent at once (one batch), so in either order.
        entries.sort { ($0.badge ?? 0) < ($1.badge ?? 0) }
        XCTAssertEqual(entries.map(\.receiver), ["Jerry", "Jerry"])
        XCTAssertEqual(entries.map(\.title), ["Tom", nil])
        XCTAssertEqual(entries.map(\.body), ["New order #42", "Tom needs you"])
        XCTAssertEqual(entries.map(\.badge), [1, 2], "pushData's badge, then the unread count")
        XCTAssertEqual(entries.map(\.outcome), ["retry", "retry"], "nothing listens: tried again later")

        // A transient message is never pushed: its pushData is not even sent, and that is no error.
        _ = try await conversation.send(.text("typing"), options: IMSendOptions(transient: true, pushData: push))
    }

    /// `hookbot chat`'s `/push <json object> <text>`, as a process: the text goes out with that pushData, and a
    /// line without a JSON object or without text is answered with how to write it.
    func testHookbotChatPushSendsTheTextWithPushData() async throws {
        guard let binary = MediaClientTests.hookbotBinary() else { throw XCTSkip("hookbot is not built") }
        let server = try await startServerPushingNowhere()
        let jerry = try await openedClient(of: server, "Jerry")
        _ = try await jerry.registerDevice(IMPushDevice(provider: .webhook, token: "jerry-phone", deviceId: "phone"))
        let room = try await jerry.createConversation(name: "push-room", members: ["Tom"])
        await jerry.close()

        let chat = try LineProcess(
            binary: binary,
            arguments: ["chat", "--as", "Tom", "--conversation", "push-room", "--server", "ws://127.0.0.1:\(server.port)/ws"])
        defer { chat.stop() }
        try await chat.waitFor("Logged in as Tom")
        // A nested object in the payload: the JSON ends at the brace that closes it, the text follows.
        chat.type(#"/push {"alert": {"title": "Tom", "body": "Dinner is ready"}, "badge": 1, "meal": {"kind": "soup"}} come"#)
        var entries: [PushHistoryEntry] = []
        for _ in 0..<400 where entries.isEmpty {
            entries = server.server.recentPushes(cid: room.id).entries
            try await Task.sleep(for: .milliseconds(25))
        }
        XCTAssertEqual(entries.map(\.title), ["Tom"])
        XCTAssertEqual(entries.map(\.body), ["Dinner is ready"])
        XCTAssertEqual(entries.map(\.badge), [1])
        chat.type("/push dinner is ready")
        try await chat.waitFor("! /push takes a JSON object then the message")
        chat.type(#"/push {"alert": "no text follows"}"#)
        try await chat.waitFor("! /push takes a JSON object then the message", count: 2)
        chat.type("/exit")
        try await chat.waitForExit()
        XCTAssertEqual(server.server.recentPushes(cid: room.id).entries.count, 1, "the refused lines sent nothing")
    }
}
