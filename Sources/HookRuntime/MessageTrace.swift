import Foundation
import Synchronization

/// The path one message took through a bot, for people asking "why was this blocked?": the interceptor
/// review (when it was asked and how long it took), each plugin hook that ran with its verdict or change
/// and its time, the actions sent back, and what was skipped (a reply refused by the loop guard, the rate
/// limit or a command's cooldown).
///
/// A host that wants traces makes one per message and runs the message's work inside
/// `MessageTrace.$current.withValue(trace) { … }`; the plugin engine and the routing core add their steps
/// to `current` when there is one (one task-local read per hook chain when there is none). A trace keeps
/// at most `maxSteps` steps of at most `maxText` characters each, so a busy plugin cannot make it grow.
public final class MessageTrace: Sendable {
    /// The trace the work of the current task belongs to, if the host traces it.
    @TaskLocal public static var current: MessageTrace?

    /// Most steps one trace keeps (later ones are counted in `dropped`).
    public static let maxSteps = 64
    /// Most characters of a message's text or a step's text kept.
    public static let maxText = 300
    /// Steps a new trace has room for before its array grows.
    static let initialSteps = 10

    /// One thing that happened to the message.
    public struct Step: Sendable, Codable, Hashable {
        public enum Kind: String, Sendable, Codable {
            /// The server asked the bot (as its interceptor) to review the message before delivery.
            case review
            /// A plugin's hook ran (`plugin`, `hook`, `micros`; `text` is its verdict or change, if any).
            case hook
            /// The verdict the message got (moderation or `before_send`).
            case verdict
            /// The message went on to `on_receive` (after moderation and translation).
            case delivered
            /// An action a plugin asked for was carried out (a mute, a warning, a kick…).
            case action
            /// The bot sent a message (a reply, a warning) or a cmd message.
            case sent
            /// Something was not done: a reply refused by the loop guard, the rate limit, a cooldown…
            case skipped
            /// A hook or an action failed.
            case error
        }
        public var kind: Kind
        /// Milliseconds since the trace started.
        public var at: Double
        public var plugin: String?
        public var hook: String?
        /// How long the hook ran, in microseconds (hooks and reviews).
        public var micros: Int?
        public var text: String
    }

    /// What a trace holds, as the console shows it.
    public struct Snapshot: Sendable, Codable, Hashable {
        /// The trace's number (increasing per store).
        public var id: Int
        /// The message's id; empty while only reviewed (a message the review dropped never gets one).
        public var messageId: String
        public var cid: String
        public var from: String
        /// The message's text (cut to `maxText`), or its type's name for typed messages without text.
        public var text: String
        /// When the trace started (milliseconds since 1970).
        public var time: Int64
        /// Whether the message was kept from the conversation (blocked, dropped, muted).
        public var blocked: Bool
        /// Why, when it was (the reason the sender got).
        public var reason: String?
        /// The plugin that decided it, when one did.
        public var decidedBy: String?
        /// The verdict the message got (review or moderation), when it got one.
        public var verdict: String?
        /// Whether the server asked the bot to review it before delivery (the bot is its interceptor).
        public var reviewed: Bool
        public var steps: [Step]
        /// Steps not kept (over `maxSteps`).
        public var dropped: Int
    }

    private struct State {
        var snapshot: Snapshot
        var started: UInt64
    }

    private let state: Mutex<State>

    public init(messageID: String, cid: String, from: String, text: String, time: Date = Date()) {
        // A reviewed and answered message takes about eight steps: room for them at once, instead of the array
        // growing four times.
        var steps: [Step] = []
        steps.reserveCapacity(Self.initialSteps)
        state = Mutex(
            State(
                snapshot: Snapshot(
                    id: 0, messageId: messageID, cid: cid, from: from, text: Self.cut(text),
                    time: Int64(time.timeIntervalSince1970 * 1000), blocked: false, reason: nil, decidedBy: nil, verdict: nil,
                    reviewed: false, steps: steps,
                    dropped: 0),
                started: DispatchTime.now().uptimeNanoseconds))
    }

    /// What the trace holds now.
    public var snapshot: Snapshot { state.withLock { $0.snapshot } }

    /// Numbers the trace (done once by the store that keeps it).
    public func number(_ id: Int) { state.withLock { $0.snapshot.id = id } }

