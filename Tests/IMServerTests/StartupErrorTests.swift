import Foundation
import HookbotTestSupport
import IMServer
import XCTest

/// Settings the server cannot start with end in a clear error (and `hookbot server` in exit status 1 with
/// the message), never in a trap.
final class StartupErrorTests: XCTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-startup-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(at: directory)
    }

    func testARepeatedInterceptorIsRefusedAtStartup() throws {
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.databasePath = directory.appendingPathComponent("hookbot.sqlite").path
        configuration.interception.interceptors = [
            .init(clientID: "guard", secret: "first"), .init(clientID: "other", secret: "x"),
            .init(clientID: "guard", secret: "second"),
        ]
        XCTAssertThrowsError(try IMServer(configuration: configuration)) { error in
            XCTAssertEqual(
                "\(error)", "interceptor guard is listed more than once; give each interceptor client id once")
        }
    }

    /// The command line: `Fatal error: Duplicate values for key` before; now exit status 1 and the reason.
    func testHookbotServerExitsWithTheReason() throws {
        let database = directory.appendingPathComponent("cli.sqlite").path
        let repeated = try runHookbot(
            "server", "--port", "0", "--db", database, "--interceptor", "guard=one", "--interceptor", "guard=env:HOME")
        XCTAssertEqual(repeated.status, 1, repeated.output)
        XCTAssertTrue(
            repeated.output.contains("Error: interceptor guard is listed more than once"), repeated.output)
        let missing = directory.appendingPathComponent("missing.pem").path
        let tls = try runHookbot("server", "--port", "0", "--db", database, "--tls-cert", missing, "--tls-key", missing)
        XCTAssertEqual(tls.status, 1, tls.output)
        XCTAssertTrue(tls.output.contains("Error: TLS certificate \(missing): no such file"), tls.output)
        let half = try runHookbot("server", "--port", "0", "--db", database, "--tls-cert", missing)
        XCTAssertEqual(half.status, 64, half.output)
        XCTAssertTrue(half.output.contains("--tls-cert and --tls-key go together"), half.output)
    }

    /// Runs the `hookbot` built beside this test bundle in the test's directory; its exit status (a signal
    /// shows as 128 + n) and its output.
    private func runHookbot(_ arguments: String...) throws -> (status: Int32, output: String) {
        try runProcess(try builtHookbot(), arguments, in: directory)
    }
}
