import ArgumentParser
import Foundation
import Logging
import PluginTester

struct TestSubcommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "test",
        abstract: "Run plugin scenario files (*.test.lua) in process, without a server.",
        discussion: """
            Each path is a scenario file or a directory searched for *.test.lua files. Prints PASS/FAIL per \
            case with the differences, then "N passed, M failed"; exits non-zero if anything failed. \
            The scenario format is described in plugins/README.md.
            """)

    @Argument(help: "Scenario files or directories (default: plugins).") var paths: [String] = ["plugins"]
    @Option(help: "Plugins directory the scenarios load from (default: the directory given, or the file's plugin folder).")
    var pluginsDir: String?
    @Option(help: "Only run cases whose \"file: case\" title contains this text.") var filter: String?
    @Flag(help: "Print what every step did.") var verbose = false
    @Option(help: "Log level of the plugins' logger.") var logLevel = "critical"

    func run() async throws {
        let runner = PluginTestRunner(
            filter: filter, verbose: verbose,
            logLevel: Logger.Level(rawValue: logLevel) ?? .critical
        ) { line in
            print(line)
            fflush(nil)
        }
        let summary = await runner.run(paths: paths, pluginsDirectory: pluginsDir)
        if summary.failed > 0 || summary.results.isEmpty { throw ExitCode.failure }
    }
}
