import Foundation
import HookbotTestSupport
import XCTest

/// The tests' child processes (`ChildProcess`, Tests/Support), with real programs: what they print, read, where they
/// run, how they end, and what they do not inherit.
final class ChildProcessTests: XCTestCase {
    let shell = URL(fileURLWithPath: "/bin/sh")

    func testOutputInputDirectoryAndEnvironment() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("child-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let script = #"echo "猫和老鼠 🐭 $GREETING"; echo "on stderr" >&2; pwd; read line; echo "got: $line"; exit 3"#
        let child = try ChildProcess(shell, ["-c", script], in: directory, environment: ["GREETING": "你好"], input: true)
        child.write("汤姆 👋\n")
        let termination = try await child.waitForExit()
        XCTAssertEqual(termination, .exited(3))
        XCTAssertEqual(termination.status, 3)
        let resolved = directory.resolvingSymlinksInPath().path
        XCTAssertEqual(child.printed, "猫和老鼠 🐭 你好\non stderr\n\(resolved)\ngot: 汤姆 👋\n")
        XCTAssertFalse(child.isRunning)
    }

    func testStreamsCanBeDiscardedOneByOne() throws {
        let script = "echo out; echo err >&2"
        XCTAssertEqual(try ChildProcess(shell, ["-c", script], error: .discarded).waitUntilExit(), .exited(0))
        let onlyErrors = try ChildProcess(shell, ["-c", script], output: .discarded)
        onlyErrors.waitUntilExit()
        XCTAssertEqual(onlyErrors.printed, "err\n")
        let onlyOutput = try ChildProcess(shell, ["-c", script], error: .discarded)
        onlyOutput.waitUntilExit()
        XCTAssertEqual(onlyOutput.printed, "out\n")
        XCTAssertEqual(try runProcess(shell, ["-c", script]).output, "out\nerr\n")
    }

    /// An inherited stream is this process's own descriptor (`hookbot bench`'s servers log to its terminal), the
    /// others still captured or discarded.
    func testAStreamCanBeInherited() throws {
        let ours = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/2")
        let child = try ChildProcess(shell, ["-c", "readlink /proc/$$/fd/2"], error: .inherited)
        XCTAssertEqual(child.waitUntilExit(), .exited(0))
        XCTAssertEqual(child.printed, "\(ours)\n")
        // (The link is read in a subshell: dash redirects a command's streams in the shell itself while it runs.)
        let script = "link=$(readlink /proc/$$/fd/1); echo \"$link\" >&2"
        let quiet = try ChildProcess(shell, ["-c", script], output: .discarded, error: .captured)
        quiet.waitUntilExit()
        XCTAssertEqual(quiet.printed, "/dev/null\n")
    }

    /// SIGTERM, then SIGKILL for a child that ignores it; the signal is reported, the shell's way too.
    func testSignalsEndItAndAreReported() async throws {
        let stubborn = try ChildProcess(shell, ["-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"])
        try await waitUntil("the child to start") { stubborn.printed == "ready\n" }
        stubborn.signal()
        try await Task.sleep(for: .milliseconds(200))
        XCTAssertTrue(stubborn.isRunning, "it ignores SIGTERM")
        stubborn.signal(SIGKILL)
        let termination = try await stubborn.waitForExit()
        XCTAssertEqual(termination, .signalled(SIGKILL))
        XCTAssertEqual(termination.status, 128 + SIGKILL)
        XCTAssertEqual(try runProcess(shell, ["-c", "kill -TERM $$"]).status, 128 + SIGTERM)
    }

    /// A child still running when its `ChildProcess` is freed is killed: none outlives its test.
    func testAChildDoesNotOutliveItsHandle() async throws {
        var child: ChildProcess? = try ChildProcess(URL(fileURLWithPath: "/bin/sleep"), ["30"])
        let pid = try XCTUnwrap(child?.processIdentifier)
        child = nil
        try await waitUntil("sleep \(pid) to be killed") { kill(pid, 0) != 0 }
    }

    /// Only 0, 1 and 2 reach the child: not this process's other descriptors, even one left inheritable.
    func testTheChildInheritsNoOtherDescriptors() throws {
        let inheritable = open("/dev/null", O_RDONLY)
        XCTAssertGreaterThan(inheritable, 2)
        defer { close(inheritable) }
        XCTAssertEqual(fcntl(inheritable, F_GETFD) & FD_CLOEXEC, 0)
        let (status, listed) = try runProcess(URL(fileURLWithPath: "/bin/ls"), ["/proc/self/fd"])
        XCTAssertEqual(status, 0, listed)
        // 0-2, and the directory ls reads.
        XCTAssertEqual(listed.split(separator: "\n").count, 4, listed)
    }

    func testAMissingExecutableThrows() {
        XCTAssertThrowsError(try ChildProcess(URL(fileURLWithPath: "/nonexistent/tool")))
    }
}
