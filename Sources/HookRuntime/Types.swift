import Foundation
import IMCore
import Logging
import Synchronization

// MARK: - Messages

/// The host's own message type numbers. The built-in types are IMCore's `MessageType` (LeanCloud typed
/// messages); positive numbers are custom types registered by plugins, except the card's.
public enum HookMessageTypes {
    /// The standard card (`ctx.card`, see Card.swift): a positive number, reserved by the host.
    public static let card = 100

    /// Number → name of every type known without registration: `MessageType`'s and the card.
    public static let builtinNames: [Int: String] = Dictionary(
        uniqueKeysWithValues: MessageType.allCases.map { ($0.rawValue, $0.name) } + [(card, "card")])
}

/// A message as plugins see it (a Lua table with the same fields, plus
/// `type_name`). Drafts built by plugins (`ctx.reply`, `ctx.send`) have an
/// empty `id`/`from` that the host fills in.
///
/// `file` is the message's `_lcfile` as IMCore reads it; plugins see `objId` as `msg.file.id` and an empty
/// `url` (a plugin's draft that names only a stored file's id) as no `url` (LuaBridge.swift). What they see
/// besides (`mime`, `sha256`, `stored`) comes from the server's record at the time a hook runs
/// (`HookMediaSource`) and is not part of the message.
public struct HookMessage: Sendable, Hashable, Codable {
    public var id: String
    public var cid: String
    public var from: String
    public var type: Int
    public var text: String?
    public var attrs: [String: JSONValue]
    public var file: FileInfo?
    public var location: Location?
    /// Milliseconds since 1970.
    public var timestamp: Int64
    public var transient: Bool
    /// A binary message's bytes as base64 (`msg.binary`); nil for typed and text messages.
    public var binary: String?

    public init(
        id: String = "", cid: String = "", from: String = "", type: Int = MessageType.text.rawValue,
        text: String? = nil, attrs: [String: JSONValue] = [:], file: FileInfo? = nil,
        location: Location? = nil, timestamp: Int64 = 0, transient: Bool = false, binary: String? = nil
    ) {
        self.binary = binary
        self.id = id
        self.cid = cid
        self.from = from
        self.type = type
        self.text = text
        self.attrs = attrs
        self.file = file
        self.location = location
        self.timestamp = timestamp
        self.transient = transient
    }
}

/// A command message: `{action, ext, cid, from}`.
public struct HookCommand: Sendable, Hashable, Codable {
    public var action: String
    public var ext: [String: JSONValue]
    public var cid: String
    public var from: String
    public init(action: String, ext: [String: JSONValue] = [:], cid: String = "", from: String = "") {
        self.action = action
        self.ext = ext
        self.cid = cid
        self.from = from
    }
}

/// Conversation-level events fed by the host.
public enum HookEvent: Sendable, Hashable {
    /// `on_member_joined({cid, members, by, founding})`: `founding` when the members were added as the
    /// conversation was created (`conv start`), not joiners.
    case membersJoined(cid: String, members: [String], by: String?, founding: Bool = false)
    /// `on_member_left({cid, members, by})`
    case membersLeft(cid: String, members: [String], by: String?)
    /// `on_invited({cid, by})` – the bot was added to a conversation.
    case invited(cid: String, by: String?)
    /// `on_kicked({cid, by})` – the bot was removed from a conversation.
    case kicked(cid: String, by: String?)
    /// `on_conversation_updated({cid, attrs, by})`
    case conversationUpdated(cid: String, attrs: [String: JSONValue], by: String?)
    /// `on_recall({cid, id, by, timestamp})`
    case recalled(cid: String, messageID: String, by: String?, timestamp: Int64)
    /// `on_edit({cid, id, from, type, text, attrs, binary, file, timestamp, edited_at})` – a message's
    /// sender replaced its content; the event carries the new version.
    case edited(HookMessage, editedAt: Int64)

    var hookName: String {
        switch self {
        case .membersJoined: return "on_member_joined"
        case .membersLeft: return "on_member_left"
        case .invited: return "on_invited"
        case .kicked: return "on_kicked"
        case .conversationUpdated: return "on_conversation_updated"
        case .recalled: return "on_recall"
        case .edited: return "on_edit"
        }
    }

    var cid: String {
        switch self {
        case .membersJoined(let c, _, _, _), .membersLeft(let c, _, _), .invited(let c, _), .kicked(let c, _),
            .conversationUpdated(let c, _, _), .recalled(let c, _, _, _):
            return c
        case .edited(let message, _):
            return message.cid
        }
    }

