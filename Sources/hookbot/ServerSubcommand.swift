import ArgumentParser
import BotHost
import BotHub
import Foundation
import IMServer
import Logging

struct ServerSubcommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "server", abstract: "Run the IM server.",
        discussion: "Every server given the same PostgreSQL database (--database) serves clients together (see docs/DEPLOY.md).")

    @Option(help: "Address to bind.") var host = "127.0.0.1"
    @Option(help: "Port to listen on (0 picks a free port).") var port = 8080
    @Option(help: "SQLite database file (the embedded store, one node).") var db = "hookbot.sqlite"
    @OptionGroup var store: DatabaseOption
    @Option(help: "Seconds the start-up integrity check of the SQLite file may take (PRAGMA quick_check; 0 skips it).")
    var integrityCheckSeconds = 30
    @Option(help: "Largest message body in bytes.") var maxMessageBytes = 64 * 1024
    @Option(help: ArgumentHelp("Directory of uploaded files (POST /media); default: media beside --db.", valueName: "dir"))
    var mediaDir: String?
    @Option(help: ArgumentHelp("Largest uploaded file: bytes, or a size such as 100MiB.", valueName: "size"))
    var maxUploadBytes = "104857600"
    @Option(help: ArgumentHelp("Bytes one client may keep stored (e.g. 1GiB); 0 or none: no quota.", valueName: "size"))
    var mediaQuota = "1GiB"
    @Option(help: "Largest thumbnail source, width x height in pixels.") var thumbnailMaxPixels = 50_000_000
    @Option(help: "Thumbnail jobs at once.") var thumbnailJobs = 2
    @Option(help: "Thumbnail jobs waiting at once; more are refused as busy (503, 4624).") var thumbnailQueue = 64
    @Option(help: "Milliseconds one thumbnail job may take.") var thumbnailTimeoutMs = 10_000
    @Option(help: ArgumentHelp("Bytes of thumbnails kept on disk under the media directory's thumbs/; 0: none.", valueName: "size"))
    var thumbnailCache = "256MiB"
    @Option(
        help: ArgumentHelp(
            "The URL clients reach this server by (https://chat.example.com): every file URL the server writes starts with it.",
            valueName: "url"))
    var publicUrl: String?
    @Flag(help: "File URLs carry an expiry and a signature; downloads without a valid one answer 403.") var signedUrls = false
    @Option(help: "Seconds a signed file URL stays valid.") var urlTtl = 24 * 3600
    @Option(
        help: ArgumentHelp("Files no message or conversation references are deleted once this old (e.g. 24h, 30m).", valueName: "duration"))
    var mediaGrace = "24h"
    @Option(help: ArgumentHelp("How often unreferenced files are collected (e.g. 1h); 0: only hookbot media gc.", valueName: "duration"))
    var mediaGcInterval = "1h"
    @Flag(help: "With --database (PostgreSQL), keep file bytes in --media-dir (shared by the nodes) instead of the database.")
    var mediaInDirectory = false
    @Flag(help: "Use PRAGMA synchronous=NORMAL instead of FULL (faster; a power loss may lose the last commits).")
    var relaxedSync = false
    @Option(help: "Seconds after sending during which a sender may recall a message.") var recallWindow = 120
    @Option(help: "App id; with --master-key, logins and conversation actions need signatures.") var appId: String?
    @Option(help: "Master key for signatures (or set HOOKBOT_MASTER_KEY).") var masterKey: String?
    @Option(help: "App key of the LeanCloud storage API (/1.1/fileTokens, /1.1/files): X-LC-Sign / X-LC-Key made with it.")
    var appKey: String?
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.") var logLevel = "info"
    @Option(
        help: ArgumentHelp(
            "An interceptor (a bot host that reviews messages before delivery), as CLIENT_ID=SECRET; repeatable, consulted in order. The secret may be given as CLIENT_ID=env:VARIABLE.",
            valueName: "client-id=secret"))
    var interceptor: [String] = []
    @Option(help: "Milliseconds an interceptor may take to answer (at least 50).") var interceptionDeadlineMs = 200
    @Option(help: "What happens when an interceptor does not answer in time or is gone: open (deliver) or closed (refuse).")
    var interceptionFailure = "open"
    @Flag(help: "Do not send membership changes (join, invite, kick, quit) to the interceptors.")
    var noMembershipReview = false
    @Option(help: "Most connections open at once from one IP address.") var maxConnectionsPerAddress = 256
    @Option(help: "Seconds a new connection may take to send its WebSocket upgrade.") var handshakeTimeout = 10.0
    @Option(help: "Seconds a WebSocket may stay open without logging in.") var loginTimeout = 30.0
    @Option(help: "Seconds between the server's pings; a peer that misses one is closed.") var pingInterval = 30.0
    @Option(
        help: ArgumentHelp(
            "TLS certificate chain (PEM): with --tls-key, the port speaks TLS only (wss://, https://). Reloaded when the file changes.",
            valueName: "file"))
    var tlsCert: String?
    @Option(help: ArgumentHelp("The TLS certificate's private key (PEM).", valueName: "file")) var tlsKey: String?
    @Option(help: "Seconds between checks of the TLS files for a renewed certificate.") var tlsReloadInterval = 5.0
    @Option(
        help: ArgumentHelp(
            "A TOML file whose [push] and [push.<provider>] sections configure offline push (docs/PUSH.md, Settings); keys are file paths or env:NAME.",
            valueName: "file"))
    var pushConfig: String?

    func run() async throws {
        let logger = makeLogger(label: "hookbot.server", level: logLevel)
        var configuration = ServerConfiguration()
        configuration.host = host
        configuration.port = port
        configuration.databasePath = db
        configuration.databaseURL = try store.url()
        guard integrityCheckSeconds >= 0 else { throw ValidationError("--integrity-check-seconds must be 0 or more") }
        configuration.integrityCheckSeconds = integrityCheckSeconds
        configuration.maxMessageBytes = maxMessageBytes
        configuration.media.directory = mediaDir
        try media(&configuration.media)
        configuration.synchronousFull = !relaxedSync
        configuration.recallWindow = recallWindow
        configuration.appID = appId
        configuration.masterKey = masterKey ?? ProcessInfo.processInfo.environment["HOOKBOT_MASTER_KEY"]
        configuration.appKey = appKey
        configuration.interception = try interception()
        guard maxConnectionsPerAddress > 0, handshakeTimeout > 0, loginTimeout > 0, pingInterval > 0 else {
            throw ValidationError("--max-connections-per-address and the timeouts must be positive")
        }
        configuration.maxConnectionsPerAddress = maxConnectionsPerAddress
        configuration.handshakeTimeout = .milliseconds(Int64(handshakeTimeout * 1000))
        configuration.loginTimeout = .milliseconds(Int64(loginTimeout * 1000))
        configuration.pingInterval = .milliseconds(Int64(pingInterval * 1000))
        configuration.tls = try tls()
        if let pushConfig { configuration.push.apply(try PushSettings.load(path: pushConfig)) }
        let server = try IMServer(configuration: configuration, logger: logger)
        try await server.run { [scheme = server.webSocketScheme] port in
            logger.info(
                "listening", metadata: ["url": "\(scheme)://\(host):\(port)/ws", "store": "\(store.database == nil ? db : "postgres")"])
        }
    }
}

