import BotHost
import Foundation
import HookRuntime
import HookbotTestSupport
import IMClient
import IMServer
import Logging

/// A server with a bot host attached as its interceptor (or as a plain member), plugins in a temp folder.
struct BotHarness {
    let server: ServerHarness
    let plugins: URL
    /// How the bots attach: in process, or over a loopback WebSocket.
    let attachment: BotAttachment
    /// The server's interception deadline (the bots are configured with the same).
    let deadline: Int

    static let secret = "test-interceptor-secret"

    static func start(
        policy: InterceptionFailurePolicy = .failOpen, interceptors: [String] = ["modbot"],
        deadline: Int = 1000, attachment: BotAttachment, logger: Logger? = nil,
        configure: (inout ServerConfiguration) -> Void = { _ in }
    ) async throws -> BotHarness {
        let server = try await ServerHarness.start(logger: logger) { configuration in
            configuration.interception.interceptors = interceptors.map { .init(clientID: $0, secret: secret) }
            configuration.interception.failurePolicy = policy
            configuration.interception.deadlineMillis = deadline
            configure(&configuration)
        }
        let plugins = server.directory.appendingPathComponent("plugins-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: plugins, withIntermediateDirectories: true)
        return BotHarness(server: server, plugins: plugins, attachment: attachment, deadline: deadline)
    }

    func write(_ name: String, _ source: String) throws {
        try source.write(to: plugins.appendingPathComponent(name), atomically: true, encoding: .utf8)
    }

    /// The shipped moderation plugin with what it needs from `plugins/`: `lib/` (the mod-log module) and
    /// the matcher's `presets/` (its default rules use them).
    func writeShippedModeration() throws {
        let shipped = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("plugins")
        try write("moderation.lua", String(contentsOf: shipped.appendingPathComponent("moderation.lua"), encoding: .utf8))
        for folder in ["lib", "presets"] {
            try FileManager.default.copyItem(at: shipped.appendingPathComponent(folder), to: plugins.appendingPathComponent(folder))
        }
    }

    /// A started bot host; `interceptor` makes it sign in as a configured interceptor.
    func bot(
        _ clientID: String = "modbot", interceptor: Bool = true, plugins directory: URL? = nil,
        configure: (inout BotConfiguration) -> Void = { _ in }
    ) async throws -> BotHost {
        var configuration = BotConfiguration()
        configuration.clientID = clientID
        configuration.plugins.directory = directory ?? plugins
        configuration.statePath = server.directory.appendingPathComponent("state-\(clientID).sqlite").path
        configuration.interceptorSecret = interceptor ? Self.secret : nil
        configuration.adminSocketPath = nil
        configuration.plugins.watchInterval = 0.1
        configuration.server.interceptionDeadlineMillis = deadline
        configure(&configuration)
        var logger = Logger(label: "bot-test-\(clientID)")
        logger.logLevel = ProcessInfo.processInfo.environment["TEST_LOG"].flatMap { Logger.Level(rawValue: $0) } ?? .critical
        let bot =
            switch attachment {
            case .inProcess: try BotHost.make(configuration: configuration, local: server.server, logger: logger)
            case .webSocket:
                try BotHost.make(configuration: configuration, serverURL: "ws://127.0.0.1:\(server.port)/ws", logger: logger)
            }
        try await bot.start()
        if interceptor { try await waitUntilInterceptorAttached(server.server, clientID) }
        return bot
    }
}

extension BotHarness {
    /// Runs `body` with this harness and stops its server afterwards, also when `body` throws (Swift Testing's
    /// awaited teardown): `try await BotHarness.start(attachment: attachment).whileRunning { harness in … }`.
    func whileRunning<T>(_ body: (BotHarness) async throws -> T) async throws -> T {
        try await server.whileRunning { _ in try await body(self) }
    }
}

extension BotHost {
    /// Runs `body` with this bot and stops it afterwards, also when `body` throws.
    nonisolated func whileRunning<T>(_ body: (BotHost) async throws -> T) async throws -> T {
        try await finally({ try await body(self) }, then: { await stop() })
    }
}
