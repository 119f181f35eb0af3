import Foundation
import HookbotConfig

/// The embedded server's settings: `[server]` in hookbot.toml (README, "Configuration"), used when `hookbot run`
/// starts without `--server`. `EmbeddedHub` hands them to the server's `ServerConfiguration` (BotHost does not
/// link the server, so the defaults are repeated here: MediaConfigTests and BotHostTests check that they agree).
public struct ServerSettings: Sendable {
    public var host = "127.0.0.1"
    public var port = 8080
    /// `db`: the SQLite file.
    public var database = "hookbot.sqlite"
    /// `database`: a PostgreSQL URL the embedded server keeps its state in instead of SQLite.
    public var databaseURL: String?
    /// `media`: the directory of uploaded files (relative to the file); nil: `media` beside `db`.
    public var mediaDirectory: String?
    /// `max_upload_mb`: largest uploaded file in MiB (100 by default).
    public var maxUploadMB = 100
    /// The other media settings: quota, thumbnail limits and cache, public URL, signed URLs.
    public var media = ServerMediaSettings()
    /// `tls_cert` / `tls_key`: the embedded server speaks TLS with this certificate chain and key
    /// (PEM files, reloaded when they change); nil: plain `ws://`.
    public var tlsCertificate: String?
    public var tlsKey: String?
    /// `synchronous = "full" | "normal"`: SQLite `synchronous=FULL` for the embedded server
    /// (false: `NORMAL`, which can lose the last transactions on a power loss, not on a process crash).
    public var synchronousFull = true
    /// `interception_deadline_ms`: how long the server waits for the bot's verdict.
    public var interceptionDeadlineMillis = 200
    /// `interception_policy = "closed"`: refuse messages the bot does not review in time.
    public var failClosed = false
    /// `lobby`: the name of the conversation the embedded server creates for trying the bot.
    public var lobbyName = "lobby"
    /// `bot_attachment`: how the bot reaches the embedded server.
    public var attachment = BotAttachment.inProcess

    public init() {}

    /// Reads `[server]`; every problem names the file, line and key.
    public init(reading r: inout ConfigTableReader) throws {
        host = try r.string("host") ?? host
        port = try r.int("port") ?? port
        database = try r.path("db") ?? database
        if let url = try r.secret("database") {
            guard url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") else {
                throw r.error("database", "must be a postgres:// URL (server.db names a SQLite file)")
            }
            databaseURL = url
        }
        mediaDirectory = try r.path("media") ?? mediaDirectory
        if let megabytes = try r.int("max_upload_mb") {
            guard megabytes >= 1 else { throw r.error("max_upload_mb", "must be at least 1") }
            maxUploadMB = megabytes
        }
        try media.read(&r)
        tlsCertificate = try r.path("tls_cert")
        tlsKey = try r.path("tls_key")
        if (tlsCertificate == nil) != (tlsKey == nil) {
            throw r.error(tlsKey == nil ? "tls_cert" : "tls_key", "tls_cert and tls_key go together")
        }
        interceptionDeadlineMillis = try r.int("interception_deadline_ms") ?? interceptionDeadlineMillis
        if let policy = try r.string("interception_policy") {
            guard ["open", "closed"].contains(policy) else {
                throw r.error("interception_policy", "must be \"open\" or \"closed\"")
            }
            failClosed = policy == "closed"
        }
        lobbyName = try r.string("lobby") ?? lobbyName
        if let level = try r.string("synchronous") {
            guard ["full", "normal"].contains(level.lowercased()) else {
                throw r.error("synchronous", "must be \"full\" or \"normal\"")
            }
            synchronousFull = level.lowercased() == "full"
        }
        if let attachment = try r.string("bot_attachment") {
            guard let value = BotAttachment(rawValue: attachment) else {
                throw r.error("bot_attachment", "must be \"in-process\" or \"websocket\"")
            }
            self.attachment = value
        }
        try r.finish()
    }
}

/// How a bot host talks to a server in the same process.
public enum BotAttachment: String, Sendable, CaseIterable {
    /// Commands cross as values and interception requests as direct calls (the default).
    case inProcess = "in-process"
    /// A WebSocket on loopback with JSON frames, exactly as a bot on another machine.
    case webSocket = "websocket"
}

extension ServerMediaSettings {
    /// Reads the media keys of `[server]` (docs/MEDIA.md, "Settings"), each checked with the file, line and key.
    fileprivate mutating func read(_ r: inout ConfigTableReader) throws {
        if let quota = try r.size("media_quota", allowingNone: true) { quotaBytes = quota == 0 ? nil : quota }
        if let pixels = try r.int("thumbnail_max_pixels") {
            guard pixels >= 1 else { throw r.error("thumbnail_max_pixels", "must be at least 1") }
            thumbnailMaxPixels = pixels
        }
        if let jobs = try r.int("thumbnail_jobs") {
            guard (1...256).contains(jobs) else { throw r.error("thumbnail_jobs", "must be between 1 and 256") }
            thumbnailJobs = jobs
        }
        if let queue = try r.int("thumbnail_queue") {
            guard queue >= 0 else { throw r.error("thumbnail_queue", "must be 0 or more") }
            thumbnailQueue = queue
        }
        if let timeout = try r.int("thumbnail_timeout_ms") {
            guard timeout >= 1 else { throw r.error("thumbnail_timeout_ms", "must be at least 1") }
            thumbnailTimeoutMillis = timeout
        }
        if let cache = try r.size("thumbnail_cache") { thumbnailCacheBytes = cache }
        if let url = try r.string("public_url") {
            switch SettingValues.publicURL(url) {
            case .success(let normalised): publicURL = normalised
            case .failure(let problem): throw r.error("public_url", "\(problem)")
            }
        }
        signedURLs = try r.bool("signed_urls") ?? signedURLs
        if let ttl = try r.int("url_ttl") {
            guard ttl >= 1 else { throw r.error("url_ttl", "must be at least 1 (seconds)") }
            urlTTL = ttl
        }
        if let grace = try r.duration("media_grace") { retentionGrace = grace }
        if let interval = try r.duration("media_gc_interval") { retentionInterval = interval }
        contentInDirectory = try r.bool("media_in_directory") ?? contentInDirectory
    }
}
