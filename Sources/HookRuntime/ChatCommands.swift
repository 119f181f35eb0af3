import Foundation
import IMCore

/// Settings of chat commands: the prefix and the roles given in the host's configuration.
public struct ChatCommandSettings: Sendable, Hashable {
    /// What starts a command in a message (`!` by default).
    public var prefix = "!"
    /// Role → client ids (`[roles]` in `hookbot.toml`); plugins may grant more at run time (`ctx.roles`).
    public var roles: [String: [String]] = [:]
    /// The client id the browser console runs commands as (an undo): it holds every role. No client can
    /// log in with it (a ':' is refused in client ids), so no message from the server carries it.
    public static let consoleID = "console:admin"

    public init(prefix: String = "!", roles: [String: [String]] = [:]) {
        self.prefix = prefix
        self.roles = roles
    }
}

/// A command a plugin declared with `ctx.commands.add{ name, args, roles, cooldown, description, run }`.
struct ChatCommand: Sendable, Hashable {
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
    static func arguments(_ declaration: String) throws(TextError) -> [Argument] {
        var out: [Argument] = []
        for token in declaration.split(whereSeparator: \.isWhitespace) {
            let optional: Bool
            switch (token.first, token.last) {
            case ("<", ">"): optional = false
            case ("[", "]"): optional = true
            default: throw TextError("args: '\(token)' must be <name> or [name], with an optional :type")
            }
            let inner = token.dropFirst().dropLast()
            let parts = inner.split(separator: ":", maxSplits: 1).map(String.init)
            guard let name = parts.first, !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else {
                throw TextError("args: '\(token)' needs a name of letters, digits and _")
            }
            let typeName = parts.count > 1 ? parts[1] : "string"
            guard let type = ArgumentType(rawValue: typeName) else {
                throw TextError("args: '\(token)': unknown type '\(typeName)' (string, number, integer, user, text)")
            }
            if out.last?.type == .text { throw TextError("args: a text argument takes the rest of the line, so it comes last") }
            if !optional, out.last?.optional == true { throw TextError("args: required '\(name)' after an optional argument") }
            if out.contains(where: { $0.name == name }) { throw TextError("args: '\(name)' twice") }
            out.append(Argument(name: name, type: type, optional: optional))
        }
        return out
    }

