import Foundation
import HookbotTestSupport
import IMClient
import IMCore
import IMServer
import IMSignatures
import XCTest

/// SDK clients attached in process as the server's interceptors, one answering with values
/// (`interceptionReviewer`), the other with commands (`interceptionHandler`), chained: the first rewrites,
/// the second sees the rewritten text and refuses.
final class InProcessInterceptorTests: XCTestCase {
    func testAReviewerAndAHandlerInOneChain() async throws {
        let server = try await startServer { configuration in
            configuration.appID = "app"
            configuration.interception.interceptors = [
                .init(clientID: "rewriter", secret: "rewriter-secret"), .init(clientID: "guard", secret: "guard-secret"),
            ]
            configuration.interception.deadlineMillis = 2000
        }

        var rewriting = IMClientOptions(local: server.server)
        rewriting.signatureProvider = MasterKeySigner(signer: Signer(appID: "app", masterKey: "rewriter-secret"))
        rewriting.interceptionReviewer = { request in
            guard case .message(_, _, .text(let body), _, _) = request, let text = TypedMessage.decode(body)?.text else { return .allow }
            guard text.contains("笨蛋") else { return .allow }
            return .modify(body: TypedMessage.text(text.replacingOccurrences(of: "笨蛋", with: "**")).encoded(), recipients: nil)
        }
        var guarding = IMClientOptions(local: server.server)
        guarding.signatureProvider = MasterKeySigner(signer: Signer(appID: "app", masterKey: "guard-secret"))
        guarding.interceptionHandler = { request in
            var verdict = Command(cmd: .hook, op: .verdict)
            let text = request.msg.flatMap(TypedMessage.decode)?.text ?? ""
            if request.kind == "message", text.contains("** 🙄") {
                verdict.verdict = "drop"
                verdict.reason = "还是不礼貌"
                verdict.appCode = 7
            } else {
                verdict.verdict = "allow"
            }
            return verdict
        }
        let rewriter = IMClient(clientId: "rewriter", options: rewriting)
        let guardian = IMClient(clientId: "guard", options: guarding)
        try await rewriter.open()
        try await guardian.open()
        try await waitUntilInterceptorAttached(server.server, "rewriter")
        try await waitUntilInterceptorAttached(server.server, "guard")

        let ((tom, jerry), logs) = try await openedClients(of: server, "Tom", "Jerry")
        let conversation = try await tom.createConversation(members: ["Jerry"])
        _ = try await conversation.send(.text("你好 Jerry 👋"))
        _ = try await conversation.send(.text("你这个笨蛋"))
        do {
            _ = try await conversation.send(.text("笨蛋 🙄"))
            XCTFail("the guard's drop did not refuse the message")
        } catch {
            XCTAssertEqual(error.code, 4402)
            XCTAssertEqual(error.detail, "还是不礼貌")
            XCTAssertEqual(error.appCode, 7)
        }
        _ = try await conversation.send(.text("end"))
        let received = try await logs[1].messages(before: "end", in: conversation.id).map(\.content.text)
        XCTAssertEqual(received, ["你好 Jerry 👋", "你这个**"])
        let stats = server.server.interceptionStats
        XCTAssertEqual(stats.policyApplied, 0)
        XCTAssertEqual(stats.dropped, 1)
        await rewriter.close()
        await guardian.close()
    }

    /// A request without a reply in time fails with 9003 and says how long it waited, and what the client was
    /// sent after it still resolves: a slow interceptor holds Tom's message past his `requestTimeout`.
    func testARequestWithoutAReplyInTimeFailsWithRequestTimeout() async throws {
        let server = try await startServer { configuration in
            configuration.appID = "app"
            configuration.interception.interceptors = [.init(clientID: "slow", secret: "slow-secret")]
            configuration.interception.deadlineMillis = 5000
        }
        var slow = IMClientOptions(local: server.server)
        slow.signatureProvider = MasterKeySigner(signer: Signer(appID: "app", masterKey: "slow-secret"))
        slow.interceptionReviewer = { request in
            guard case .message(_, _, .text(let body), _, _) = request, TypedMessage.decode(body)?.text == "慢一点 🐢" else {
                return .allow
            }
            try? await Task.sleep(for: .milliseconds(1500))
            return .allow
        }
        let reviewer = IMClient(clientId: "slow", options: slow)
        addTeardownBlock(releasing: reviewer) { await $0.close() }
        try await reviewer.open()
        try await waitUntilInterceptorAttached(server.server, "slow")

        let tom = server.client("Tom") { $0.requestTimeout = .milliseconds(300) }
        addTeardownBlock(releasing: tom) { await $0.close() }
        try await tom.open()
        let conversation = try await tom.createConversation(members: ["Jerry"])
        do {
            _ = try await conversation.send(.text("慢一点 🐢"))
            XCTFail("a message held past the request timeout was acknowledged in time")
        } catch {
            XCTAssertEqual(error.code, IMClientErrorCode.requestTimeout.rawValue, "\(error)")
            XCTAssertEqual(error.detail, "no reply within 0.3 seconds")
        }
        // The timeout is the same for every request: a second one held as long fails the same way.
        do {
            _ = try await conversation.send(.text("慢一点 🐢"))
            XCTFail("a second held message was acknowledged in time")
        } catch {
            XCTAssertEqual(error.detail, "no reply within 0.3 seconds")
        }
    }
}
