import ArgumentParser
import BotHost
import Foundation

struct CheckSubcommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Check hookbot.toml and the plugins without starting anything.",
        discussion: """
            Reads the configuration (syntax, unknown sections and keys, wrong types) with the console's \
            overrides on top (hookbot.overrides.toml beside it, or [console] overrides), loads every plugin against \
            a throwaway state store (compile errors, on_load failures) and checks each plugin's settings against \
            its schema. Prints every problem with file, line and key; exits with status 1 if there is any.
            """)

    @Option(help: "Configuration file (TOML).") var config = "hookbot.toml"
    @Option(help: "Plugins directory (default: the configuration's).") var plugins: String?

    func run() throws {
        var configuration: BotConfiguration
        if FileManager.default.fileExists(atPath: config) {
            do {
                configuration = try BotConfiguration.load(path: config)
            } catch {
                print(error)
                throw ExitCode(1)
            }
        } else {
            print("\(config) not found; checking the plugins with the default configuration")
            configuration = BotConfiguration()
        }
        if let plugins { configuration.plugins.directory = URL(fileURLWithPath: plugins) }
        let (statuses, problems, warnings) = try configuration.checkWithWarnings()
        for problem in problems { print(problem) }
        for warning in warnings { print("warning: \(warning)") }
        let loaded = statuses.filter { $0.state != .failed }.map(\.name)
        let overrides = configuration.overrides.file.map { " + \($0.name)" } ?? ""
        if problems.isEmpty {
            let names = loaded.joined(separator: ", ")
            print("ok: \(config)\(overrides), \(loaded.count) plugin(s) from \(configuration.plugins.directory.path): \(names)")
        } else {
            print("\(problems.count) problem(s); \(loaded.count) plugin(s) loaded")
            throw ExitCode(1)
        }
    }
}
