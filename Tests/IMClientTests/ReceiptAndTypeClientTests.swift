import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import XCTest

/// Every member's receipt marks and history of one message type, through the Swift SDK.
final class ReceiptAndTypeClientTests: XCTestCase {
    func testMemberReceiptsAndMessagesOfOneType() async throws {
        let server = try await startServer()
        let ((tom, jerry), logs) = try await openedClients(of: server, "Tom", "Jerry")
        let conversation = try await tom.createConversation(members: ["Jerry", "Spike"])
        let first = try await conversation.send(.text("first"))
        let image = try await conversation.send(.typed(TypedMessage(type: MessageType.image.rawValue, text: "a picture")))
        let last = try await conversation.send(.text("last"))
        _ = try await logs[1].messages(3, in: conversation.id)
        try await jerry.conversation(conversation.id).markRead()

        let receipts = try await conversation.memberReceipts()
        XCTAssertEqual(receipts.map(\.clientId), ["Jerry", "Spike"])
        XCTAssertEqual(receipts[0].readAt, last.timestamp)
        XCTAssertEqual(receipts[0].deliveredAt, last.timestamp)
        XCTAssertLessThan(receipts[1].readAt, first.timestamp, "Spike read nothing")

        let texts = try await jerry.conversation(conversation.id).messages(ofType: MessageType.text.rawValue)
        XCTAssertEqual(texts.map(\.id), [first.id, last.id])
        let images = try await conversation.messages(ofType: MessageType.image.rawValue)
        XCTAssertEqual(images.map(\.id), [image.id])
        let older = try await conversation.messages(ofType: MessageType.text.rawValue, beforeTimestamp: last.timestamp, limit: 5)
        XCTAssertEqual(older.map(\.id), [first.id])

        let outsider = try await openedClient(of: server, "Nobody")
        do {
            _ = try await outsider.conversation(conversation.id).memberReceipts()
            XCTFail("a non-member read the receipts")
        } catch {
            XCTAssertEqual(error.code, 4317)
        }
    }
}