extension ServerSubcommand {
    /// The media settings given on the command line, checked as `[server]` in hookbot.toml checks them.
    func media(_ media: inout MediaConfiguration) throws {
        guard let upload = SettingValues.byteSize(maxUploadBytes), upload > 0 else {
            throw ValidationError("--max-upload-bytes must be a positive size (bytes, or e.g. 100MiB), got '\(maxUploadBytes)'")
        }
        media.maxUploadBytes = upload
        var settings = ServerMediaSettings()
        if mediaQuota.lowercased() == "none" {
            settings.quotaBytes = nil
        } else {
            guard let quota = SettingValues.byteSize(mediaQuota) else {
                throw ValidationError("--media-quota must be a size (bytes, or e.g. 1GiB) or none, got '\(mediaQuota)'")
            }
            settings.quotaBytes = quota == 0 ? nil : quota
        }
        guard thumbnailMaxPixels >= 1 else { throw ValidationError("--thumbnail-max-pixels must be at least 1") }
        guard (1...256).contains(thumbnailJobs) else { throw ValidationError("--thumbnail-jobs must be between 1 and 256") }
        guard thumbnailQueue >= 0 else { throw ValidationError("--thumbnail-queue must be 0 or more") }
        guard thumbnailTimeoutMs >= 1 else { throw ValidationError("--thumbnail-timeout-ms must be at least 1") }
        guard let cache = SettingValues.byteSize(thumbnailCache) else {
            throw ValidationError("--thumbnail-cache must be a size (bytes, or e.g. 256MiB), got '\(thumbnailCache)'")
        }
        guard urlTtl >= 1 else { throw ValidationError("--url-ttl must be at least 1 (seconds)") }
        (settings.thumbnailMaxPixels, settings.thumbnailJobs, settings.thumbnailQueue) = (thumbnailMaxPixels, thumbnailJobs, thumbnailQueue)
        settings.thumbnailTimeoutMillis = thumbnailTimeoutMs
        settings.thumbnailCacheBytes = cache
        if let publicUrl {
            switch SettingValues.publicURL(publicUrl) {
            case .success(let normalised): settings.publicURL = normalised
            case .failure(let problem): throw ValidationError("--public-url \(problem)")
            }
        }
        settings.signedURLs = signedUrls
        settings.urlTTL = urlTtl
        guard let grace = SettingValues.duration(mediaGrace) else {
            throw ValidationError("--media-grace takes seconds or a number with s, m, h or d (24h, 30m), got '\(mediaGrace)'")
        }
        guard let interval = SettingValues.duration(mediaGcInterval) else {
            throw ValidationError("--media-gc-interval takes seconds or a number with s, m, h or d (1h, 0), got '\(mediaGcInterval)'")
        }
        (settings.retentionGrace, settings.retentionInterval) = (grace, interval)
        settings.contentInDirectory = mediaInDirectory
        media.apply(settings)
    }

