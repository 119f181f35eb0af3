import IMCore

/// A loaded plugin's settings as the console's config editor shows them: each setting its schema accepts
/// (declared, or inferred from the `config` defaults) with its types, allowed values, default and description.
public struct PluginSettings: Sendable, Hashable {
    public struct Field: Sendable, Hashable {
        public var key: String
        /// `string`, `number`, `integer`, `boolean`, `array`, `table` or `any`, sorted.
        public var types: [String]
        /// The values allowed, when the schema lists them.
        public var values: [JSONValue]?
        public var defaultValue: JSONValue?
        public var description: String?
        public var required: Bool
    }

    public var plugin: String
    /// Sorted by key.
    public var fields: [Field]
    /// The plugin's defaults (its `config` table, and the schema's defaults).
    public var defaults: [String: JSONValue]
}

extension PluginEngine {
    /// The settings of the loaded plugin `name`; nil when no plugin of that name is loaded.
    public func settings(of name: String) -> PluginSettings? {
        guard let plugin = ordered.first(where: { $0.name == name }) else { return nil }
        let fields = plugin.settingsSchema.fields.sorted { $0.key < $1.key }.map { key, field in
            PluginSettings.Field(
                key: key, types: field.kinds.map(\.rawValue).sorted(), values: field.values,
                defaultValue: field.defaultValue, description: field.description, required: field.required)
        }
        return PluginSettings(plugin: name, fields: fields, defaults: plugin.settingsDefaults.objectValue ?? [:])
    }

    /// The declared command `message` invokes, run alone with its role, argument and cooldown checks (what
    /// the console's undo does as `ChatCommandSettings.consoleID`); nil when the message invokes no command.
    public func consoleCommand(_ message: HookMessage) -> HookResult? { runCommand(message, invocation(message)) }
}
