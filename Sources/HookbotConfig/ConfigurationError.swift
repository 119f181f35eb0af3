/// A configuration that could not be used: what is wrong, and where when it comes from a file
/// (`hookbot.toml:12: plugins.autoreply.rulez: unknown key`).
public struct ConfigurationError: Error, CustomStringConvertible {
    public var message: String
    public var file: String?
    public var line: Int?
    /// The key, as a dotted path (`bot.client_id`).
    public var key: String?

    public init(message: String, file: String? = nil, line: Int? = nil, key: String? = nil) {
        self.message = message
        self.file = file
        self.line = line
        self.key = key
    }

    public var description: String {
        var prefix = ""
        if let file { prefix = line.map { "\(file):\($0): " } ?? "\(file): " }
        if let key { prefix += "\(key): " }
        return prefix + message
    }
}