    /// Sets the message's id (a reviewed message once it is delivered).
    public func identify(messageID: String) { state.withLock { $0.snapshot.messageId = messageID } }

    /// Adds the verdict the message got (what the trace list shows).
    public func verdict(_ text: String, plugin: String? = nil) {
        state.withLock { $0.snapshot.verdict = Self.cut(text) }
        add(.verdict, plugin: plugin, text)
    }

    /// Adds a review step: the server asked the bot to review the message.
    public func reviewed(micros: Int? = nil, _ text: String) {
        state.withLock { $0.snapshot.reviewed = true }
        add(.review, micros: micros, text)
    }

    /// Marks the message as kept from the conversation, and why.
    public func block(reason: String?, by plugin: String?) {
        state.withLock {
            $0.snapshot.blocked = true
            if $0.snapshot.reason == nil { $0.snapshot.reason = reason.map { Self.cut($0) } }
            if $0.snapshot.decidedBy == nil { $0.snapshot.decidedBy = plugin }
        }
    }

    /// Adds a step (dropped, and counted, past `maxSteps`).
    public func add(_ kind: Step.Kind, plugin: String? = nil, hook: String? = nil, micros: Int? = nil, _ text: String) {
        let now = DispatchTime.now().uptimeNanoseconds
        state.withLock {
            guard $0.snapshot.steps.count < Self.maxSteps else {
                $0.snapshot.dropped += 1
                return
            }
            let at = Double(now &- $0.started) / 1_000_000
            $0.snapshot.steps.append(
                Step(kind: kind, at: (at * 1000).rounded() / 1000, plugin: plugin, hook: hook, micros: micros, text: Self.cut(text)))
        }
    }

    /// Records one plugin's hook call: how long it ran (`nanos`), what it decided (`outcome`, nil for
    /// nothing), the actions it asked for and its failure.
    func hook(_ plugin: String, _ hook: String, nanos: UInt64, outcome: String?, actions: [HookAction], error: HookError?) {
        var parts: [String] = []
        if let outcome { parts.append(outcome) }
        if !actions.isEmpty { parts.append("asked for " + actions.map { Self.name(of: $0.kind) }.joined(separator: ", ")) }
        if let error { parts.append("failed: \(error.message)") }
        add(
            error == nil ? .hook : .error, plugin: plugin, hook: hook, micros: Int(nanos / 1000),
            parts.isEmpty ? "no verdict" : parts.joined(separator: "; "))
    }

    /// What a hook chain's value (the one that ended it) says, for a trace: a moderation or membership
    /// verdict, a `before_send` drop, a translation.
    static func describe(_ value: Any, hook: HookName) -> String? {
        switch hook {
        case .beforeSend:
            let reason = value as? String
            return reason.map { $0.isEmpty ? "drop" : "drop: \($0)" } ?? "drop"
        case .translate:
            return (value as? String).map { "translated: \($0)" }
        default:
            guard let verdict = value as? ModerationVerdict else { return nil }
            switch verdict {
            case .allow: return "allow"
            case .replace(let text): return "replace with \"\(text)\""
            case .block(let reason, let code, let silent):
                var said = "block"
                if let reason { said += ": \(reason)" }
                if let code { said += " (appCode \(code))" }
                if silent { said += " (silent)" }
                return said
            }
        }
    }

    /// A short name for an action (`reply`, `mute`, …).
    public static func name(of kind: HookAction.Kind) -> String {
        switch kind {
        case .send: "reply"
        case .sendTransient: "transient message"
        case .sendCommand: "cmd message"
        case .recall: "recall"
        case .kick: "kick"
        case .mute(_, _, let seconds, _): seconds == 0 ? "unmute" : "mute"
        case .block(_, _, let blocked): blocked ? "block" : "unblock"
        case .lock(_, let locked, _): locked ? "lock" : "unlock"
        case .add: "add"
        case .warn: "warn"
        case .updateAttribute: "attribute update"
        case .log: "log"
        default: "action"
        }
    }

    static func cut(_ text: String) -> String {
        // A string has at least as many UTF-8 bytes as characters: most texts are found short without counting
        // their characters (grapheme breaking, a measured share of every step a trace adds).
        guard text.utf8.count > maxText, text.count > maxText else { return text }
        return String(text.prefix(maxText - 1)) + "…"
    }
}
