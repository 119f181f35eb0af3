import BotHost
import BotHub
import ChildProcesses
import Foundation
import IMCore
import IMServer
import Logging

/// A server with the benchmark bot as its interceptor: embedded in this process (the bot attached in
/// process), or with the bot as a separate `hookbot run` process talking WebSocket (`--remote-bot`).
struct BenchHub {
    let server: IMServer
    let port: Int
    let botID: String
    /// The bot's process when it runs separately.
    let botProcess: ChildProcess?
    private let stopAll: @Sendable () async -> Void

    func stop() async { await stopAll() }

    /// Runs `body`, then stops what this hub started, also when `body` throws: a `--remote-bot` child process
    /// must not outlive a failed run.
    func whileRunning<T>(_ body: () async throws -> T) async throws -> T {
        do {
            let result = try await body()
            await stop()
            return result
        } catch {
            await stop()
            throw error
        }
    }

    /// CPU seconds used so far by the bot's process (nil for an in-process bot).
    var botCPUSeconds: Double? { botProcess.map { ProcessCPU.seconds(pid: $0.processIdentifier) } }

    static func embedded(_ hub: EmbeddedHub) -> BenchHub {
        BenchHub(
            server: hub.server, port: hub.port, botID: hub.bot.configuration.clientID, botProcess: nil,
            stopAll: { await hub.stop() })
    }

    /// Starts a server with one interceptor and a `hookbot run --server` child process for it, and waits
    /// until the bot has logged in.
    static func remote(
        configuration: BotConfiguration, directory: URL, serverConfiguration: ServerConfiguration,
        logger: Logger
    ) async throws -> BenchHub {
        let secret = UUID().uuidString
        var serverConfiguration = serverConfiguration
        serverConfiguration.interception.interceptors = [.init(clientID: configuration.clientID, secret: secret)]
        serverConfiguration.interception.deadlineMillis = configuration.server.interceptionDeadlineMillis
        let server = try IMServer(configuration: serverConfiguration, logger: logger)
        let port = try await server.start()
        let toml = directory.appendingPathComponent("bot.toml")
        try """
        [bot]
        client_id = "\(configuration.clientID)"
        state = "bot-state.sqlite"
        reply_limit = \(Int32.max)
        global_reply_limit = \(Int32.max)
        sends_per_event = \(Int32.max)
        admin_socket = "\(directory.appendingPathComponent("admin.sock").path)"

        [plugins]
        directory = "\(configuration.plugins.directory.path)"
        watch_interval_seconds = 0

        [server]
        interception_deadline_ms = \(configuration.server.interceptionDeadlineMillis)
        \(try pluginTables(configuration.plugins.config))
        """.write(to: toml, atomically: true, encoding: .utf8)
        let process = try ChildProcess(
            URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath(),
            [
                "run", "--server", "ws://127.0.0.1:\(port)/ws", "--interceptor-secret", secret,
                "--config", toml.path, "--log-level", "error",
            ],
            in: directory, output: .discarded, error: .inherited)
        for _ in 0..<300 where !server.isInterceptorAttached(configuration.clientID) {
            try await Task.sleep(for: .milliseconds(50))
        }
        guard server.isInterceptorAttached(configuration.clientID) else {
            process.signal()
            await server.stop()
            throw BenchError(message: "the remote bot did not log in")
        }
        return BenchHub(
            server: server, port: port, botID: configuration.clientID, botProcess: process,
            stopAll: {
                process.signal()
                _ = try? await process.waitForExit(timeout: .seconds(30))
                await server.stop()
            })
    }
}

/// The `[plugins.<name>]` tables of an in-process configuration, for the remote bot's hookbot.toml (so w2's
/// `--remote-bot` pass runs the shipped moderation with the same settings, flood off, as the in-process one).
/// Scalars and arrays of scalars only: their JSON text is also TOML.
private func pluginTables(_ config: [String: JSONValue]) throws -> String {
    try config.keys.sorted().map { name in
        let entries = config[name]?.objectValue ?? [:]
        let lines = try entries.keys.sorted().map { key in
            let value = entries[key] ?? .null
            let scalar = { (item: JSONValue) in item.objectValue == nil && item.arrayValue == nil && item != .null }
            guard scalar(value) || (value.arrayValue?.allSatisfy(scalar) ?? false) else {
                throw BenchError(message: "plugins.\(name).\(key): only scalars and arrays of scalars reach a remote bot")
            }
            return "\(key) = \(value.jsonString())"
        }
        return (["[plugins.\(name)]"] + lines).joined(separator: "\n")
    }.joined(separator: "\n\n")
}

struct BenchError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// CPU time of processes, from the kernel's accounting.
enum ProcessCPU {
    /// User + system CPU seconds of this process so far.
    static func current() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
            + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    /// User + system CPU seconds of another process (from /proc/<pid>/stat).
    static func seconds(pid: Int32) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the command name: state is field 3, utime and stime are fields 14 and 15.
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}