    var table: JSONValue {
        switch self {
        case .membersJoined(let cid, let m, let by, let founding):
            var o: [String: JSONValue] = ["cid": .string(cid), "members": .array(m.map { .string($0) })]
            if let by { o["by"] = .string(by) }
            if founding { o["founding"] = .bool(true) }
            return .object(o)
        case .membersLeft(let cid, let m, let by):
            var o: [String: JSONValue] = ["cid": .string(cid), "members": .array(m.map { .string($0) })]
            if let by { o["by"] = .string(by) }
            return .object(o)
        case .invited(let cid, let by), .kicked(let cid, let by):
            var o: [String: JSONValue] = ["cid": .string(cid)]
            if let by { o["by"] = .string(by) }
            return .object(o)
        case .conversationUpdated(let cid, let attrs, let by):
            var o: [String: JSONValue] = ["cid": .string(cid), "attrs": .object(attrs)]
            if let by { o["by"] = .string(by) }
            return .object(o)
        case .recalled(let cid, let id, let by, let ts):
            var o: [String: JSONValue] = ["cid": .string(cid), "id": .string(id), "timestamp": .int(Int(ts))]
            if let by { o["by"] = .string(by) }
            return .object(o)
        case .edited(let m, let editedAt):
            var o: [String: JSONValue] = [
                "cid": .string(m.cid), "id": .string(m.id), "from": .string(m.from), "type": .int(m.type),
                "attrs": .object(m.attrs), "timestamp": .int(Int(m.timestamp)), "edited_at": .int(Int(editedAt)),
            ]
            if let text = m.text { o["text"] = .string(text) }
            if let binary = m.binary { o["binary"] = .string(binary) }
            // The message's own file fields (no record lookup for events): see msg.file.
            if let file = m.file { o["file"] = .object(file.hookFields) }
            return .object(o)
        }
    }
}

extension FileInfo {
    /// The message's own fields of `msg.file` as plugins see them: `objId` is `id`, an empty `url` is none.
    /// (A stored file's record adds `mime`, `sha256` and `stored`: LuaBridge.swift.)
    var hookFields: [String: JSONValue] {
        var f: [String: JSONValue] = [:]
        if let v = objId { f["id"] = .string(v) }
        if !url.isEmpty { f["url"] = .string(url) }
        if let v = name { f["name"] = .string(v) }
        if let v = format { f["format"] = .string(v) }
        if let v = size { f["size"] = .int(Int(v)) }
        if let v = width { f["width"] = .int(v) }
        if let v = height { f["height"] = .int(v) }
        if let v = duration { f["duration"] = .double(v) }
        return f
    }
}

// MARK: - Actions

public enum HookLogLevel: String, Sendable, Hashable, Codable, CaseIterable {
    case trace, debug, info, notice, warning, error, critical

    var swiftLog: Logger.Level {
        switch self {
        case .trace: return .trace
        case .debug: return .debug
        case .info: return .info
        case .notice: return .notice
        case .warning: return .warning
        case .error: return .error
        case .critical: return .critical
        }
    }
}

/// A side effect requested by a plugin. The runtime never performs network
/// actions itself; the host executes them.
public struct HookAction: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        /// Send `message` to `cid`. `replyTo` is set by `ctx.reply`.
        case send(cid: String, message: HookMessage, replyTo: String?)
        /// Send a transient message (not stored, not pushed offline).
        case sendTransient(cid: String, message: HookMessage)
        case sendCommand(cid: String, command: HookCommand)
        case recall(cid: String, messageID: String)
        /// Replace the content of the bot's own message `messageID` (sent at `timestamp`) with `message`
        /// (`ctx.card_update`: a message edit, see Edits in PROTOCOL.md).
        case edit(cid: String, messageID: String, timestamp: Int64, message: HookMessage)
        case kick(cid: String, user: String, reason: String?)
        case mute(cid: String, user: String, seconds: Int?, reason: String?)
        /// Block (`blocked`) or unblock a client in the conversation (`ctx.conv(cid).block` / `unblock`).
        case block(cid: String, user: String, blocked: Bool)
        /// Lock (`locked`: join policy `invite`) or unlock (`open`) the conversation (`ctx.conv(cid).lock` /
        /// `unlock`), with the reason outsiders' refused joins give.
        case lock(cid: String, locked: Bool, reason: String?)
        case add(cid: String, user: String)
        case warn(cid: String, user: String, reason: String?)
        case updateAttribute(cid: String, key: String, value: JSONValue)
        /// Send `message` to `user` in the bot's 1:1 (unique) conversation with them (`ctx.dm`): the host
        /// opens it the first time and remembers it (`ConversationMembers.direct(with:)`).
        case directMessage(user: String, message: HookMessage)
        /// Already written to the runtime's logger; listed for hosts and test runners.
        case log(level: HookLogLevel, message: String)

        /// The conversation the action is aimed at (nil for logs).
        public var conversation: String? {
            switch self {
            case .send(let cid, _, _), .sendTransient(let cid, _), .sendCommand(let cid, _), .recall(let cid, _),
                .edit(let cid, _, _, _),
                .kick(let cid, _, _), .mute(let cid, _, _, _), .block(let cid, _, _), .add(let cid, _), .warn(let cid, _, _),
                .updateAttribute(let cid, _, _), .lock(let cid, _, _):
                cid
            case .log, .directMessage: nil
            }
        }

        /// Whether the action sends something to a conversation (a message, a transient or cmd message,
        /// a warning).
        public var sends: Bool {
            switch self {
            case .send, .sendTransient, .sendCommand, .warn, .edit, .directMessage: true
            case .recall, .kick, .mute, .block, .lock, .add, .updateAttribute, .log: false
            }
        }
    }

    /// The plugin that requested the action.
    public var plugin: String
    public var kind: Kind

    public init(plugin: String, kind: Kind) {
        self.plugin = plugin
        self.kind = kind
    }
}

