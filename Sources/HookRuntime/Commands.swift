import Foundation
import IMCore

/// Settings of chat commands: the prefix and the roles given in the host's configuration.
public struct CommandSettings: Sendable, Hashable {
    /// What starts a command in a message (`!` by default).
    public var prefix = "!"
    /// Role → client ids (`[roles]` in `hookbot.toml`); plugins may grant more at run time (`ctx.roles`).
    public var roles: [String: [String]] = [:]

    public init(prefix: String = "!", roles: [String: [String]] = [:]) {
        self.prefix = prefix
        self.roles = roles
    }
}

/// A command a plugin declared with `ctx.commands.add{ name, args, roles, cooldown, description, run }`.
struct CommandSpec: Sendable, Hashable {
    enum ArgumentType: String, Sendable, Hashable {
        case string, number, integer, user, text
    }

    struct Argument: Sendable, Hashable {
        var name: String
        var type: ArgumentType
        var optional: Bool
    }

    var name: String
    var arguments: [Argument]
    /// The `args` text as declared, for usage lines.
    var signature: String
    var roles: [String]
    var cooldown: Double
    var description: String?
    var plugin: String

    /// Parses an `args` declaration: `<user> [minutes:number] [reason:text]` — `<…>` required, `[…]`
    /// optional, `:type` one of string (default), number, integer, user (an id, `@` removed) and text (the
    /// rest of the line, last only).
    static func arguments(_ declaration: String) throws(CommandError) -> [Argument] {
        var out: [Argument] = []
        for token in declaration.split(whereSeparator: \.isWhitespace) {
            let optional: Bool
            switch (token.first, token.last) {
            case ("<", ">"): optional = false
            case ("[", "]"): optional = true
            default: throw CommandError("args: '\(token)' must be <name> or [name], with an optional :type")
            }
            let inner = token.dropFirst().dropLast()
            let parts = inner.split(separator: ":", maxSplits: 1).map(String.init)
            guard let name = parts.first, !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else {
                throw CommandError("args: '\(token)' needs a name of letters, digits and _")
            }
            let typeName = parts.count > 1 ? parts[1] : "string"
            guard let type = ArgumentType(rawValue: typeName) else {
                throw CommandError("args: '\(token)': unknown type '\(typeName)' (string, number, integer, user, text)")
            }
            if out.last?.type == .text { throw CommandError("args: a text argument takes the rest of the line, so it comes last") }
            if !optional, out.last?.optional == true { throw CommandError("args: required '\(name)' after an optional argument") }
            if out.contains(where: { $0.name == name }) { throw CommandError("args: '\(name)' twice") }
            out.append(Argument(name: name, type: type, optional: optional))
        }
        return out
    }

    /// The arguments of an invocation (the text after the command's name), or what is wrong with them.
    func parse(_ text: Substring) -> Result<[String: JSONValue], CommandError> {
        var values: [String: JSONValue] = [:]
        var rest = text.drop(while: \.isWhitespace)
        for argument in arguments {
            if rest.isEmpty {
                if argument.optional { continue }
                return .failure(CommandError("missing <\(argument.name)>"))
            }
            if argument.type == .text {
                values[argument.name] = .string(String(rest).trimmingCharacters(in: .whitespaces))
                rest = ""
                continue
            }
            let (word, after) = Self.word(rest)
            rest = after.drop(while: \.isWhitespace)
            switch argument.type {
            case .string, .text: values[argument.name] = .string(word)
            case .user:
                let id = word.hasPrefix("@") ? String(word.dropFirst()) : word
                guard !id.isEmpty else { return .failure(CommandError("\(argument.name) must be a client id")) }
                values[argument.name] = .string(id)
            case .number:
                guard let number = Double(word), number.isFinite else {
                    return .failure(CommandError("\(argument.name) must be a number, not '\(word)'"))
                }
                values[argument.name] = number.rounded() == number && abs(number) < 1e15 ? .int(Int(number)) : .double(number)
            case .integer:
                guard let number = Int(word) else {
                    return .failure(CommandError("\(argument.name) must be a whole number, not '\(word)'"))
                }
                values[argument.name] = .int(number)
            }
        }
        guard rest.isEmpty else { return .failure(CommandError("unexpected '\(rest)'")) }
        return .success(values)
    }

    /// One word, or a "quoted phrase", and what follows it.
    private static func word(_ text: Substring) -> (String, Substring) {
        if text.first == "\"", let close = text.dropFirst().firstIndex(of: "\"") {
            return (String(text[text.index(after: text.startIndex)..<close]), text[text.index(after: close)...])
        }
        let end = text.firstIndex(where: \.isWhitespace) ?? text.endIndex
        return (String(text[..<end]), text[end...])
    }

    func usage(prefix: String) -> String {
        signature.isEmpty ? "\(prefix)\(name)" : "\(prefix)\(name) \(signature)"
    }
}

struct CommandError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The commands of the loaded plugins, by name, each owned by the plugin instance that declared it (and
/// removed with it).
final class CommandRegistry {
    private var commands: [String: (spec: CommandSpec, owner: Int)] = [:]
    /// Last use per command and user, for cooldowns.
    private var lastUse: [String: Double] = [:]

    func register(_ spec: CommandSpec, owner: Int) -> String? {
        if spec.name == "help" { return "help is the host's command" }
        if let existing = commands[spec.name], existing.owner != owner, existing.spec.plugin != spec.plugin {
            return "\(spec.name) is already a command of \(existing.spec.plugin)"
        }
        commands[spec.name] = (spec, owner)
        return nil
    }

    func removeAll(owner: Int) { commands = commands.filter { $0.value.owner != owner } }

    /// What is registered now, to put back if a new version of a plugin fails to load.
    func snapshot() -> [String: (spec: CommandSpec, owner: Int)] { commands }
    func restore(_ saved: [String: (spec: CommandSpec, owner: Int)]) { commands = saved }

    func command(_ name: String) -> (spec: CommandSpec, owner: Int)? { commands[name] }
    var all: [CommandSpec] { commands.values.map(\.spec).sorted { $0.name < $1.name } }
    var isEmpty: Bool { commands.isEmpty }

    /// Seconds left of `spec`'s cooldown for `user` at `now`; records a use when there are none left.
    func cooldownLeft(_ spec: CommandSpec, user: String, now: Double) -> Double? {
        guard spec.cooldown > 0 else { return nil }
        let key = spec.name + "\u{0}" + user
        if let last = lastUse[key], now - last < spec.cooldown { return spec.cooldown - (now - last) }
        if lastUse.count > 10_000 { lastUse = lastUse.filter { now - $0.value < 3600 } }
        lastUse[key] = now
        return nil
    }
}
