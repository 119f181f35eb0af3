import Foundation
import HookbotTestSupport
import IMCore
import IMServer
import IMSignatures
import XCTest

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

    func testLoginNeedsAFreshUnusedSignatureOrASessionToken() async throws {
        let server = try await ServerHarness.start {
            $0.appID = "app"
            $0.masterKey = "master-secret"
        }
        defer { Task { await server.stop() } }
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

        var resume = Command(cmd: .session, op: .open)
        resume.peerId = "Tom"
        resume.st = token
        let observed5 = try await replay.request(resume).op
        XCTAssertEqual(observed5, .opened)
        let third = try await TestClient.connect(port: server.port)
        resume.st = "forged"
        let observed6 = try await third.request(resume).code
        XCTAssertEqual(observed6, 4112)
    }

    func testACapturedLoginCannotBeReplayedAfterARestart() async throws {
        let configure: (inout ServerConfiguration) -> Void = {
            $0.appID = "app"
            $0.masterKey = "master-secret"
        }
        let server = try await ServerHarness.start(configure: configure)
        let captured = signedOpen("Tom")
        let client = try await TestClient.connect(port: server.port)
        let opened = try await client.request(captured)
        XCTAssertEqual(opened.op, .opened)
        await client.close()
        await server.stop()
        let restarted = try await ServerHarness.start(directory: server.directory, configure: configure)
        defer { Task { await restarted.stop() } }
        let attacker = try await TestClient.connect(port: restarted.port)
        let replayed = try await attacker.request(captured)
        XCTAssertEqual(replayed.code, 4102)
        XCTAssertEqual(replayed.detail, "nonce already used")
        let fresh = try await attacker.request(signedOpen("Tom"))
        XCTAssertEqual(fresh.op, .opened)
    }

    func testClosingASessionRevokesItsToken() async throws {
        let server = try await ServerHarness.start {
            $0.appID = "app"
            $0.masterKey = "master-secret"
        }
        defer { Task { await server.stop() } }
        let tom = try await TestClient.connect(port: server.port)
        let token = try required(try await tom.request(signedOpen("Tom")).st)
        let closed = try await tom.request(Command(cmd: .session, op: .close))
        XCTAssertEqual(closed.op, .closed)

        let thief = try await TestClient.connect(port: server.port)
        var resume = Command(cmd: .session, op: .open)
        resume.peerId = "Tom"
        resume.st = token
        let refused = try await thief.request(resume)
        XCTAssertEqual(refused.code, 4112, "a closed session's token cannot be reused")
    }

    func testConversationActionsNeedSignatures() async throws {
        let server = try await ServerHarness.start {
            $0.appID = "app"
            $0.masterKey = "master-secret"
        }
        defer { Task { await server.stop() } }
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

        var kick = Command(cmd: .conv, op: .remove)
        kick.cid = cid
        kick.m = ["Bob"]
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

    func testSessionTokensSurviveARestart() async throws {
        let first = try await ServerHarness.start {
            $0.appID = "app"
            $0.masterKey = "master-secret"
        }
        let client = try await TestClient.connect(port: first.port)
        let token = try required(try await client.request(signedOpen("Tom")).st)
        await client.close()
        await first.stop()

        let second = try await ServerHarness.start(directory: first.directory) {
            $0.appID = "app"
            $0.masterKey = "master-secret"
        }
        defer { Task { await second.stop() } }
        let again = try await TestClient.connect(port: second.port)
        var resume = Command(cmd: .session, op: .open)
        resume.peerId = "Tom"
        resume.st = token
        let reply = try await again.request(resume)
        XCTAssertEqual(reply.op, .opened, "a token issued before the restart is still valid")
        var stolen = Command(cmd: .session, op: .open)
        stolen.peerId = "Jerry"
        stolen.st = token
        let other = try await TestClient.connect(port: second.port)
        let observed1 = try await other.request(stolen).code
        XCTAssertEqual(observed1, 4112, "a token only works for its own client id")
    }
}
