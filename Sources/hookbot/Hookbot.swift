import ArgumentParser

/// The `hookbot` tool. Each subcommand is a `…Subcommand` type (`hookbot chat` is `ChatSubcommand`), not
/// `…Command`: in this code base a `Command` is the wire protocol's (IMCore), and plugins' chat commands are
/// the runtime's.
@main
struct Hookbot: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hookbot",
        abstract: "A self-hostable IM hub and a chat-bot host whose behaviour is written as Lua plugin hooks.",
        version: Hookbot.version,
        subcommands: [
            ServerSubcommand.self, RunSubcommand.self, ChatSubcommand.self, ReloadSubcommand.self, PluginsSubcommand.self,
            TestSubcommand.self, CheckSubcommand.self, BenchSubcommand.self, MediaSubcommand.self,
        ]
    )
}

extension Hookbot {
    /// `hookbot --version`: the release (raised when one is made; there is none yet), and the wire
    /// protocols the server speaks, which is what a client's author asks first.
    static let version = "hookbot 0.1.0 (LeanCloud realtime protocol: JSON, lc.protobuf2.3, lc.proto2base64.3, lc.protobuf2.1)"
}
