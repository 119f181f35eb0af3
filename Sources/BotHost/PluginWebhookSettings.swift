import HookbotConfig
import IMCore

/// Plugins' webhooks (`POST /hooks/<plugin>/…`, served by the console): `[webhooks]` in hookbot.toml maps a
/// plugin to the secret its webhook requires (docs/PLUGINS.md, "Webhooks").
public struct PluginWebhookSettings: Sendable {
    /// Plugin name → its secret (at least 16 bytes; `env:NAME` reads it from the environment).
    public var secrets: [String: String] = [:]
    /// Largest webhook body accepted, in bytes (larger: 413).
    public var maxBytes = 1 << 20

    public init() {}

    /// Reads `[webhooks]`; every problem names the file, line and key.
    public init(reading r: inout ConfigTableReader) throws {
        for (plugin, secret) in r.remaining() {
            guard let text = secret.stringValue else { throw r.error(plugin, "must be a secret (a string)") }
            let expanded = try SettingValues.expandingEnvironment(text)
            guard expanded.utf8.count >= 16 else { throw r.error(plugin, "must be at least 16 characters") }
            secrets[plugin] = expanded
        }
    }
}
