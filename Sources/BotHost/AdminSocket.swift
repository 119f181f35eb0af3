import Foundation
import HookRuntime
import Logging
import NIOCore
import NIOPosix

/// A Unix socket on which `hookbot reload` and `hookbot plugins` reach a running bot: one line in
/// (`reload`, `plugins` or `stats`), one JSON document out, the same documents the console's admin API gives
/// (`POST /api/plugins/reload`, `GET /api/plugins`, `GET /api/stats`; AdminViews.swift). Served and asked
/// with SwiftNIO on its shared event loops (no platform socket calls, so it builds wherever NIO does).
///
/// The socket needs no token: whoever may open the file (it is created in the bot's directory with the
/// process's umask) may ask. The HTTP admin API, which needs the console token, offers the same answers.
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
        try? FileManager.default.removeItem(atPath: path)
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

    /// The largest answer `request` accepts (a bot with hundreds of plugins answers well under 1 MiB).
    public static let maxAnswerBytes = 16 << 20

    /// Sends one request to a running bot and returns its answer.
    public static func request(_ line: String, path: String) async throws -> String {
        let channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>
        do {
            channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connect(unixDomainSocketPath: path) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                    }
                }
        } catch {
            throw ConfigurationError(message: "no bot is listening on \(path) (is `hookbot run` running in this directory?)")
        }
        return try await channel.executeThenClose { inbound, outbound in
            try await outbound.write(ByteBuffer(string: line + "\n"))
            var answer = ByteBuffer()
            for try await chunk in inbound {
                answer.writeImmutableBuffer(chunk)
                guard answer.readableBytes <= maxAnswerBytes else {
                    throw ConfigurationError(message: "the bot on \(path) answered more than \(maxAnswerBytes >> 20) MiB")
                }
            }
            return String(buffer: answer)
        }
    }

    private static func answer(_ request: String, bot: BotHost) async -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        func json(_ value: some Encodable) -> String {
            (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        }
        switch request.trimmingCharacters(in: .whitespacesAndNewlines) {
        case "reload":
            return json(await bot.reloadView())
        case "plugins":
            return json(await bot.pluginViews())
        case "stats":
            return json(await bot.statistics)
        default:
            return json(["error": "unknown request; use reload, plugins or stats"])
        }
    }
}
