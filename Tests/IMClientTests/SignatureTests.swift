import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import IMServer
import XCTest

final class SignatureTests: XCTestCase {
    /// With signatures on, a provider signs logins and conversation actions; a reconnect after a restart
    /// (which forgets session tokens) falls back to a fresh login signature.
    func testSignedLoginConversationActionsAndReconnect() async throws {
        let configure: (inout ServerConfiguration) -> Void = {
            $0.appID = "app"
            $0.masterKey = "secret"
        }
        let server = try await ServerHarness.start(configure: configure)
        let provider = MasterKeySigner(signer: Signer(appID: "app", masterKey: "secret"))

        let unsigned = server.client("Mallory")
        do {
            try await unsigned.open()
            XCTFail("an unsigned login succeeded")
        } catch {
            XCTAssertEqual(error.knownCode, .signatureFailed)
        }

        let tom = server.client("Tom") { $0.signatureProvider = provider }
        let jerry = server.client("Jerry") { $0.signatureProvider = provider }
        let logs = try await openClients([tom, jerry])
        let conversation = try await tom.createConversation(members: ["Jerry"])
        try await conversation.add(members: ["Bob", "Harry"])
        try await conversation.remove(members: ["Harry"])
        try await jerry.conversation(conversation.id).quit()
        try await jerry.conversation(conversation.id).join()
        let count = try await conversation.countMembers()
        XCTAssertEqual(count, 3)
        // A conversation of the creator alone and a chat room: the creator is among the signed members
        // (the server refuses a signed start with none, whose text would be a login's).
        let alone = try await tom.createConversation(name: "notes")
        let aloneCount = try await alone.countMembers()
        XCTAssertEqual(aloneCount, 1)
        _ = try await tom.createChatRoom(name: "room")

        await server.stop()
        let second = try await ServerHarness.start(directory: server.directory, port: server.port, configure: configure)
        for log in logs { _ = try await log.next("resumed") { if case .resumed = $0 { true } else { nil } } }
        try await conversation.send(.text("signed and back"))
        let message = try await logs[1].message(in: conversation.id)
        XCTAssertEqual(message.content.text, "signed and back")

        await tom.close()
        await jerry.close()
        await second.stop()
    }
}
