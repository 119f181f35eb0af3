import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import XCTest

/// Recalls and edits made while a client was paused reach it when it resumes (the reconnect's `session
/// open` carries `lastPatchTime`; the server pushes the patches since).
final class MissedPatchClientTests: XCTestCase {
    func testRecallsAndEditsMadeWhilePausedArriveOnResume() async throws {
        let server = try await ServerHarness.start()
        let tom = server.client("Tom")
        // Jerry waits 2–4 s before reconnecting: long enough for Tom to recall and edit first.
        let jerry = server.client("Jerry") {
            $0.reconnectBaseDelay = .seconds(4)
            $0.reconnectMaxDelay = .seconds(4)
        }
        let logs = try await openClients([tom, jerry])
        let jerryEvents = logs[1]
        let conversation = try await tom.createConversation(members: ["Jerry"])
        let oops = try await conversation.send(.text("oops"))
        let typo = try await conversation.send(.text("helo"))
        _ = try await jerryEvents.messages(2, in: conversation.id)
        await tom.close()

        await server.stop()
        _ = try await jerryEvents.next("Jerry paused") { if case .paused = $0 { true } else { nil } }
        let second = try await server.restarted()
        let tomAgain = try await openedClient(of: second, "Tom")
        let again = tomAgain.conversation(conversation.id)
        _ = try await again.recall(oops)
        let edited = try await again.update(typo, to: .text("hello"))
        let stateWhileEditing = await jerry.state
        XCTAssertNotEqual(stateWhileEditing, .opened, "Jerry resumed before the changes: the test proves nothing")

        _ = try await jerryEvents.next("Jerry resumed", timeout: .seconds(15)) { if case .resumed = $0 { true } else { nil } }
        let recalled = try await jerryEvents.next("recalled") { if case .recalled(let m) = $0 { m } else { nil } }
        XCTAssertEqual(recalled.id, oops.id)
        XCTAssertEqual(recalled.content.messageType, MessageType.recalled.rawValue)
        let update = try await jerryEvents.next("edited") { if case .edited(let m) = $0 { m } else { nil } }
        XCTAssertEqual(update.id, typo.id)
        XCTAssertEqual(update.content.text, "hello")
        XCTAssertEqual(update.editedAt, edited.editedAt)

        await tomAgain.close()
        await jerry.close()
        await second.stop()
    }
}
