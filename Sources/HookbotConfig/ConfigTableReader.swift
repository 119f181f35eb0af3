import Foundation
import IMCore

/// Reads typed values out of one table of `hookbot.toml` and reports keys nobody read, each problem named
/// with the file, line and dotted key (`hookbot.toml:12: bot.reply_limt: unknown key (known: …)`).
///
/// Every section type (`[bot]`, `[server]`, `[plugins]`, `[console]`, `[http.<plugin>]`, `[push…]`) reads
/// its table with one of these, so the wording of type errors and unknown keys is the same everywhere.
public struct ConfigTableReader {
    public let root: [String: JSONValue]
    /// The table's dotted path (`server`, `push.apns`); empty for the file's top level.
    public let path: String
    public let file: ConfigFile
    /// The configuration file's folder: relative paths in the file are relative to it.
    public let base: URL
    /// The keys asked for so far.
    public private(set) var read: Set<String> = []

    public init(root: [String: JSONValue], path: String, file: ConfigFile, base: URL = URL(fileURLWithPath: ".")) {
        self.root = root
        self.path = path
        self.file = file
        self.base = base
    }

    /// A key's dotted path in the file (`server.port`).
    public func keyPath(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    /// An error about `key`, located in the file; `message` is the whole text after the key.
    public func error(_ key: String, _ message: String) -> ConfigurationError { file.error(keyPath(key), message) }

    /// The raw value of `key` (marked as read).
    public mutating func value(_ key: String) -> JSONValue? {
        read.insert(key)
        return root[key]
    }

    public mutating func string(_ key: String) throws -> String? { try typed(key, "a string", \.stringValue) }

    public mutating func int(_ key: String) throws -> Int? { try typed(key, "an integer", \.intValue) }

    public mutating func double(_ key: String) throws -> Double? { try typed(key, "a number", \.doubleValue) }

    public mutating func bool(_ key: String) throws -> Bool? { try typed(key, "true or false", \.boolValue) }

    public mutating func table(_ key: String) throws -> [String: JSONValue]? { try typed(key, "a table", \.objectValue) }

    /// The value of `key` as `extract` reads it; nil when absent; "must be <expected>" when it is of another type.
    private mutating func typed<T>(_ key: String, _ expected: String, _ extract: (JSONValue) -> T?) throws -> T? {
        guard let v = value(key) else { return nil }
        guard let typed = extract(v) else { throw error(key, "must be \(expected)") }
        return typed
    }

    /// A path: absolute as written, relative to the file's folder otherwise.
    public mutating func path(_ key: String) throws -> String? { try fileURL(key)?.path }

    /// `path(_:)` as a file URL.
    public mutating func fileURL(_ key: String) throws -> URL? {
        try string(key).map { SettingValues.path($0, relativeTo: base) }
    }

    /// A secret: the text as written, or with `env:NAME` the environment variable `NAME`.
    public mutating func secret(_ key: String) throws -> String? {
        try string(key).map(SettingValues.expandingEnvironment)
    }

    /// A duration: seconds (an integer) or a string such as `"24h"` (`SettingValues.duration`).
    public mutating func duration(_ key: String) throws -> Duration? {
        guard let v = value(key) else { return nil }
        if let integer = v.intValue, integer >= 0 { return .seconds(integer) }
        if let text = v.stringValue, let duration = SettingValues.duration(text) { return duration }
        throw error(key, "must be seconds (0 or more) or a string such as \"30m\", \"24h\" or \"7d\"")
    }

    /// A byte size: an integer (bytes) or a string such as `"100 MiB"` (`SettingValues.byteSize`); with
    /// `allowingNone`, `"none"` is 0.
    public mutating func size(_ key: String, allowingNone: Bool = false) throws -> Int64? {
        guard let v = value(key) else { return nil }
        if let integer = v.intValue {
            guard integer >= 0 else { throw error(key, "must be 0 or more") }
            return Int64(integer)
        }
        if let text = v.stringValue {
            if allowingNone, text.lowercased() == "none" { return 0 }
            if let bytes = SettingValues.byteSize(text) { return bytes }
        }
        let none = allowingNone ? ", or \"none\"" : ""
        throw error(key, "must be a size: bytes (an integer) or a string such as \"100 MiB\" or \"2 GB\"\(none)")
    }

    /// The keys not read yet, sorted (now marked as read): a table's free-form entries.
    public mutating func remaining() -> [(String, JSONValue)] {
        let rest = root.filter { !read.contains($0.key) }.sorted { $0.key < $1.key }
        read.formUnion(rest.map(\.0))
        return rest
    }

    /// Throws for the first key nobody read, listing the known ones.
    public func finish() throws {
        let unknown = root.keys.filter { !read.contains($0) }.sorted()
        if let first = unknown.first {
            let known = read.sorted().joined(separator: ", ")
            throw error(first, path.isEmpty ? "unknown section (known: \(known))" : "unknown key (known: \(known))")
        }
    }
}

extension SettingValues {
    /// A secret from the configuration file: `env:NAME` reads the environment variable `NAME` (so the file
    /// itself need not hold the secret).
    public static func expandingEnvironment(_ value: String) throws -> String {
        guard value.hasPrefix("env:") else { return value }
        let name = String(value.dropFirst(4))
        guard let secret = ProcessInfo.processInfo.environment[name], !secret.isEmpty else {
            throw ConfigurationError(message: "environment variable \(name) is not set")
        }
        return secret
    }

    /// A path from the configuration file: absolute as written, relative to the file's folder otherwise.
    public static func path(_ path: String, relativeTo base: URL) -> URL {
        path.hasPrefix("/") ? URL(fileURLWithPath: path) : base.appendingPathComponent(path)
    }
}