// MARK: - Webhooks

/// An HTTP request to a plugin's webhook (`POST /hooks/<plugin>/<path>`), as `on_http(req, ctx)` sees it.
public struct HookHTTPRequest: Sendable, Hashable {
    public var method: String
    /// The path after `/hooks/<plugin>` (`/` at least).
    public var path: String
    public var query: [String: String]
    /// Header names in lowercase.
    public var headers: [String: String]
    public var body: String

    public init(
        method: String = "POST", path: String = "/", query: [String: String] = [:], headers: [String: String] = [:],
        body: String = ""
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
    }
}

/// What `on_http` answered: `{status = n, body = s or table, headers = {...}}`, a string (200 with that
/// body), or nothing (204). A table body is sent as JSON.
public struct HookHTTPResponse: Sendable, Hashable {
    public var status: Int
    public var headers: [String: String]
    public var body: String

    public init(status: Int = 200, headers: [String: String] = [:], body: String = "") {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

// MARK: - Errors

/// A failure of a plugin: compile error, hook error, limit exceeded.
public struct HookError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Reason: Sendable, Hashable {
        case compile(String)
        case invalidPlugin(String)
        case runtime(String)
        case instructionBudget
        case deadline
        case memory
        /// The plugin's timers used more than their share of the Lua thread (`HookLimits.timerShare`).
        case timerBudget
        case invalidResult(String)
        case io(String)
        /// A setting in the host's configuration the plugin does not accept (`key` is its dotted path).
        case config(key: String, message: String)
    }

    public var plugin: String
    /// The hook that failed (`"load"` for compilation/`on_load`).
    public var hook: String
    /// Script and line from the Lua error position, when known.
    public var source: String?
    public var line: Int?
    public var reason: Reason

    public init(plugin: String, hook: String, source: String? = nil, line: Int? = nil, reason: Reason) {
        self.plugin = plugin
        self.hook = hook
        self.source = source
        self.line = line
        self.reason = reason.cut()
    }

    public var message: String {
        switch reason {
        case .compile(let m): return "compile error: \(m)"
        case .invalidPlugin(let m): return "invalid plugin: \(m)"
        case .runtime(let m): return m
        case .instructionBudget: return "instruction budget exceeded"
        case .deadline: return "deadline exceeded"
        case .memory: return "memory limit exceeded"
        case .timerBudget: return "timers used more than their share of time; the rest of this second's timers were put off"
        case .invalidResult(let m): return "invalid result: \(m)"
        case .io(let m): return m
        case .config(let key, let m): return "\(key): \(m)"
        }
    }

    public var description: String {
        var s = "plugin \(plugin) \(hook)"
        if let source, let line { s += " at \(source):\(line)" } else if let line { s += " at line \(line)" }
        return s + ": " + message
    }
}

// MARK: - Outcomes

public enum ModerationVerdict: Sendable, Hashable {
    case allow
    /// `code` is an optional application error code; `silent` means the sender
    /// is not told (the message looks sent to them).
    case block(reason: String?, code: Int?, silent: Bool)
    case replace(text: String)
}

public struct ModerationOutcome: Sendable, Hashable {
    public var verdict: ModerationVerdict
    /// The plugin whose verdict won (nil for allow).
    public var decidedBy: String?
    public var actions: [HookAction]
    public var errors: [HookError]
}

public struct BeforeSendOutcome: Sendable, Hashable {
    /// The message to send (possibly modified); nil if dropped.
    public var message: HookMessage?
    public var dropped: (plugin: String, reason: String?)? { droppedBy.map { ($0, dropReason) } }
    public var droppedBy: String?
    public var dropReason: String?
    public var actions: [HookAction]
    public var errors: [HookError]
}

public struct TranslationOutcome: Sendable, Hashable {
    public var text: String?
    /// Plugin that produced the translation (nil when none did).
    public var plugin: String?
    public var cached: Bool
    public var actions: [HookAction]
    public var errors: [HookError]
}

/// Result of hooks that all run (`on_receive`, `on_cmd`, events, timers).
public struct HookResult: Sendable, Hashable {
    public var actions: [HookAction]
    public var errors: [HookError]
    public init(actions: [HookAction] = [], errors: [HookError] = []) {
        self.actions = actions
        self.errors = errors
    }
}

/// Result of the incoming pipeline: moderation, then `on_receive` unless blocked.
public struct IncomingOutcome: Sendable, Hashable {
    public var moderation: ModerationOutcome
    /// The message as delivered to `on_receive` (text replaced if so decided); nil if blocked.
    public var delivered: HookMessage?
    public var actions: [HookAction]
    public var errors: [HookError]
}

// MARK: - Limits, clock, status

public struct HookLimits: Sendable, Hashable {
    /// Lua VM instructions per hook call (0 = unlimited).
    public var instructionBudget: Int = 10_000_000
    /// Wall-clock deadline per hook call, in seconds (0 = none).
    public var deadline: Double = 0.25
    /// Deadline for compiling a plugin and running `on_load`/`on_unload`.
    public var loadDeadline: Double = 2.0
    /// Memory cap per plugin state, in bytes (0 = unlimited).
    public var memoryBytes: Int = 32 * 1024 * 1024
    /// Consecutive failures after which a plugin is disabled until reloaded.
    public var breakerThreshold: Int = 5
    /// When true, a failing moderation hook blocks the message.
    public var moderationFailClosed: Bool = false
    /// Instructions between two checks of the budget and deadline.
    public var checkInterval: Int = 1000
    /// Seconds of each second one plugin's timers may take together (0 = no limit). Beyond it the
    /// plugin's remaining due timers wait for the next second, and the overrun counts as a failure.
    public var timerShare: Double = 0.1
    /// The caps of `ctx.matcher` and `ctx.text` (keywords, regular expressions and their limits, text size).
    public var matcher = TextMatcherLimits()

