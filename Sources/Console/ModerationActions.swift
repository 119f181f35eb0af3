import BotHost
import Foundation
import HookRuntime
import Hummingbird
import IMCore
import IMServer
import Synchronization

/// The console's moderation page (docs/CONSOLE.md, "Moderation"): the actions the moderation plugins
/// recorded through `plugins/lib/modlog.lua` (their state key `modlog`), filtered here, and their undo
/// carried out as a moderator would: the entry's `undo` command run as `ChatCommandSettings.consoleID`.
final class ModerationActions: Sendable {
    /// Where the console records undone actions (host state, not a plugin's).
    static let statePlugin = "hookbot.console"
    /// Undo records are kept this long.
    static let undoneTTL: Double = 90 * 86400
    static let defaultLimit = 100
    static let maxLimit = 500

    /// Entries being undone now (a second click waits for the first to finish).
    let undoing = Mutex<Set<String>>([])

    /// One entry as the page shows it.
    struct Entry: Encodable {
        /// `<plugin>:<n>`; absent for entries recorded before modlog gave ids (they cannot be undone here).
        var id: String?
        var plugin: String
        var at: Double
        var action: String
        var target: String?
        var cid: String?
        var rule: String?
        var reason: String?
        var by: String?
        var undo: String?
        var dryRun: Bool
        /// The entry's other fields (an appeal's number, a report's id…).
        var extra: [String: JSONValue]
        var undone: Undone?

        struct Undone: Codable {
            var by: String
            var at: Double
            var command: String
            var replies: [String]
        }

        static let known: Set<String> = ["id", "plugin", "at", "action", "target", "cid", "rule", "reason", "by", "undo", "dry_run"]

        init?(_ value: JSONValue, plugin: String) {
            guard case .object(let fields) = value else { return nil }
            func text(_ key: String) -> String? {
                switch fields[key] {
                case .string(let s)?: s
                case .int(let i)?: String(i)
                case .double(let d)?: String(d)
                default: nil
                }
            }
            self.plugin = plugin
            id = fields["id"]?.intValue.map { "\(plugin):\($0)" }
            at = fields["at"]?.doubleValue ?? 0
            action = text("action") ?? "action"
            target = text("target")
            cid = text("cid")
            rule = text("rule")
            reason = text("reason")
            by = text("by")
            undo = text("undo")
            dryRun = fields["dry_run"]?.boolValue ?? false
            extra = fields.filter { !Self.known.contains($0.key) }
        }

        /// The kinds of action an entry records, lowercased: "block + mute 10 min + strike 2" is block, mute
        /// and strike; "dryrun on" is dryrun.
        var actionNames: [String] {
            var names: [String] = []
            for part in action.lowercased().components(separatedBy: " + ") {
                for piece in part.components(separatedBy: ", ") {
                    if let word = piece.split(separator: " ").first { names.append(String(word)) }
                }
            }
            return names
        }

        /// The text free-text search looks in.
        var searchable: String {
            ([action, target, cid, rule, reason, by, undo, plugin].compactMap { $0 } + extra.values.compactMap(\.stringValue))
                .joined(separator: " ").lowercased()
        }
    }

    struct Filter {
        var plugin: String?
        var action: String?
        var target: String?
        var cid: String?
        var rule: String?
        var dryRun: Bool?
        var since: Double?
        var until: Double?
        var text: String?
        var limit = ModerationActions.defaultLimit

        /// Reads the query; a malformed value is a reason (400).
        init(_ request: Request) throws(FilterError) {
            let query = request.uri.queryParameters
            func value(_ key: String) -> String? { query.get(key).flatMap { $0.isEmpty ? nil : $0 } }
            plugin = value("plugin")
            action = value("action")?.lowercased()
            target = value("target")
            cid = value("cid")
            rule = value("rule")
            text = value("q")?.lowercased()
            if let raw = value("dry_run") {
                guard raw == "true" || raw == "false" else { throw FilterError("dry_run must be true or false") }
                dryRun = raw == "true"
            }
            for key in ["since", "until"] {
                guard let raw = value(key) else { continue }
                guard let seconds = Double(raw), seconds.isFinite, seconds >= 0 else {
                    throw FilterError("\(key) must be a time in seconds since 1970")
                }
                if key == "since" { since = seconds } else { until = seconds }
            }
            if let raw = value("limit") {
                guard let number = Int(raw), (1...ModerationActions.maxLimit).contains(number) else {
                    throw FilterError("limit must be between 1 and \(ModerationActions.maxLimit)")
                }
                limit = number
            }
        }

        func matches(_ e: Entry) -> Bool {
            if let plugin, e.plugin != plugin { return false }
            if let action, !e.actionNames.contains(action) { return false }
            if let target, e.target != target { return false }
            if let cid, e.cid != cid { return false }
            if let rule, e.rule != rule { return false }
            if let dryRun, e.dryRun != dryRun { return false }
            if let since, e.at < since { return false }
            if let until, e.at > until { return false }
            if let text, !e.searchable.contains(text) { return false }
            return true
        }
    }

    struct FilterError: Error {
        var reason: String
        init(_ reason: String) { self.reason = reason }
    }

    /// `{"actions": [Entry], "total": N, "plugins": [names], "actionNames": [names], "now": seconds}`.
    struct ListView: Encodable {
        var actions: [Entry]
        var total: Int
        var plugins: [String]
        var actionNames: [String]
        var now: Double
    }

