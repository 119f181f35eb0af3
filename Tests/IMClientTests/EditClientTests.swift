import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import XCTest

/// The Swift SDK's edits and binary messages: `update(_:to:)`, `send(binary:)`, `IMEvent.edited`, and
/// `binary` / `editedAt` in history and in offline delivery.
final class EditClientTests: XCTestCase {
    func testEditsAndBinaryMessagesLiveInHistoryAndOffline() async throws {
        let server = try await startServer()
        let ((tom, jerry), logs) = try await openedClients(of: server, "Tom", "Jerry")
        let conversation = try await tom.createConversation(members: ["Jerry", "Spike"])
        let typo = try await conversation.send(.text("helo"))
        let bytes = Data([0xCA, 0xFE, 0x00])
        let blob = try await conversation.send(binary: bytes)
        XCTAssertEqual(blob.binary, bytes)
        let live = try await logs[1].messages(2, in: conversation.id)
        XCTAssertEqual(live.map(\.binary), [nil, bytes])

        let fixed = try await conversation.update(typo, to: .text("hello"), mentionPids: ["Jerry"])
        let editedAt = try XCTUnwrap(fixed.editedAt)
        XCTAssertEqual(fixed.id, typo.id)
        let event = try await logs[1].next("edited") { event -> IMMessage? in
            if case .edited(let message) = event { return message }
            return nil
        }
        XCTAssertEqual(event.id, typo.id)
        XCTAssertEqual(event.content.text, "hello")
        XCTAssertEqual(event.editedAt, editedAt)
        XCTAssertEqual(event.mentionPids, ["Jerry"])
        _ = try await conversation.update(blob, toBinary: Data([1]))
        let binaryEdit = try await logs[1].next("binary edit") { event -> IMMessage? in
            if case .edited(let message) = event, message.id == blob.id { return message }
            return nil
        }
        XCTAssertEqual(binaryEdit.binary, Data([1]))

        // History: the latest versions, with editedAt; the binary one as bytes.
        let history = try await jerry.conversation(conversation.id).messages(limit: 10)
        XCTAssertEqual(history.map(\.id), [typo.id, blob.id])
        XCTAssertEqual(history.first?.content.text, "hello")
        XCTAssertEqual(history.first?.editedAt, editedAt)
        XCTAssertEqual(history.last?.binary, Data([1]))
        XCTAssertNotNil(history.last?.editedAt)

        // Spike was offline: the backlog brings the latest versions.
        let spike = server.client("Spike")
        let spikeLog = try await openClients([spike])
        let offline = try await spikeLog[0].messages(2, in: conversation.id)
        XCTAssertEqual(offline.map(\.content.text), ["hello", ""])
        XCTAssertEqual(offline.first?.editedAt, editedAt)
        XCTAssertEqual(offline.last?.binary, Data([1]))
        XCTAssertTrue(offline.allSatisfy(\.isOffline))

        // Only the sender edits (4403).
        do {
            _ = try await jerry.conversation(conversation.id).update(typo, to: .text("mine now"))
            XCTFail("only the sender may edit")
        } catch {
            XCTAssertEqual(error.code, 4403)
        }
        for client in [tom, jerry, spike] { await client.close() }
    }
}