    public init(
        instructionBudget: Int = 10_000_000, deadline: Double = 0.25, loadDeadline: Double = 2.0,
        memoryBytes: Int = 32 * 1024 * 1024, breakerThreshold: Int = 5,
        moderationFailClosed: Bool = false, checkInterval: Int = 1000, timerShare: Double = 0.1
    ) {
        self.instructionBudget = instructionBudget
        self.deadline = deadline
        self.loadDeadline = loadDeadline
        self.memoryBytes = memoryBytes
        self.breakerThreshold = breakerThreshold
        self.moderationFailClosed = moderationFailClosed
        self.checkInterval = checkInterval
        self.timerShare = timerShare
    }

    public static let `default` = HookLimits()
}

/// The runtime's notion of "now" (seconds since 1970) for timers and state TTLs.
public struct HookClock: Sendable {
    public let now: @Sendable () -> Double
    public init(now: @escaping @Sendable () -> Double) { self.now = now }
    public static let system = HookClock { Date().timeIntervalSince1970 }
}

/// A clock that only moves when told to (tests, plugin test runner).
public final class ManualClock: Sendable {
    private let current: Mutex<Double>
    public init(_ start: Double = 1_700_000_000) { current = Mutex(start) }
    public var now: Double { current.withLock { $0 } }
    public func advance(by seconds: Double) { current.withLock { $0 += seconds } }
    public func set(_ t: Double) { current.withLock { $0 = t } }
    public var clock: HookClock { HookClock { [self] in self.now } }
}

public struct PluginStatus: Sendable, Hashable {
    public enum State: String, Sendable, Hashable { case loaded, disabled, failed }
    /// Who disabled a plugin: the circuit breaker (until reloaded) or an admin (until enabled).
    public enum DisabledBy: String, Sendable, Hashable { case breaker, admin }
    public var name: String
    public var path: String
    public var priority: Int
    public var state: State
    public var disabledBy: DisabledBy?
    /// Consecutive failures (reset by a successful call).
    public var consecutiveFailures: Int
    public var totalFailures: Int
    public var lastError: HookError?
    /// How many times this plugin has been (re)loaded.
    public var generation: Int
    public var hooks: [String]
    public var timers: Int
    public var memoryBytes: Int
    /// Times the circuit breaker disabled the plugin.
    public var breakerTrips: Int
    /// Calls and time per hook, for hooks called at least once.
    public var usage: [HookUsage]
    /// The plugin's HTTP calls (`ctx.http`).
    public var http: HTTPUsage = .init()
}