    /// The TLS settings given on the command line (both files or neither).
    func tls() throws -> TLSSettings? {
        switch (tlsCert, tlsKey) {
        case (nil, nil): return nil
        case (let cert?, let key?):
            guard tlsReloadInterval > 0 else { throw ValidationError("--tls-reload-interval must be positive") }
            var settings = TLSSettings(certificatePath: cert, privateKeyPath: key)
            settings.reloadInterval = .milliseconds(Int64(tlsReloadInterval * 1000))
            return settings
        default: throw ValidationError("--tls-cert and --tls-key go together")
        }
    }

    /// The interception settings given on the command line.
    func interception() throws -> InterceptionConfiguration {
        var interception = InterceptionConfiguration()
        for entry in interceptor {
            let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
                throw ValidationError("--interceptor takes CLIENT_ID=SECRET, got '\(entry)'")
            }
            var secret = parts[1]
            if secret.hasPrefix("env:") {
                let name = String(secret.dropFirst(4))
                guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else {
                    throw ValidationError("--interceptor \(parts[0]): environment variable \(name) is not set")
                }
                secret = value
            }
            interception.interceptors.append(.init(clientID: parts[0], secret: secret))
        }
        guard interceptionDeadlineMs >= 50 else { throw ValidationError("--interception-deadline-ms must be at least 50") }
        interception.deadlineMillis = interceptionDeadlineMs
        guard let policy = InterceptionFailurePolicy(rawValue: interceptionFailure) else {
            throw ValidationError("--interception-failure must be open or closed")
        }
        interception.failurePolicy = policy
        interception.reviewMembership = !noMembershipReview
        return interception
    }
}

/// A logger to standard error at `level`, and into `buffer` too when given (the console's live log).
func makeLogger(label: String, level: String, alsoInto buffer: LogBuffer? = nil) -> Logger {
    let parsed = Logger.Level(rawValue: level) ?? .info
    var logger = Logger(label: label) { label in
        var terminal = StreamLogHandler.standardError(label: label)
        terminal.logLevel = parsed
        guard let buffer else { return terminal }
        return MultiplexLogHandler([terminal, LogBufferHandler(buffer: buffer, level: parsed)])
    }
    logger.logLevel = parsed
    return logger
}
