import ArgumentParser
import BotHost
import BotHub
import Console
import Foundation
import Logging
import Telemetry

struct RunSubcommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the bot: log in, route everything to the plugins, act as the server's interceptor.",
        discussion:
            "Without --server, starts an embedded IM server on 127.0.0.1 (port from the config, default 8080) with the bot as its interceptor."
    )

    @Option(help: "Server WebSocket URL, e.g. ws://127.0.0.1:8080/ws. Omit to start an embedded server.") var server: String?
    @Option(help: "Client id of the bot.") var clientId: String?
    @Option(help: "Plugins directory.") var plugins: String?
    @Option(help: "Configuration file (TOML).") var config = "hookbot.toml"
    @Option(help: "Port of the embedded server.") var port: Int?
    @Option(help: "Secret to sign the bot's login with, when it is a remote server's interceptor.") var interceptorSecret: String?
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.") var logLevel = "info"

    func run() async throws {
        let logs = LogBuffer()
        let logger = makeLogger(label: "hookbot", level: logLevel, alsoInto: logs)
        var configuration =
            FileManager.default.fileExists(atPath: config)
            ? try BotConfiguration.load(path: config) : BotConfiguration()
        if let clientId { configuration.clientID = clientId }
        if let plugins { configuration.plugins.directory = URL(fileURLWithPath: plugins) }
        if let port { configuration.server.port = port }
        if let interceptorSecret { configuration.interceptorSecret = interceptorSecret }

        let console = Console(configuration: configuration, logs: logs)
        let webhooks = Webhooks(configuration: configuration)
        let bot: BotHost
        let hub: EmbeddedHub?
        let consoleServer: ConsoleServer?
        let consoleURL: String?
        if let server {
            let telemetry = Telemetry()
            bot = try BotHost.make(configuration: configuration, serverURL: server, logger: logger, metrics: telemetry.factory)
            try await bot.start()
            hub = nil
            console.attach(.init(bot: bot, server: nil, lobbyID: nil))
            webhooks.attach(bot)
            let listener = try await ConsoleServer.start(
                console: configuration.console.enabled ? console : nil, webhooks: webhooks,
                readiness: { await console.botNotReadyReason() },
                telemetry: telemetry, host: configuration.console.host, port: configuration.console.port, logger: logger)
            consoleServer = listener
            consoleURL = configuration.console.enabled ? console.url(host: configuration.console.host, port: listener.port) : nil
            let pluginCount = await bot.runtime.plugins.count
            print("\(configuration.clientID) is connected to \(server) with \(pluginCount) plugin(s).")
            print("Metrics: http://\(configuration.console.host):\(listener.port)/metrics")
        } else {
            let embedded = try await EmbeddedHub.start(configuration: configuration, logger: logger) { server in
                if configuration.console.enabled { server.addRoutes { router in console.register(on: router) } }
                server.addRoutes { router in webhooks.register(on: router) }
                server.addReadinessCheck { await console.botNotReadyReason() }
            }
            bot = embedded.bot
            hub = embedded
            consoleServer = nil
            console.attach(.init(bot: bot, server: embedded.server, lobbyID: embedded.lobbyID))
            webhooks.attach(bot)
            let tls = configuration.server.tlsCertificate != nil
            let page = console.url(host: configuration.server.host, port: embedded.port)
            consoleURL = configuration.console.enabled ? (tls ? "https://" + page.dropFirst("http://".count) : page) : nil
            let pluginCount = await bot.runtime.plugins.count
            print(
                """
                Hookbot is running: \(embedded.server.webSocketScheme)://\(configuration.server.host):\(embedded.port)/ws, bot \(configuration.clientID) with \
                \(pluginCount) plugin(s) from \(configuration.plugins.directory.path).
                Talk to it in another terminal (the binary already built, so nothing is rebuilt):
                  \(Self.builtBinary) chat --as Tom --conversation \(configuration.server.lobbyName) --port \(embedded.port)
                Edit a file in \(configuration.plugins.directory.path)/ and it reloads by itself. Ctrl-C stops.
                """)
        }
        if let consoleURL { print("Console: \(consoleURL)") }
        fflush(nil)
        let admin: AdminSocket? =
            if let path = configuration.adminSocketPath { try await AdminSocket(path: path, bot: bot, logger: logger) } else { nil }
        await waitForTerminationSignal()
        logger.info("shutting down")
        await consoleServer?.stop()
        await admin?.close()
        if let hub { await hub.stop() } else { await bot.stop() }
    }
}

extension RunSubcommand {
    /// This binary, as a command to type in this directory: `.build/debug/hookbot` after `swift run` or
    /// `make run` (`swift run hookbot chat` would rebuild first whenever its environment differs).
    static var builtBinary: String {
        let path = (Bundle.main.executablePath.map { URL(fileURLWithPath: $0).resolvingSymlinksInPath().path }) ?? "hookbot"
        let here = URL(fileURLWithPath: FileManager.default.currentDirectoryPath).resolvingSymlinksInPath().path + "/"
        guard path.hasPrefix(here) else { return path.contains(" ") ? "'\(path)'" : path }
        for short in [".build/debug/hookbot", ".build/release/hookbot"]
        where URL(fileURLWithPath: here + short).resolvingSymlinksInPath().path == path {
            return short
        }
        let relative = String(path.dropFirst(here.count))
        return relative.contains(" ") ? "'./\(relative)'" : relative.hasPrefix(".") ? relative : "./" + relative
    }
}

/// Suspends until SIGINT or SIGTERM.
func waitForTerminationSignal() async {
    let (stream, continuation) = AsyncStream<Void>.makeStream()
    let sources = [SIGINT, SIGTERM].map { signalNumber -> any DispatchSourceSignal in
        signal(signalNumber, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .main)
        source.setEventHandler { continuation.yield() }
        source.resume()
        return source
    }
    for await _ in stream { break }
    for source in sources { source.cancel() }
}
