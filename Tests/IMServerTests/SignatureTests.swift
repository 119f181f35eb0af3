import Foundation
import HookbotTestSupport
import IMCore
import IMServer
import XCTest

@testable import IMSignatures

final class SignatureTests: XCTestCase {
    let signer = Signer(appID: "app", masterKey: "master-secret")

    private func signedOpen(
        _ clientID: String, timestamp: Int64? = nil, nonce: String = UUID().uuidString,
        signer: Signer? = nil
    ) -> Command {
        let t = timestamp ?? Int64(Date().timeIntervalSince1970)
        var open = Command(cmd: .session, op: .open)
        open.peerId = clientID
        open.t = t
        open.n = nonce
        open.s = (signer ?? self.signer).sign(.open, clientID: clientID, timestamp: t, nonce: nonce)
        return open
    }

    /// The app and master key `signer` signs with, which the servers of these tests check signatures against.
    private static func requireSignatures(_ configuration: inout ServerConfiguration) {
        configuration.appID = "app"
        configuration.masterKey = "master-secret"
    }

    /// `session open` resuming `clientID`'s session with its token `st` instead of a signature.
    private func resumeOpen(_ clientID: String, token: String) -> Command {
        var open = Command(cmd: .session, op: .open)
        open.peerId = clientID
        open.st = token
        return open
    }

    func testLoginNeedsAFreshUnusedSignatureOrASessionToken() async throws {
        let server = try await startServer(configure: Self.requireSignatures)
        let client = try await TestClient.connect(port: server.port)
        var unsigned = Command(cmd: .session, op: .open)
        unsigned.peerId = "Tom"
        let observed1 = try await client.request(unsigned).code
        XCTAssertEqual(observed1, 4102)
        let wrongKey = signedOpen("Tom", signer: Signer(appID: "app", masterKey: "guess"))
        let observed2 = try await client.request(wrongKey).code
        XCTAssertEqual(observed2, 4102)
        let stale = signedOpen("Tom", timestamp: Int64(Date().timeIntervalSince1970) - 3600)
        let observed3 = try await client.request(stale).code
        XCTAssertEqual(observed3, 4102)
        for extreme in [Int64.min, Int64.max, Int64.min + 1] {
            var overflow = signedOpen("Tom")
            overflow.t = extreme
            let refused = try await client.request(overflow)
            XCTAssertEqual(refused.code, 4102, "t = \(extreme) is refused, and the server stays up")
        }
        var otherClient = signedOpen("Tom")
        otherClient.peerId = "Jerry"
        let observed4 = try await client.request(otherClient).code
        XCTAssertEqual(observed4, 4102)

        let good = signedOpen("Tom", nonce: "nonce-1")
        let opened = try await client.request(good)
        XCTAssertEqual(opened.op, .opened)
        let token = try required(opened.st)

        let replay = try await TestClient.connect(port: server.port)
        let replayed = try await replay.request(good)
        XCTAssertEqual(replayed.code, 4102)
        XCTAssertEqual(replayed.detail, "nonce already used")

        var resume = resumeOpen("Tom", token: token)
        let observed5 = try await replay.request(resume).op
        XCTAssertEqual(observed5, .opened)
        let third = try await TestClient.connect(port: server.port)
        resume.st = "forged"
        let observed6 = try await third.request(resume).code
        XCTAssertEqual(observed6, 4112)
    }

    func testACapturedLoginCannotBeReplayedAfterARestart() async throws {
        let server = try await ServerHarness.start(configure: Self.requireSignatures)
        let captured = signedOpen("Tom")
        let client = try await TestClient.connect(port: server.port)
        let opened = try await client.request(captured)
        XCTAssertEqual(opened.op, .opened)
        await client.close()
        await server.stop()
        let restarted = try await startServer(directory: server.directory, configure: Self.requireSignatures)
        let attacker = try await TestClient.connect(port: restarted.port)
        let replayed = try await attacker.request(captured)
        XCTAssertEqual(replayed.code, 4102)
        XCTAssertEqual(replayed.detail, "nonce already used")
        let fresh = try await attacker.request(signedOpen("Tom"))
        XCTAssertEqual(fresh.op, .opened)
    }

    func testClosingASessionRevokesItsToken() async throws {
        let server = try await startServer(configure: Self.requireSignatures)
        let tom = try await TestClient.connect(port: server.port)
        let token = try required(try await tom.request(signedOpen("Tom")).st)
        let closed = try await tom.request(Command(cmd: .session, op: .close))
        XCTAssertEqual(closed.op, .closed)

        let thief = try await TestClient.connect(port: server.port)
        let refused = try await thief.request(resumeOpen("Tom", token: token))
        XCTAssertEqual(refused.code, 4112, "a closed session's token cannot be reused")
    }