    /// Every plugin's recorded actions, newest first, with what the console undid.
    func all(_ runtime: PluginRuntime) async throws -> [Entry] {
        let store = runtime.store
        let now = runtime.clock.now()
        var entries: [Entry] = []
        for status in await runtime.plugins {
            guard case .array(let list)? = try store.get(plugin: status.name, key: "modlog", now: now) else { continue }
            entries += list.compactMap { Entry($0, plugin: status.name) }
        }
        for index in entries.indices {
            guard let id = entries[index].id,
                let record = try store.get(plugin: Self.statePlugin, key: "undone:\(id)", now: now)
            else { continue }
            entries[index].undone = try? JSONDecoder().decode(Entry.Undone.self, from: Data(record.jsonString().utf8))
        }
        return entries.enumerated().sorted { a, b in
            a.element.at != b.element.at ? a.element.at > b.element.at : a.offset > b.offset
        }.map(\.element)
    }

    /// `GET /api/moderation/actions`.
    func list(_ request: Request, _ runtime: PluginRuntime) async -> Response {
        let filter: Filter
        do throws(FilterError) { filter = try Filter(request) } catch { return HTTPJSON.error(.badRequest, error.reason) }
        do {
            let entries = try await all(runtime)
            let matched = entries.filter(filter.matches)
            return HTTPJSON.response(
                .ok,
                ListView(
                    actions: Array(matched.prefix(filter.limit)), total: matched.count,
                    plugins: Set(entries.map(\.plugin)).sorted(),
                    actionNames: Set(entries.flatMap(\.actionNames)).sorted(),
                    now: runtime.clock.now()))
        } catch {
            return HTTPJSON.error(.internalServerError, "the moderation log could not be read: \(error)")
        }
    }

    /// `{"id", "command", "replies": [text], "undone": Undone}`.
    struct UndoView: Encodable {
        var id: String
        var command: String
        var replies: [String]
        var undone: Entry.Undone
    }

    /// `POST /api/moderation/actions/{id}/undo`: runs the entry's undo command as the console's identity,
    /// in the entry's conversation; what the command answers comes back here instead of the chat, every
    /// other action it takes (an unmute on the server, a member added back, the mod-log entry of the undo
    /// itself) is carried out as for a moderator's command.
    func undo(id: String, _ target: Console.Target, logs: LogBuffer) async -> Response {
        guard undoing.withLock({ $0.insert(id).inserted }) else {
            return HTTPJSON.error(.conflict, "action \(id) is being undone now")
        }
        defer { _ = undoing.withLock { $0.remove(id) } }
        let runtime = target.bot.runtime
        let entries: [Entry]
        do { entries = try await all(runtime) } catch {
            return HTTPJSON.error(.internalServerError, "the moderation log could not be read: \(error)")
        }
        guard let entry = entries.first(where: { $0.id == id }) else {
            return HTTPJSON.error(.notFound, "no moderation action \(id) (the log keeps each plugin's newest entries)")
        }
        if let undone = entry.undone {
            return HTTPJSON.error(.conflict, "action \(id) was undone already by \(undone.by) (\(undone.command))")
        }
        if entry.dryRun { return HTTPJSON.error(.conflict, "action \(id) was a dry run: nothing was done, nothing to undo") }
        guard let command = entry.undo, !command.isEmpty else {
            return HTTPJSON.error(.conflict, "action \(id) (\(entry.action)) has no undo")
        }
        let prefix = target.bot.configuration.commands.prefix
        guard command.hasPrefix(prefix) else {
            return HTTPJSON.error(.conflict, "the undo of \(id) is not a command but advice for people: \(command)")
        }
        let messageID = "console-undo-\(UUID().uuidString)"
        let message = HookMessage(
            id: messageID, cid: entry.cid ?? target.lobbyID ?? "", from: ChatCommandSettings.consoleID, text: command,
            timestamp: Int64(Date().timeIntervalSince1970 * 1000))
        guard let result = await runtime.runCommand(message) else {
            return HTTPJSON.error(.conflict, "no loaded plugin declares the command of \(command) (is \(entry.plugin) loaded?)")
        }
        if let failure = result.errors.first {
            await target.bot.router.finish(HookResult(actions: [], errors: result.errors))
            return HTTPJSON.error(.internalServerError, "\(command) failed: \(failure.message)")
        }
        var replies: [String] = []
        var actions: [HookAction] = []
        for action in result.actions {
            if case .send(_, let reply, let replyTo) = action.kind, replyTo == messageID {
                replies.append(reply.text ?? "")
            } else {
                actions.append(action)
            }
        }
        await target.bot.router.finish(HookResult(actions: actions))
        let undone = Entry.Undone(by: "console", at: runtime.clock.now(), command: command, replies: replies)
        do {
            let record = try JSONValue(parsing: String(decoding: JSONEncoder().encode(undone), as: UTF8.self))
            try runtime.store.set(
                plugin: Self.statePlugin, key: "undone:\(id)", value: record, ttl: Self.undoneTTL, now: runtime.clock.now())
        } catch {
            return HTTPJSON.error(.internalServerError, "\(command) ran, but the undo could not be recorded: \(error)")
        }
        logs.append(
            level: .info, message: "moderation action undone by console",
            metadata: ["id": id, "command": command, "reply": replies.joined(separator: " / ")])
        return HTTPJSON.response(.ok, UndoView(id: id, command: command, replies: replies, undone: undone))
    }
}
