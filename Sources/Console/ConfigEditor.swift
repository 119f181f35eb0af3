import BotHost
import Crypto
import Foundation
import HookRuntime
import Hummingbird
import IMCore
import IMServer
import Logging

/// The console's config editor (docs/CONSOLE.md, "Config editor"): a plugin's settings with its schema,
/// changes checked as `hookbot check` checks them (the plugins loaded against a throwaway state store with
/// the new settings), written to the overrides file (`hookbot.overrides.toml`; `hookbot.toml` keeps its
/// comments because it is never rewritten) and applied with a reload of that plugin.
///
/// Each plugin's settings have a version (a hash of them): a change names the version its form showed,
/// and a stale one is refused (409), so two admins cannot overwrite each other unknowingly.
actor ConfigEditor {
    /// At most this many bytes in a change's body.
    static let maxBody = 256 * 1024

    private var bound = false
    /// `hookbot.toml`'s plugin tables (without the overrides).
    private var base: [String: JSONValue] = [:]
    private var overrides = ConfigOverrides()
    /// The change being made, so changes apply one after the other.
    private var tail: Task<Response, Never>?

    /// Takes the bot's configuration the first time it is needed.
    private func bind(_ configuration: BotConfiguration) {
        guard !bound else { return }
        bound = true
        overrides = configuration.overrides
        base = configuration.plugins.config
        let fileTables = configuration.file?.root["plugins"]?.objectValue ?? [:]
        for (name, settings) in overrides.plugins {
            guard var table = base[name]?.objectValue else { continue }
            let file = fileTables[name]?.objectValue ?? [:]
            for key in settings.keys { table[key] = file[key] }
            base[name] = .object(table)
        }
    }

    private func effective(_ name: String) -> [String: JSONValue] {
        overrides.applied(to: base)[name]?.objectValue ?? [:]
    }

    /// A short hash of a plugin's effective settings (sorted keys).
    private func version(_ name: String) -> String { Self.version(of: effective(name)) }

    static func version(of settings: [String: JSONValue]) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = (try? encoder.encode(settings)) ?? Data()
        return SHA256.hash(data: data).prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    // MARK: GET

    /// `GET /api/plugins/{name}/config`.
    func view(_ bot: BotHost, plugin name: String) async -> Response {
        bind(bot.configuration)
        guard let schema = await bot.runtime.settings(of: name) else {
            return HTTPJSON.error(.conflict, "plugin \(name) is not loaded; its settings are known once it loads")
        }
        return HTTPJSON.response(.ok, describe(schema, name))
    }

    private func describe(_ schema: PluginSettings, _ name: String) -> ConfigView {
        let settings = effective(name)
        let file = base[name]?.objectValue ?? [:]
        let overridden = overrides.plugins[name] ?? [:]
        let known = Set(schema.fields.map(\.key))
        var fields = schema.fields.map { field in
            ConfigView.FieldView(
                key: field.key, types: field.types, values: field.values, default: schema.defaults[field.key] ?? field.defaultValue,
                description: field.description, required: field.required, value: settings[field.key],
                source: overridden[field.key] != nil ? "override" : file[field.key] != nil ? "file" : "default",
                fileValue: file[field.key])
        }
        // Settings the schema does not name (the plugin would refuse them) are shown, so they can be fixed.
        for key in settings.keys.sorted() where !known.contains(key) {
            fields.append(
                .init(
                    key: key, types: ["any"], values: nil, default: nil, description: "not a setting of this plugin",
                    required: false, value: settings[key], source: overridden[key] != nil ? "override" : "file",
                    fileValue: file[key]))
        }
        return ConfigView(
            plugin: name, version: version(name), overridesFile: overrides.path, persisted: overrides.path != nil,
            fields: fields)
    }

    // MARK: PUT

    /// The version `view` showed last for a plugin (the ETag).
    func currentVersion(_ name: String) -> String? { bound ? version(name) : nil }

    /// `PUT /api/plugins/{name}/config`: one change after the other. The version is the body's, or the
    /// `If-Match` header's.
    func change(_ bot: BotHost, plugin name: String, body: Data, ifMatch: String?) async -> Response {
        bind(bot.configuration)
        let previous = tail
        let match = ifMatch.map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "\" ")) }
        let task = Task { [self] in
            _ = await previous?.value
            return await apply(bot, plugin: name, body: body, ifMatch: match)
        }
        tail = task
        return await task.value
    }

    private func apply(_ bot: BotHost, plugin name: String, body: Data, ifMatch: String?) async -> Response {
        let request: ChangeRequest
        do { request = try JSONDecoder().decode(ChangeRequest.self, from: body) } catch {
            return HTTPJSON.error(
                .badRequest, "expected {\"version\": \"…\", \"settings\": {key: value, …}, \"reset\": [key, …]}: \(error)")
        }
        guard let schema = await bot.runtime.settings(of: name) else {
            return HTTPJSON.error(.conflict, "plugin \(name) is not loaded; its settings are known once it loads")
        }
        let current = version(name)
        guard let asked = request.version ?? ifMatch else {
            return HTTPJSON.error(.badRequest, "name the version the form showed (\"version\" or If-Match); it is \(current) now")
        }
        guard asked == current else {
            return HTTPJSON.response(
                .conflict,
                ChangeError(
                    code: 409,
                    reason: "the settings of \(name) changed since this form was loaded (version \(asked), now \(current)); "
                        + "load them again", errors: [], version: current))
        }
        // The new overrides: a value equal to hookbot.toml's (or the default) drops its override.
        let file = base[name]?.objectValue ?? [:]
        var mine = overrides.plugins[name] ?? [:]
        for key in request.reset ?? [] { mine[key] = nil }
        for (key, value) in request.settings ?? [:] {
            if value == .null { return fieldError(key, "null is not a setting; use false for \"off\" or reset the key") }
            let underlying = file[key] ?? schema.defaults[key]
            mine[key] = value == underlying ? nil : value
        }
        var candidate = overrides
        candidate.plugins[name] = mine.isEmpty ? nil : mine
        let settings = candidate.applied(to: base)
        // The same check as `hookbot check`, on a thread of its own (it runs every plugin's on_load).
        let configuration = bot.configuration
        let problems = await Self.check(configuration, settings: settings, plugin: name)
        if !problems.isEmpty {
            return HTTPJSON.response(
                .badRequest,
                ChangeError(
                    code: 400, reason: (problems[0].key.map { "plugins.\(name).\($0): " } ?? "") + problems[0].reason,
                    errors: problems, version: current))
        }
        if candidate.path != nil {
            do { try candidate.write() } catch {
                return HTTPJSON.error(.internalServerError, "the overrides could not be written: \(error)")
            }
        }
        overrides = candidate
        await bot.runtime.setConfig(settings)
        let report = await bot.reload(plugin: name)
        var answer = describe(schema, name)
        if let fresh = await bot.runtime.settings(of: name) { answer = describe(fresh, name) }
        return HTTPJSON.response(.ok, ChangeView(config: answer, reload: ReloadView(report)))
    }

    private func fieldError(_ key: String, _ reason: String) -> Response {
        HTTPJSON.response(
            .badRequest, ChangeError(code: 400, reason: "\(key): \(reason)", errors: [.init(key: key, reason: reason)], version: nil))
    }

    /// Loads every plugin with `settings` against a throwaway state store, as `hookbot check` does, and
    /// returns the problems of plugin `name`, each with the setting it names when it names one.
    static func check(_ configuration: BotConfiguration, settings: [String: JSONValue], plugin name: String) async -> [ChangeError.Problem]
    {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: checkNow(configuration, settings: settings, plugin: name))
            }
        }
    }

    private static func checkNow(_ configuration: BotConfiguration, settings: [String: JSONValue], plugin name: String) -> [ChangeError
        .Problem]
    {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-config-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let store: HookStateStore
        do {
            try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
            store = try HookStateStore(path: scratch.appendingPathComponent("state.sqlite").path)
        } catch {
            return [.init(key: nil, reason: "the settings could not be checked: \(error)")]
        }
        var logger = Logger(label: "hookbot.config-editor")
        logger.logLevel = .critical
        let engine = PluginEngine(
            directory: configuration.plugins.directory, store: store, config: settings, limits: configuration.plugins.limits,
            logger: logger, botID: configuration.clientID, commands: configuration.commands)
        let report = engine.loadAll()
        engine.shutdown()
        return report.errors.filter { $0.plugin == name }.map { error in
            if case .config(let key, let message) = error.reason { return .init(key: Self.field(key, plugin: name), reason: message) }
            let text = error.message
            return .init(key: Self.field(in: text, plugin: name), reason: text)
        }
    }

    /// `plugins.moderation.rules[2].name` → `rules`.
    static func field(_ path: String, plugin: String) -> String? {
        let prefix = "plugins.\(plugin)."
        guard path.hasPrefix(prefix) else { return nil }
        let rest = path.dropFirst(prefix.count)
        let key = rest.prefix { $0 != "." && $0 != "[" && $0 != ":" && !$0.isWhitespace }
        return key.isEmpty ? nil : String(key)
    }

    /// The setting an error message names (`… plugins.moderation.rules[2]: …`), if any.
    static func field(in message: String, plugin: String) -> String? {
        guard let range = message.range(of: "plugins.\(plugin).") else { return nil }
        return field(String(message[range.lowerBound...]), plugin: plugin)
    }
}

struct ChangeRequest: Decodable {
    var version: String?
    var settings: [String: JSONValue]?
    var reset: [String]?
}

/// `GET /api/plugins/{name}/config`.
struct ConfigView: Encodable {
    struct FieldView: Encodable {
        var key: String
        var types: [String]
        var values: [JSONValue]?
        var `default`: JSONValue?
        var description: String?
        var required: Bool
        /// What the plugin is given (hookbot.toml with the overrides); absent: the default.
        var value: JSONValue?
        /// `override` (the console's file), `file` (hookbot.toml) or `default`.
        var source: String
        var fileValue: JSONValue?
    }

    var plugin: String
    var version: String
    var overridesFile: String?
    /// False: no overrides file; changes last until the bot stops.
    var persisted: Bool
    var fields: [FieldView]
}

struct ChangeView: Encodable {
    var config: ConfigView
    var reload: ReloadView
}

/// A refused change: `{"code": 400, "reason": …, "errors": [{"key": "rules", "reason": …}], "version": …}`.
struct ChangeError: Encodable {
    struct Problem: Encodable {
        var key: String?
        var reason: String
    }

    var code: Int
    var reason: String
    var errors: [Problem]
    var version: String?
}
