import ArgumentParser
import Foundation
import IMServer
import Logging

struct ServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "server", abstract: "Run the IM server.")

    @Option(help: "Address to bind.") var host = "127.0.0.1"
    @Option(help: "Port to listen on (0 picks a free port).") var port = 8080
    @Option(help: "SQLite database file.") var db = "hookbot.sqlite"
    @Option(help: "Largest message body in bytes.") var maxMessageBytes = 64 * 1024
    @Flag(help: "Use PRAGMA synchronous=NORMAL instead of FULL (faster; a power loss may lose the last commits).")
    var relaxedSync = false
    @Option(help: "Seconds after sending during which a sender may recall a message.") var recallWindow = 120
    @Option(help: "App id; with --master-key, logins and conversation actions need signatures.") var appId: String?
    @Option(help: "Master key for signatures (or set HOOKBOT_MASTER_KEY).") var masterKey: String?
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.") var logLevel = "info"

    func run() async throws {
        let logger = makeLogger(label: "hookbot.server", level: logLevel)
        var configuration = ServerConfiguration()
        configuration.host = host
        configuration.port = port
        configuration.databasePath = db
        configuration.maxMessageBytes = maxMessageBytes
        configuration.synchronousFull = !relaxedSync
        configuration.recallWindow = recallWindow
        configuration.appID = appId
        configuration.masterKey = masterKey ?? ProcessInfo.processInfo.environment["HOOKBOT_MASTER_KEY"]
        let server = try IMServer(configuration: configuration, logger: logger)
        try await server.run { port in
            logger.info("listening", metadata: ["url": "ws://\(host):\(port)/ws", "db": "\(db)"])
        }
    }
}

func makeLogger(label: String, level: String) -> Logger {
    var logger = Logger(label: label)
    logger.logLevel = Logger.Level(rawValue: level) ?? .info
    return logger
}
