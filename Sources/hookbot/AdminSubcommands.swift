import ArgumentParser
import BotHost

// `hookbot reload` and `hookbot plugins`: requests to the admin socket of the bot running in this directory
// (BotHost/AdminSocket.swift), answers printed by AdminOutput.

struct ReloadSubcommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reload", abstract: "Reload every plugin of the bot running in this directory.")

    @Option(help: "Admin socket of the running bot.") var socket = ".hookbot-admin.sock"
    @Flag(help: "Print the bot's answer as JSON (for scripts) instead of a table.") var json = false

    func run() async throws {
        let answer = try await AdminSocket.request("reload", path: socket)
        print(json ? answer : AdminOutput.reload(answer), terminator: json ? "\n" : "")
    }
}

struct PluginsSubcommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "plugins", abstract: "List the running bot's plugins with their status and failures.")

    @Option(help: "Admin socket of the running bot.") var socket = ".hookbot-admin.sock"
    @Flag(help: "Show the bot's counters instead.") var stats = false
    @Flag(help: "Print the bot's answer as JSON (for scripts) instead of a table.") var json = false

    func run() async throws {
        let answer = try await AdminSocket.request(stats ? "stats" : "plugins", path: socket)
        if json { return print(answer) }
        print(stats ? AdminOutput.stats(answer) : AdminOutput.plugins(answer), terminator: "")
    }
}
