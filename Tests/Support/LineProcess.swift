import Foundation

/// A child process (`hookbot chat`, a server) fed lines on its standard input, with what it printed so far on
/// its standard output and error.
public final class LineProcess: Sendable {
    public let process: ChildProcess

    public init(binary: URL, arguments: [String], in directory: URL? = nil) throws {
        process = try ChildProcess(binary, arguments, in: directory, input: true)
    }

    /// Everything printed so far.
    public var printed: String { process.printed }

    /// Writes `line` and a newline to the process's standard input.
    public func type(_ line: String) { process.write(line + "\n") }

    /// Waits until `text` has been printed `count` times; throws `Timeout` with the output so far when it has
    /// not within `timeout` or the process ended first.
    public func waitFor(_ text: String, count: Int = 1, timeout: Duration = .seconds(15)) async throws {
        try await waitUntil("\"\(text)\" in:\n\(printed)", timeout: timeout) {
            let seen = printed.components(separatedBy: text).count - 1 >= count
            guard seen || process.isRunning else { throw Timeout(waitingFor: "\"\(text)\"; the process ended after:\n\(printed)") }
            return seen
        }
    }

    /// Waits until the process has ended and returns its exit status (128 + n for signal n); throws `Timeout` when
    /// it still runs after `timeout`.
    @discardableResult
    public func waitForExit(timeout: Duration = .seconds(10)) async throws -> Int32 {
        try await process.waitForExit(timeout: timeout).status
    }

    /// Ends the process (SIGTERM) if it still runs.
    public func stop() { process.signal() }
}
