import CLua
import Foundation
import IMCore

/// What a message invokes: a command's name and the text after it (`PluginEngine.invocation`).
typealias ChatInvocation = (name: String, rest: Substring)

/// Chat commands (`ctx.commands.add`): dispatch, argument checks, roles, cooldowns, `!help`.
extension PluginEngine {
    /// The command a message looks like it invokes (its name, and the text after it), parsed once per message
    /// for `answerDialog`, `runCommand` and `answeringUnknownCommand`; nil when no plugin declared a command
    /// (then none of them has anything to do with it).
    func invocation(_ message: HookMessage) -> ChatInvocation? {
        guard !env.commands.isEmpty else { return nil }
        let prefix = env.commandSettings.prefix
        guard !prefix.isEmpty, let text = message.text, text.hasPrefix(prefix) else { return nil }
        let body = text.dropFirst(prefix.count)
        let end = body.firstIndex(where: \.isWhitespace) ?? body.endIndex
        let name = String(body[..<end])
        return name.isEmpty ? nil : (name, body[end...])
    }

    /// A reply from the host about a command (usage, permission, cooldown, help), as the command's plugin.
    private func hostReply(_ text: String, to message: HookMessage, plugin: String) -> HookResult {
        let reply = HookMessage(cid: message.cid, type: MessageType.text.rawValue, text: text)
        return HookResult(actions: [HookAction(plugin: plugin, kind: .send(cid: message.cid, message: reply, replyTo: message.id))])
    }

    /// Runs the command a message invokes instead of `on_receive`: checks the roles, the cooldown and the
    /// arguments (answering the sender when one fails), then calls the command's `run`. Nil when the
    /// message invokes no declared command.
    func runCommand(_ message: HookMessage, _ invocation: ChatInvocation?) -> HookResult? {
        guard let (name, rest) = invocation else { return nil }
        let prefix = env.commandSettings.prefix
        if name == "help", !env.commands.isEmpty { return help(rest, message) }
        guard let (spec, owner) = env.commands.command(name),
            let plugin = ordered.first(where: { $0.instanceID == owner })
        else { return nil }
        if plugin.disabled {
            return hostReply("\(prefix)\(name) is not available now (its plugin is disabled)", to: message, plugin: spec.plugin)
        }
        if !spec.roles.isEmpty, !spec.roles.contains(where: { hasRole(env, user: message.from, role: $0, cid: message.cid) }) {
            return hostReply("\(prefix)\(name) is only for \(spec.roles.joined(separator: " or "))", to: message, plugin: spec.plugin)
        }
        let arguments: [String: JSONValue]
        switch spec.parse(rest) {
        case .failure(let error):
            return hostReply("\(prefix)\(name): \(error) — usage: \(spec.usage(prefix: prefix))", to: message, plugin: spec.plugin)
        case .success(let parsed): arguments = parsed
        }
        if let left = env.commands.cooldownLeft(spec, user: message.from, now: clock.now()) {
            MessageTrace.current?.add(
                .skipped, plugin: spec.plugin, hook: "\(prefix)\(name)", "cooldown: \(Int(left.rounded(.up))) s left for \(message.from)")
            return hostReply("\(prefix)\(name): wait \(Int(left.rounded(.up))) s", to: message, plugin: spec.plugin)
        }
        let typeName = env.registry.name(of: message.type)
        let trace = MessageTrace.current
        let started = trace == nil ? 0 : PluginUsage.now()
        let result = call(plugin, cid: message.cid, messageID: message.id) { plugin in
            plugin.runCommand(name, arguments: arguments, message: message, typeName: typeName)
        }
        trace?.hook(
            plugin.name, "\(prefix)\(name)", nanos: PluginUsage.now() &- started, outcome: nil, actions: result.actions,
            error: result.errors.first)
        return result
    }

    /// `on_receive`'s result, or, when nothing answered a message that looks like an unknown command
    /// while commands are declared, a reply saying so.
    func answeringUnknownCommand(_ message: HookMessage, _ invocation: ChatInvocation?, _ result: HookResult) -> HookResult {
        guard result.actions.isEmpty, !env.commands.isEmpty, let (name, _) = invocation,
            env.commands.command(name) == nil
        else { return result }
        let prefix = env.commandSettings.prefix
        var answered = hostReply(
            "unknown command \(prefix)\(ChatCommandText.cut(name, to: 40)); \(prefix)help lists the commands", to: message,
            plugin: "hookbot")
        answered.errors = result.errors
        return answered
    }

    /// `!help` (the first page of commands), `!help <n>` (page n) and `!help <command>` (one in full); see
    /// `ChatCommandHelp` for the sizes.
    private func help(_ rest: Substring, _ message: HookMessage) -> HookResult {
        let prefix = env.commandSettings.prefix
        let asked = rest.trimmingCharacters(in: .whitespaces)
        let help = ChatCommandHelp(prefix: prefix, commands: env.commands.all)
        guard !asked.isEmpty else { return hostReply(help.page(1), to: message, plugin: "hookbot") }
        let name = asked.hasPrefix(prefix) ? String(asked.dropFirst(prefix.count)) : asked
        if let (spec, _) = env.commands.command(name), !(asked == name && Int(name) != nil) {
            return hostReply(help.detail(spec), to: message, plugin: spec.plugin)
        }
        if asked == name, let number = Int(name) { return hostReply(help.page(number), to: message, plugin: "hookbot") }
        return hostReply(
            "unknown command \(prefix)\(ChatCommandText.cut(name, to: 40)); \(prefix)help lists the commands", to: message,
            plugin: "hookbot")
    }
}
