import BotHost
import Foundation
import IMClient
import IMCore
import IMServer
import Logging

/// `hookbot run` without `--server`: an IM server in the same process with the bot as its interceptor,
/// and a conversation (the lobby) to try the bot in. The bot attaches in process by default (commands
/// as values, interception as direct calls); `ServerSettings.attachment` can make it use a loopback
/// WebSocket instead, as a bot on another machine would.
public final class EmbeddedHub: Sendable {
    public let server: IMServer
    public let bot: BotHost
    public let port: Int
    public let lobbyID: String

    private init(server: IMServer, bot: BotHost, port: Int, lobbyID: String) {
        self.server = server
        self.bot = bot
        self.port = port
        self.lobbyID = lobbyID
    }

    /// Starts the server (a fresh interceptor secret each time), then the bot, then finds or creates the lobby.
    /// The server and the bot record their metrics into the server's `telemetry`; `prepare` runs before the
    /// server starts listening (to add HTTP routes, for example).
    public static func start(
        configuration: BotConfiguration, logger: Logger = Logger(label: "hookbot"),
        prepare: (IMServer) -> Void = { _ in }
    ) async throws -> EmbeddedHub {
        var bot = configuration
        bot.interceptorSecret = configuration.interceptorSecret ?? Self.randomSecret()
        var server = ServerConfiguration()
        server.host = configuration.server.host
        server.port = configuration.server.port
        server.databasePath = configuration.server.database
        server.databaseURL = configuration.server.databaseURL
        server.media.directory = configuration.server.mediaDirectory
        server.media.maxUploadBytes = Int64(configuration.server.maxUploadMB) << 20
        server.media.apply(configuration.server.media)
        server.push.apply(configuration.push)
        server.synchronousFull = configuration.server.synchronousFull
        server.appID = configuration.appID
        server.masterKey = configuration.masterKey
        server.appKey = configuration.appKey
        server.interception.interceptors = [.init(clientID: bot.clientID, secret: bot.interceptorSecret ?? "")]
        server.interception.deadlineMillis = configuration.server.interceptionDeadlineMillis
        server.interception.failurePolicy = configuration.server.failClosed ? .failClosed : .failOpen
        if let certificate = configuration.server.tlsCertificate, let key = configuration.server.tlsKey {
            guard configuration.server.attachment == .inProcess else {
                throw ConfigurationError(message: "server.bot_attachment = \"websocket\" cannot be used with server.tls_cert")
            }
            server.tls = TLSSettings(certificatePath: certificate, privateKeyPath: key)
        }
        let imServer = try IMServer(configuration: server, logger: logger)
        prepare(imServer)
        let port = try await imServer.start()
        do {
            let metrics = imServer.telemetry.factory
            let host =
                switch configuration.server.attachment {
                case .inProcess:
                    try BotHost.make(configuration: bot, local: imServer, logger: logger, metrics: metrics)
                        .lookingAtFiles(in: imServer.media)
                case .webSocket:
                    try BotHost.make(configuration: bot, serverURL: "ws://127.0.0.1:\(port)/ws", logger: logger, metrics: metrics)
                }
            try await host.start()
            let lobby = try await lobby(named: configuration.server.lobbyName, client: host.client)
            await host.refreshReach()
            return EmbeddedHub(server: imServer, bot: host, port: port, lobbyID: lobby)
        } catch {
            await imServer.stop()
            throw error
        }
    }

    public func stop() async {
        await bot.stop()
        await server.stop()
    }

    /// The conversation of that name the bot created earlier, or a new one.
    static func lobby(named name: String, client: IMClient) async throws -> String {
        let query = IMConversationQuery()
            .whereKey("name", equalTo: .string(name))
            .whereKey("c", equalTo: .string(client.clientId))
        // Public, so that anybody can find it by name (queries show others only their own conversations).
        if let existing = try await client.conversations(matching: query).first {
            if existing.attributes?["public"] != .bool(true) { _ = try await existing.update(patch: ["attr.public": .bool(true)]) }
            return existing.id
        }
        return try await client.createConversation(name: name, members: [], attributes: ["public": .bool(true)]).id
    }

    private static func randomSecret() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<4).map { _ in String(generator.next(), radix: 36) }.joined()
    }
}

extension BotHost {
    /// This bot with its plugins' looks at stored files going straight to the server's media store (the
    /// bot attached in process; a bot over a WebSocket asks the server's HTTP API instead).
    public nonisolated func lookingAtFiles(in store: (any MediaStore)?) -> BotHost {
        runtime.setMedia(store.map { EmbeddedMedia(store: $0) })
        return self
    }
}
