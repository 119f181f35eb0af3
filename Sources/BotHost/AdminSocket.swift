import Foundation
import HookRuntime
import Logging
import NIOCore
import NIOPosix

#if canImport(Glibc)
    import Glibc
#endif

/// A Unix socket on which `hookbot reload` and `hookbot plugins` reach a running bot: one line in
/// (`reload`, `plugins` or `stats`), one JSON document out. Served by SwiftNIO on its shared event loops.
public final class AdminSocket: Sendable {
    private let path: String
    private let server: Task<Void, Never>

    /// Binds the socket (replacing a stale one) and serves requests until the socket is deinitialized.
    public init(path: String, bot: BotHost, logger: Logger) async throws {
        self.path = path
        let listener: NIOAsyncChannel<NIOAsyncChannel<ByteBuffer, ByteBuffer>, Never>
        do {
            listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .bind(unixDomainSocketPath: path, cleanupExistingSocketFile: true) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                    }
                }
        } catch {
            throw ConfigurationError(message: "cannot listen on \(path): \(error)")
        }
        server = Task {
            await withDiscardingTaskGroup { group in
                do {
                    try await listener.executeThenClose { connections in
                        for try await connection in connections {
                            group.addTask { await Self.serve(connection, bot: bot, logger: logger) }
                        }
                    }
                } catch {
                    logger.debug("admin socket closed", metadata: ["error": "\(error)"])
                }
            }
        }
    }

    /// Stops serving and removes the socket file.
    public func close() async {
        server.cancel()
        await server.value
        unlink(path)
    }

    deinit {
        server.cancel()
    }

    /// Reads one request line (at most 1 KiB) and writes the answer.
    private static func serve(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>, bot: BotHost, logger: Logger) async {
        do {
            try await connection.executeThenClose { inbound, outbound in
                var line = ByteBuffer()
                for try await chunk in inbound {
                    line.writeImmutableBuffer(chunk)
                    if line.readableBytesView.contains(10) || line.readableBytes >= 1024 { break }
                }
                let request = String(buffer: line).split(separator: "\n", maxSplits: 1).first.map(String.init) ?? ""
                try await outbound.write(ByteBuffer(string: await answer(request, bot: bot) + "\n"))
            }
        } catch {
            logger.debug("admin request failed", metadata: ["error": "\(error)"])
        }
    }

    /// Sends one request to a running bot and returns its answer.
    public static func request(_ line: String, path: String) throws -> String {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ConfigurationError(message: "cannot create a socket") }
        defer { Glibc.close(fd) }
        var address = address(path)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            throw ConfigurationError(message: "no bot is listening on \(path) (is `hookbot run` running in this directory?)")
        }
        writeAll(fd, line + "\n")
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count <= 0 { break }
            data.append(contentsOf: buffer[0..<count])
        }
        return String(decoding: data, as: UTF8.self)
    }

    private static func answer(_ request: String, bot: BotHost) async -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        func json(_ value: some Encodable) -> String {
            (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        }
        switch request.trimmingCharacters(in: .whitespacesAndNewlines) {
        case "reload":
            let report = await bot.reload()
            return json(AdminReport(report))
        case "plugins":
            return json(await bot.runtime.plugins.map(AdminPlugin.init))
        case "stats":
            return json(await bot.statistics)
        default:
            return json(["error": "unknown request; use reload, plugins or stats"])
        }
    }

    private static func address(_ path: String) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8.prefix(MemoryLayout.size(ofValue: address.sun_path) - 1))
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        return address
    }

    private static func writeAll(_ fd: Int32, _ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if written <= 0 { return }
            bytes = bytes.dropFirst(written)
        }
    }
}

struct AdminReport: Encodable {
    var loaded: [String]
    var reloaded: [String]
    var unloaded: [String]
    var errors: [String]

    init(_ report: ReloadReport) {
        loaded = report.loaded
        reloaded = report.reloaded
        unloaded = report.unloaded
        errors = report.errors.map(\.description)
    }
}

struct AdminPlugin: Encodable {
    var name: String
    var state: String
    var priority: Int
    var hooks: [String]
    var timers: Int
    var consecutiveFailures: Int
    var totalFailures: Int
    var lastError: String?

    init(_ status: PluginStatus) {
        name = status.name
        state = "\(status.state)"
        priority = status.priority
        hooks = status.hooks
        timers = status.timers
        consecutiveFailures = status.consecutiveFailures
        totalFailures = status.totalFailures
        lastError = status.lastError?.description
    }
}
