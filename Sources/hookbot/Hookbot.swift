import ArgumentParser

@main
struct Hookbot: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hookbot",
        abstract: "A self-hostable IM hub and a chat-bot host whose behaviour is written as Lua plugin hooks.",
        subcommands: [
            ServerCommand.self, RunCommand.self, ChatCommand.self, AdminCommand.self, PluginsCommand.self,
            TestCommand.self, CheckCommand.self, BenchCommand.self, MediaCommand.self,
        ]
    )
}
