import HookbotTestSupport
import IMCore
import XCTest

final class SessionTests: XCTestCase {
    func testOpenReturnsTokenAndRejectsInvalidClientIDs() async throws {
        let server = try await startServer()
        let client = try await TestClient.connect(port: server.port)

        for bad in ["", String(repeating: "x", count: 65), "tab\there"] {
            var open = Command(cmd: .session, op: .open)
            open.peerId = bad
            let reply = try await client.request(open)
            XCTAssertEqual(reply.op, .closed)
            XCTAssertEqual(reply.code, 4103, "client id \(bad.debugDescription)")
            XCTAssertEqual(reply.reason, "INVALID_LOGIN")
        }
        var open = Command(cmd: .session, op: .open)
        open.peerId = String(repeating: "y", count: 64)
        let reply = try await client.request(open)
        XCTAssertEqual(reply.op, .opened)
        XCTAssertNotNil(reply.st)
        XCTAssertEqual(reply.stTtl, 86400)
        await client.close()
    }

    func testConversationNamesAndAttributesAreCappedAtCreationAndUpdate() async throws {
        let server = try await startServer()
        let tom = try await server.login("Tom")
        let longName = String(repeating: "n", count: 1025)
        let bigAttr: JSONValue = ["blob": .string(String(repeating: "a", count: 70_000))]
        for (name, attr) in [(longName, nil), (nil, bigAttr)] as [(String?, JSONValue?)] {
            var start = Command(cmd: .conv, op: .start)
            start.m = ["Jerry"]
            start.name = name
            start.attr = attr
            let refused = try await tom.request(start)
            XCTAssertEqual(refused.code, 4903, refused.detail ?? "")
        }
        let cid = try await tom.startConversation(members: ["Jerry"], name: String(repeating: "n", count: 1024))
        var update = Command.conv(.update, cid)
        update.attr = ["name": .string(longName)]
        let refused = try await tom.request(update)
        XCTAssertEqual(refused.code, 4903)
        XCTAssertEqual(refused.detail, "name exceeds 1024 bytes")
    }

    func testOneDevicePerTagWhenForcedLoginsRace() async throws {
        let server = try await startServer()
        let clients = try await withThrowingTaskGroup(of: TestClient.self) { group in
            for k in 0..<40 {
                group.addTask { try await server.login("Tom", tag: "Mobile", deviceID: "device-\(k)") }
            }
            return try await group.reduce(into: [TestClient]()) { $0.append($1) }
        }
        var open = clients.filter { !$0.isClosed }
        for _ in 0..<100 where open.count > 1 {
            try await Task.sleep(for: .milliseconds(20))
            open = clients.filter { !$0.isClosed }
        }
        XCTAssertEqual(open.count, 1, "exactly one of 40 racing logins holds the tag")
        let survivor = try required(open.first)
        let echo = try await survivor.request(Command(cmd: .echo))
        XCTAssertEqual(echo.cmd, .echo)
    }

    func testCommandsBeforeLoginAreRefused() async throws {
        let server = try await startServer()
        let client = try await TestClient.connect(port: server.port)
        var logs = Command(cmd: .logs)
        logs.cid = "whatever"
        let reply = try await client.request(logs)
        XCTAssertEqual(reply.cmd, .error)
        XCTAssertEqual(reply.code, 4105)
        let echo = try await client.request(Command(cmd: .echo))
        XCTAssertEqual(echo.cmd, .echo)
        await client.close()
    }

    func testSameTagKicksOlderDeviceAndNonForcedReopenFails() async throws {
        let server = try await startServer()
        let phoneA = try await server.login("Tom", tag: "Mobile", deviceID: "device-A")
        let desktop = try await server.login("Tom", tag: "Desktop", deviceID: "device-D")
        let phoneB = try await server.login("Tom", tag: "Mobile", deviceID: "device-B")

        let kicked = try await phoneA.next { $0.cmd == .session && $0.op == .closed }
        XCTAssertEqual(kicked.code, 4111)
        XCTAssertEqual(kicked.reason, "SESSION_CONFLICT")
        try await waitUntil("the server to close the kicked connection") { phoneA.isClosed }
        let desktopEvents = await desktop.settle { $0.cmd == .session }
        XCTAssertTrue(desktopEvents.isEmpty, "another tag is not affected")

        // Device A reconnects on its own (non-forced): refused while device B holds the tag.
        do {
            _ = try await TestClient.login("Tom", port: server.port, tag: "Mobile", deviceID: "device-A", reopen: true)
            XCTFail("non-forced reopen of a kicked device must fail")
        } catch let error as IMError {
            XCTAssertEqual(error.code, 4111)
        }
        // Device B itself may resume without force.
        let phoneBAgain = try await TestClient.login("Tom", port: server.port, tag: "Mobile", deviceID: "device-B", reopen: true)
        let bKicked = try await phoneB.next { $0.cmd == .session && $0.op == .closed }
        XCTAssertEqual(bKicked.code, 4111)
        // A forced login of device A takes the tag back.
        let phoneAForced = try await server.login("Tom", tag: "Mobile", deviceID: "device-A")
        let bAgainKicked = try await phoneBAgain.next { $0.cmd == .session && $0.op == .closed }
        XCTAssertEqual(bAgainKicked.code, 4111)

        let reply = try await phoneAForced.request(Command(cmd: .session, op: .close))
        XCTAssertEqual(reply.op, .closed)
        XCTAssertNil(reply.code)
        await desktop.close()
    }

    func testClientsAreToldToGoAwayWhenTheServerStops() async throws {
        let server = try await ServerHarness.start()
        let tom = try await server.login("Tom")
        await server.stop()
        let goaway = try await tom.next { $0.cmd == .goaway }
        XCTAssertNil(goaway.i)
    }

    func testStartingOnAPortInUseFailsInsteadOfHanging() async throws {
        let first = try await startServer()
        do {
            let second = try await ServerHarness.start { $0.port = first.port }
            await second.stop()
            XCTFail("a second server cannot listen on the same port")
        } catch {
            XCTAssertFalse("\(error)".isEmpty)
        }
    }
}
