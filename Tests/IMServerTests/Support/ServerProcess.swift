import Foundation
import HookbotTestSupport

/// The `hookbot server` executable running as a child process.
final class ServerProcess: Sendable {
    let process: ChildProcess
    let port: Int

    private init(process: ChildProcess, port: Int) {
        self.process = process
        self.port = port
    }

    /// The `hookbot` executable built next to the test binary (`.build/<triple>/<config>/hookbot`).
    static func binaryURL() -> URL? { builtProduct("hookbot") }

    static func freePort() -> Int { Int.random(in: 20000..<60000) }

    static func launch(binary: URL, db: String) async throws -> ServerProcess {
        try await launch(binary: binary, store: ["--db", db])
    }

    /// Starts `hookbot server` with these store options (`--db FILE` or `--database URL`).
    static func launch(binary: URL, store: [String]) async throws -> ServerProcess {
        var lastError: (any Error)?
        for _ in 0..<5 {
            let port = freePort()
            let process = try ChildProcess(
                binary, ["server", "--port", "\(port)", "--log-level", "warning"] + store, output: .discarded, error: .discarded)
            for _ in 0..<200 {
                if !process.isRunning { break }
                if let client = try? await TestClient.connect(port: port) {
                    await client.close()
                    return ServerProcess(process: process, port: port)
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            process.signal()
            lastError = Timeout(waitingFor: "hookbot server on port \(port)")
        }
        throw lastError ?? Timeout(waitingFor: "hookbot server")
    }

    /// Kills the server (SIGKILL) and waits until it has exited.
    func kill() {
        process.signal(SIGKILL)
        process.waitUntilExit()
    }
}
