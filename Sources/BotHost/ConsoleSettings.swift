import HookbotConfig

/// Where and how `hookbot run` serves the browser console and its admin API: `[console]` in hookbot.toml
/// (docs/CONSOLE.md).
public struct ConsoleSettings: Sendable {
    /// False: no console and no admin API (metrics and health stay).
    public var enabled = true
    /// The admin token; nil: a new one at every start.
    public var token: String?
    /// Where a bot of a remote server serves them (with the embedded server they share its host and port).
    public var host = "127.0.0.1"
    public var port = 8090
    /// Where the config editor keeps its changes (relative to the configuration file); nil:
    /// `hookbot.overrides.toml` beside it.
    public var overrides: String?

    public init() {}

    /// Reads `[console]`; every problem names the file, line and key.
    public init(reading r: inout ConfigTableReader) throws {
        enabled = try r.bool("enabled") ?? enabled
        if let token = try r.secret("token") {
            guard token.utf8.count >= 16 else { throw r.error("token", "must be at least 16 characters") }
            self.token = token
        }
        host = try r.string("host") ?? host
        port = try r.int("port") ?? port
        overrides = try r.string("overrides") ?? overrides
        try r.finish()
    }
}
