import Foundation
import HookRuntime
import Logging

/// Configuration problems that stop a bot from starting (`hookbot run`) or that `hookbot check` reports.
public struct ConfigurationProblems: Error, CustomStringConvertible {
    public var errors: [ConfigurationError]
    public var description: String { errors.map(\.description).joined(separator: "\n") }
}

extension BotConfiguration {
    /// Where keys of the configuration file are set, for the plugins' configuration errors.
    public var configLocator: ConfigLocator? {
        guard let file else { return nil }
        let overrides = overrides.file
        return { path in
            if let overrides, let line = overrides.line(of: path) { return (overrides.name, line) }
            return (file.name, file.line(of: path))
        }
    }

    /// The configuration problems a load revealed: settings a plugin does not accept (from its schema or
    /// its `config` defaults), and `[plugins.<name>]` sections for which there is no plugin.
    public func problems(after report: ReloadReport, plugins: [PluginStatus]) -> [ConfigurationError] {
        var problems: [ConfigurationError] = report.errors.compactMap { error in
            guard case .config(let key, let message) = error.reason else { return nil }
            return ConfigurationError(message: message, file: error.source, line: error.line, key: key)
        }
        let known = Set(plugins.map(\.name) + plugins.map { Self.fileKey(of: $0.path) })
        for section in self.plugins.config.keys.sorted() where !known.contains(section) {
            let names = plugins.map(\.name).sorted().joined(separator: ", ")
            let message = "no plugin named \(section) in \(self.plugins.directory.path) (plugins: \(names.isEmpty ? "none" : names))"
            problems.append(
                file?.error("plugins.\(section)", message)
                    ?? ConfigurationError(message: message, key: "plugins.\(section)"))
        }
        return problems
    }

    /// The name a plugin's file gives it: `moderation.lua` and `moderation/init.lua` are `moderation`.
    private static func fileKey(of path: String) -> String {
        let url = URL(fileURLWithPath: path)
        return url.lastPathComponent == "init.lua"
            ? url.deletingLastPathComponent().lastPathComponent
            : url.deletingPathExtension().lastPathComponent
    }

    /// Loads every plugin against a throwaway state store, as `hookbot run` would, and returns what is
    /// wrong: configuration problems and plugins that fail to load (each `on_load` runs; its actions do not).
    public func check() throws -> (plugins: [PluginStatus], problems: [String]) {
        let checked = try checkWithWarnings()
        return (checked.plugins, checked.problems)
    }

    /// `check()`, and the warnings that do not stop a bot: keys of a plugin's locale files that its
    /// default locale (`[bot] locale`) lacks.
    public func checkWithWarnings() throws -> (plugins: [PluginStatus], problems: [String], warnings: [String]) {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-check-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let store = try HookStateStore(path: scratch.appendingPathComponent("state.sqlite").path)
        var logger = Logger(label: "hookbot.check")
        logger.logLevel = .critical
        let engine = PluginEngine(
            directory: plugins.directory, store: store, config: plugins.config, limits: plugins.limits,
            logger: logger, botID: clientID, configLocator: configLocator)
        engine.setDefaultLocale(locale)
        let report = engine.loadAll()
        let plugins = engine.plugins
        let warnings = engine.localeWarnings
        engine.shutdown()
        let located = problems(after: report, plugins: plugins)
        let others = report.errors.filter { if case .config = $0.reason { false } else { true } }.map(\.description)
        return (plugins, located.map(\.description) + others, warnings)
    }
}
