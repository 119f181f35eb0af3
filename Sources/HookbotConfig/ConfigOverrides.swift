import Foundation
import IMCore
import TOMLKit

/// Plugin settings changed from the browser console (its config editor), kept in a file of their own,
/// `hookbot.overrides.toml` beside `hookbot.toml` (or `[console] overrides`), and read at start on top of
/// `hookbot.toml`: each key of an overrides file's `[plugins.<name>]` replaces that key of the plugin's
/// table. TOMLKit does not keep comments, so `hookbot.toml` itself is never rewritten.
public struct ConfigOverrides: Sendable {
    public static let defaultFileName = "hookbot.overrides.toml"
    /// At most this many bytes are written or read (a cap on what the console can make the host keep).
    public static let maxBytes = 1 << 20

    /// Where the console writes; nil: changes apply until the bot stops, and are not kept.
    public var path: String?
    /// Plugin name → the settings that replace those of `hookbot.toml`.
    public var plugins: [String: [String: JSONValue]] = [:]
    /// The file as read (to locate keys in errors), if there was one.
    public var file: ConfigFile?

    public init(path: String? = nil, plugins: [String: [String: JSONValue]] = [:]) {
        self.path = path
        self.plugins = plugins
    }

    /// Reads `path`; a missing file is no overrides.
    public static func read(path: String) throws(ConfigurationError) -> ConfigOverrides {
        guard FileManager.default.fileExists(atPath: path) else { return ConfigOverrides(path: path) }
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw ConfigurationError(message: "cannot read \(path): \(error.localizedDescription)", file: path)
        }
        guard data.count <= maxBytes else {
            throw ConfigurationError(message: "is larger than \(maxBytes) bytes", file: path)
        }
        return try parse(String(decoding: data, as: UTF8.self), path: path)
    }

    /// Parses an overrides file: only `[plugins.<name>]` tables belong there.
    public static func parse(_ text: String, path: String) throws(ConfigurationError) -> ConfigOverrides {
        let file = try ConfigFile(text: text, name: path)
        var overrides = ConfigOverrides(path: path)
        overrides.file = file
        for key in file.root.keys.sorted() where key != "plugins" {
            throw file.error(key, "only [plugins.<name>] tables belong in the overrides file (the console writes it)")
        }
        for (name, value) in (file.root["plugins"]?.objectValue ?? [:]).sorted(by: { $0.key < $1.key }) {
            guard let settings = value.objectValue else { throw file.error("plugins.\(name)", "must be a table") }
            overrides.plugins[name] = settings
        }
        return overrides
    }

    /// `base` (plugin name → table, from `hookbot.toml`) with these overrides: each overridden key replaced.
    public func applied(to base: [String: JSONValue]) -> [String: JSONValue] {
        var config = base
        for (name, settings) in plugins {
            var table = config[name]?.objectValue ?? [:]
            for (key, value) in settings { table[key] = value }
            config[name] = .object(table)
        }
        return config
    }

    /// The file's text: a comment saying where it comes from, then a `[plugins.<name>]` table per plugin.
    /// Throws when a value cannot be written in TOML (null).
    public func text() throws(ConfigurationError) -> String {
        var out = """
            # Plugin settings changed in the Hookbot console (config editor). Read at start on top of
            # hookbot.toml: each key here replaces the same key of [plugins.<name>] there. The console
            # rewrites this file; edit hookbot.toml for settings with comments.

            """
        for name in plugins.keys.sorted() {
            guard let settings = plugins[name], !settings.isEmpty else { continue }
            let table = TOMLTable()
            for key in settings.keys.sorted() {
                table[key] = try Self.toml(settings[key] ?? .null, path: "plugins.\(name).\(key)")
            }
            let root = TOMLTable()
            let plugins = TOMLTable()
            plugins[name] = table
            root["plugins"] = plugins
            out += "\n" + root.convert(to: .toml) + "\n"
        }
        return out
    }

    /// Writes `text()` to `path` atomically (a reader sees the old file or the new one, never a part).
    public func write() throws(ConfigurationError) {
        guard let path else { throw ConfigurationError(message: "no overrides file is configured ([console] overrides)") }
        let text = try text()
        guard text.utf8.count <= Self.maxBytes else {
            throw ConfigurationError(message: "the overrides would be \(text.utf8.count) bytes; at most \(Self.maxBytes)", file: path)
        }
        do { try Data(text.utf8).write(to: URL(fileURLWithPath: path), options: .atomic) } catch {
            throw ConfigurationError(message: "cannot write \(path): \(error.localizedDescription)", file: path)
        }
    }

    private static func toml(_ value: JSONValue, path: String) throws(ConfigurationError) -> any TOMLValueConvertible {
        switch value {
        case .null: throw ConfigurationError(message: "null cannot be written in TOML (use false for \"off\")", key: path)
        case .bool(let bool): return bool
        case .int(let int): return int
        case .double(let double): return double
        case .string(let string): return string
        case .array(let items):
            let array = TOMLArray()
            for item in items { array.append(try toml(item, path: path)) }
            return array
        case .object(let entries):
            let table = TOMLTable(inline: false)
            for key in entries.keys.sorted() { table[key] = try toml(entries[key] ?? .null, path: "\(path).\(key)") }
            return table
        }
    }
}
