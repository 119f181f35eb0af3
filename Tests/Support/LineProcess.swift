import Foundation
import Synchronization

/// A child process (`hookbot chat`, a server) fed lines on its standard input, with what it printed so far on
/// its standard output and error.
public final class LineProcess: Sendable {
    public let process: Process
    private let input = Pipe()
    private let output = Pipe()
    private let text = Mutex("")

    public init(binary: URL, arguments: [String], in directory: URL? = nil) throws {
        process = Process()
        process.executableURL = binary
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = directory }
        process.standardInput = input
        process.standardOutput = output
        process.standardError = output
        output.fileHandleForReading.readabilityHandler = { [self] handle in
            let data = handle.availableData
            text.withLock { $0 += String(decoding: data, as: UTF8.self) }
        }
        try process.run()
    }

    /// Everything printed so far.
    public var printed: String { text.withLock { $0 } }

    /// Writes `line` and a newline to the process's standard input.
    public func type(_ line: String) { input.fileHandleForWriting.write(Data((line + "\n").utf8)) }

    /// Waits until `text` has been printed `count` times; throws `Timeout` with the output so far when it has
    /// not within `timeout` or the process ended first.
    public func waitFor(_ text: String, count: Int = 1, timeout: Duration = .seconds(15)) async throws {
        try await waitUntil("\"\(text)\" in:\n\(printed)", timeout: timeout) {
            let seen = printed.components(separatedBy: text).count - 1 >= count
            guard seen || process.isRunning else { throw Timeout(waitingFor: "\"\(text)\"; the process ended after:\n\(printed)") }
            return seen
        }
    }

    /// Waits until the process has ended and returns its exit status; throws `Timeout` when it still runs after
    /// `timeout`.
    @discardableResult
    public func waitForExit(timeout: Duration = .seconds(10)) async throws -> Int32 {
        try await waitUntil("the process to exit; it printed:\n\(printed)", timeout: timeout) { !process.isRunning }
        return process.terminationStatus
    }

    /// Ends the process if it still runs.
    public func stop() {
        if process.isRunning { process.terminate() }
        output.fileHandleForReading.readabilityHandler = nil
    }
}