    /// The arguments of an invocation (the text after the command's name), or what is wrong with them.
    func parse(_ text: Substring) -> Result<[String: JSONValue], TextError> {
        var values: [String: JSONValue] = [:]
        var rest = text.drop(while: \.isWhitespace)
        for argument in arguments {
            if rest.isEmpty {
                if argument.optional { continue }
                return .failure(TextError("missing <\(argument.name)>"))
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
                guard !id.isEmpty else { return .failure(TextError("\(argument.name) must be a client id")) }
                values[argument.name] = .string(id)
            case .number:
                guard let number = Double(word), number.isFinite else {
                    return .failure(TextError("\(argument.name) must be a number, not '\(ChatCommandText.cut(word, to: 40))'"))
                }
                values[argument.name] = number.rounded() == number && abs(number) < 1e15 ? .int(Int(number)) : .double(number)
            case .integer:
                guard let number = Int(word) else {
                    return .failure(TextError("\(argument.name) must be a whole number, not '\(ChatCommandText.cut(word, to: 40))'"))
                }
                values[argument.name] = .int(number)
            }
        }
        guard rest.isEmpty else { return .failure(TextError("unexpected '\(ChatCommandText.cut(rest, to: 40))'")) }
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

/// What a declaration may hold, so that `!help` stays readable and every reply stays small whatever a
/// plugin declares.
extension ChatCommand {
    /// A longer description is cut to this many characters, the last one `…` (and put on one line).
    static let maxDescription = 200
    /// Longest `args` declaration accepted (longer: an error).
    static let maxSignature = 200
    /// At most this many roles, each at most `maxRoleLength` characters (more: an error).
    static let maxRoles = 8
    static let maxRoleLength = 64
    /// At most this many commands per plugin (more: an error).
    static let maxPerPlugin = 50

    /// What is wrong with the declaration, or nil.
    func problem() -> String? {
        if signature.count > Self.maxSignature {
            return "args is \(signature.count) characters; at most \(Self.maxSignature)"
        }
        if roles.count > Self.maxRoles { return "\(roles.count) roles; at most \(Self.maxRoles)" }
        if let role = roles.first(where: { $0.isEmpty || $0.count > Self.maxRoleLength }) {
            return "role '\(ChatCommandText.cut(role, to: 20))' must be 1–\(Self.maxRoleLength) characters"
        }
        return nil
    }

    /// The declaration as the registry keeps it: the description on one line, cut to `maxDescription`.
    var kept: ChatCommand {
        var spec = self
        spec.description = description.map { ChatCommandText.cut(ChatCommandText.oneLine($0), to: Self.maxDescription) }
        if spec.description?.isEmpty == true { spec.description = nil }
        return spec
    }
}

/// Text helpers for what the host says about commands.
enum ChatCommandText {
    /// `text` if it has at most `limit` characters, else its first `limit - 1` and `…`.
    static func cut(_ text: some StringProtocol, to limit: Int) -> String {
        text.count <= limit ? String(text) : String(text.prefix(max(limit - 1, 0))) + "…"
    }

    /// Line breaks, tabs and other control characters become spaces; runs of spaces one; no spaces around.
    static func oneLine(_ text: String) -> String {
        var out = ""
        var space = false
        for ch in text {
            if ch.isWhitespace || ch.unicodeScalars.allSatisfy({ $0.properties.generalCategory == .control }) {
                space = !out.isEmpty
                continue
            }
            if space { out.append(" ") }
            space = false
            out.append(ch)
        }
        return out
    }

    /// `text` cut (at a character boundary, ending in `…`) to at most `bytes` bytes of UTF-8.
    static func fit(_ text: String, bytes: Int) -> String {
        guard text.utf8.count > bytes else { return text }
        var out = ""
        var used = 0
        let budget = bytes - "…".utf8.count
        for ch in text {
            let size = ch.utf8.count
            if used + size > budget { break }
            out.append(ch)
            used += size
        }
        return out + "…"
    }
}

/// `!help`: the commands, one line each, in pages of at most `linesPerPage` lines and `pageBytes` bytes;
/// `!help <command>` for one in full; `!help <n>` for page n. Every reply is at most `maxReplyBytes`.
struct ChatCommandHelp {
    static let linesPerPage = 20
    static let pageBytes = 2000
    /// A listing line's description is cut to this many characters (`!help <command>` shows it all).
    static let listedDescription = 80
    static let maxLine = 300
    static let maxReplyBytes = 4000

    let prefix: String
    let commands: [ChatCommand]

    func line(_ spec: ChatCommand, descriptionLimit: Int) -> String {
        var text = spec.usage(prefix: prefix)
        if let description = spec.description { text += " — " + ChatCommandText.cut(description, to: descriptionLimit) }
        if !spec.roles.isEmpty { text += " (\(spec.roles.joined(separator: " or ")))" }
        return text
    }

    /// The listing, split into pages (at least one).
    var pages: [[String]] {
        var pages: [[String]] = [[]]
        var bytes = 0
        for spec in commands {
            let text = ChatCommandText.cut(line(spec, descriptionLimit: Self.listedDescription), to: Self.maxLine)
            let size = text.utf8.count + 1
            if let current = pages.last, !current.isEmpty, current.count >= Self.linesPerPage || bytes + size > Self.pageBytes {
                pages.append([])
                bytes = 0
            }
            pages[pages.count - 1].append(text)
            bytes += size
        }
        return pages
    }

    /// Page `number` (from 1) of the listing, or what to ask instead.
    func page(_ number: Int) -> String {
        let pages = pages
        guard (1...pages.count).contains(number) else {
            let range = pages.count == 1 ? "\(prefix)help lists them" : "\(prefix)help 1 to \(prefix)help \(pages.count) list them"
            return "no page \(number) of commands; \(range)"
        }
        let header = pages.count == 1 ? "Commands:" : "Commands (page \(number) of \(pages.count)):"
        var footer = "\(prefix)help <command> for one of them"
        footer += number < pages.count ? "; \(prefix)help \(number + 1) for the next page." : "."
        return ChatCommandText.fit(([header] + pages[number - 1] + [footer]).joined(separator: "\n"), bytes: Self.maxReplyBytes)
    }

    /// One command in full: usage, description, roles and cooldown.
    func detail(_ spec: ChatCommand) -> String {
        var text = line(spec, descriptionLimit: ChatCommand.maxDescription)
        if spec.cooldown > 0 { text += "; once every \(spec.cooldown.formatted()) s per member" }
        return ChatCommandText.fit(text, bytes: Self.maxReplyBytes)
    }
}

/// An error that is its message: a chat command's bad arguments, a `ctx.http` call's bad options.
struct TextError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The commands of the loaded plugins, by name, each owned by the plugin instance that declared it (and
/// removed with it).
final class ChatCommandRegistry {
    // Read for every message (`isEmpty`, `command(_:)`), on the runtime's thread only and never overlapping:
    // the dynamic exclusivity check was a measured share of a trivial hook call.
    @exclusivity(unchecked) private var commands: [String: (spec: ChatCommand, owner: Int)] = [:]
    /// Last use per command and user, for cooldowns.
    private var lastUse: [String: Double] = [:]

    /// Keeps a declaration (its description cut to `ChatCommand.maxDescription`), or says why not.
    func register(_ spec: ChatCommand, owner: Int) -> String? {
        if spec.name == "help" { return "help is the host's command" }
        if let problem = spec.problem() { return problem }
        if let existing = commands[spec.name], existing.owner != owner, existing.spec.plugin != spec.plugin {
            return "\(spec.name) is already a command of \(existing.spec.plugin)"
        }
        if commands[spec.name]?.owner != owner,
            commands.values.count(where: { $0.owner == owner }) >= ChatCommand.maxPerPlugin
        {
            return "a plugin declares at most \(ChatCommand.maxPerPlugin) commands"
        }
        commands[spec.name] = (spec.kept, owner)
        return nil
    }

    func removeAll(owner: Int) { commands = commands.filter { $0.value.owner != owner } }

    /// What is registered now, to put back if a new version of a plugin fails to load.
    func snapshot() -> [String: (spec: ChatCommand, owner: Int)] { commands }
    func restore(_ saved: [String: (spec: ChatCommand, owner: Int)]) { commands = saved }

    func command(_ name: String) -> (spec: ChatCommand, owner: Int)? { commands[name] }
    var all: [ChatCommand] { commands.values.map(\.spec).sorted { $0.name < $1.name } }
    var isEmpty: Bool { commands.isEmpty }

    /// Seconds left of `spec`'s cooldown for `user` at `now`; records a use when there are none left.
    func cooldownLeft(_ spec: ChatCommand, user: String, now: Double) -> Double? {
        guard spec.cooldown > 0 else { return nil }
        let key = spec.name + "\u{0}" + user
        if let last = lastUse[key], now - last < spec.cooldown { return spec.cooldown - (now - last) }
        if lastUse.count > 10_000 { lastUse = lastUse.filter { now - $0.value < 3600 } }
        lastUse[key] = now
        return nil
    }
}