    func testConversationActionsNeedSignatures() async throws {
        let server = try await startServer(configure: Self.requireSignatures)
        let tom = try await TestClient.connect(port: server.port)
        let observed7 = try await tom.request(signedOpen("Tom")).op
        XCTAssertEqual(observed7, .opened)

        var start = Command(cmd: .conv, op: .start)
        start.m = ["Jerry", "Bob"]
        let observed8 = try await tom.request(start).code
        XCTAssertEqual(observed8, 4302)
        let t = Int64(Date().timeIntervalSince1970)
        start.t = t
        start.n = "n-start"
        start.s = signer.sign(.startConversation(members: ["Bob", "Jerry"]), clientID: "Tom", timestamp: t, nonce: "n-start")
        let started = try await tom.request(start)
        XCTAssertEqual(started.op, .started)
        let cid = try required(started.cid)

        var kick = Command.conv(.remove, cid, members: ["Bob"])
        kick.t = t
        kick.n = "n-kick"
        kick.s = signer.sign(.invite(conversationId: cid, members: ["Bob"]), clientID: "Tom", timestamp: t, nonce: "n-kick")
        let observed9 = try await tom.request(kick).code
        XCTAssertEqual(observed9, 4302, "signed for another action")
        kick.n = "n-kick-2"
        kick.s = signer.sign(.kick(conversationId: cid, members: ["Bob"]), clientID: "Tom", timestamp: t, nonce: "n-kick-2")
        let observed10 = try await tom.request(kick).op
        XCTAssertEqual(observed10, .removed)
    }

    /// Signed texts are fields joined by ':'. A conversation start by `eve` with member `x:` signs the text
    /// of a login as `eve:x`, and a login's text is a start's with no members: client ids with ':' are
    /// refused, a signed start must list its members, nonces are shared by all actions, and LeanCloud's
    /// texts (the creator among the signed members) still verify.
    func testSignedTextsOfDifferentActionsCannotBeConfused() async throws {
        let server = try await startServer(configure: Self.requireSignatures)
        let t = Int64(Date().timeIntervalSince1970)
        func signed(_ command: Command, _ action: IMSignatureAction, by clientID: String, nonce: String) -> Command {
            var command = command
            command.t = t
            command.n = nonce
            command.s = signer.sign(action, clientID: clientID, timestamp: t, nonce: nonce)
            return command
        }

        // A start signature of eve with member "x:" presented as a login of "eve:x".
        let eveX = try await TestClient.connect(port: server.port)
        var open = Command(cmd: .session, op: .open)
        open.peerId = "eve:x"
        let forged = try await eveX.request(signed(open, .startConversation(members: ["x:"]), by: "eve", nonce: "n-confused"))
        XCTAssertEqual(forged.code, 4103)
        XCTAssertEqual(forged.detail, "client id contains ':', which separates the fields of signed texts")
        let plain = try await eveX.request(signedOpen("eve:x"))
        XCTAssertEqual(plain.code, 4103, "no client id with ':' logs in, signed or not")

        let eve = try await TestClient.connect(port: server.port)
        let opened = try await eve.request(signedOpen("eve"))
        XCTAssertEqual(opened.op, .opened)
        var start = Command(cmd: .conv, op: .start)
        start.m = ["x:"]
        let refusedMember = try await eve.request(signed(start, .startConversation(members: ["x:"]), by: "eve", nonce: "n-member"))
        XCTAssertEqual(refusedMember.code, 4903)

        // An unused login signature of eve presented as a start with no members (m empty or absent).
        for members in [[], nil] as [[String]?] {
            start.m = members
            let nonce = "n-login-\(members == nil)"
            let asStart = try await eve.request(signed(start, .open, by: "eve", nonce: nonce))
            XCTAssertEqual(asStart.code, 4302)
            XCTAssertTrue(asStart.detail?.contains("the creator included") == true, "\(asStart)")
        }
        // Nonces that would shift the fields.
        start.m = ["Jerry", "eve"]
        for nonce in ["a:b", "join", "kick"] {
            let shifted = try await eve.request(signed(start, .startConversation(members: ["Jerry", "eve"]), by: "eve", nonce: nonce))
            XCTAssertEqual(shifted.code, 4302, nonce)
        }

        // LeanCloud's own texts: the SDKs sign the sorted members with the creator among them.
        let sdkStart = try await eve.request(signed(start, .startConversation(members: ["Jerry", "eve"]), by: "eve", nonce: "n-sdk"))
        XCTAssertEqual(sdkStart.op, .started)
        XCTAssertEqual(
            IMSignatureAction.startConversation(members: ["eve", "Jerry"]).text(
                appID: "app", clientID: "eve", timestamp: t, nonce: "n-sdk"),
            "app:eve:Jerry:eve:\(t):n-sdk")
        XCTAssertEqual(IMSignatureAction.open.text(appID: "app", clientID: "eve", timestamp: t, nonce: "n"), "app:eve::\(t):n")
        // A nonce spent by one action is spent for all: the start's nonce cannot sign a login.
        let reused = try await TestClient.connect(port: server.port).request(signedOpen("eve", timestamp: t, nonce: "n-sdk"))
        XCTAssertEqual(reused.code, 4102)
        XCTAssertEqual(reused.detail, "nonce already used")
    }

    func testSessionTokensSurviveARestart() async throws {
        let first = try await ServerHarness.start(configure: Self.requireSignatures)
        let client = try await TestClient.connect(port: first.port)
        let token = try required(try await client.request(signedOpen("Tom")).st)
        await client.close()
        await first.stop()

        let second = try await startServer(directory: first.directory, configure: Self.requireSignatures)
        let again = try await TestClient.connect(port: second.port)
        let reply = try await again.request(resumeOpen("Tom", token: token))
        XCTAssertEqual(reply.op, .opened, "a token issued before the restart is still valid")
        let other = try await TestClient.connect(port: second.port)
        let observed1 = try await other.request(resumeOpen("Jerry", token: token)).code
        XCTAssertEqual(observed1, 4112, "a token only works for its own client id")
    }
}
