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
/// at most `maxSteps` steps of at most `maxText` characters each, so a busy plugin cannot make it grow. A step
/// keeps its parts (`Detail`) and its text is made when the trace is read (`snapshot`): most traces never are.
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

    /// A step as kept: its parts (`detail`), formatted into `Step.text` only when the trace is read.
    struct Entry: Sendable {
        var kind: Step.Kind
        var at: Double
        var plugin: String?
        var hook: String?
        var micros: Int?
        var detail: Detail

        var step: Step { Step(kind: kind, at: at, plugin: plugin, hook: hook, micros: micros, text: MessageTrace.cut(detail.text)) }
    }

    private struct State {
        /// The trace's facts; its `steps` and `verdict` stay empty here (they are `entries` and `verdict`).
        var heading: Snapshot
        var entries: [Entry]
        var verdict: Detail?
        var started: UInt64
    }

    private let state: Mutex<State>

    public init(messageID: String, cid: String, from: String, text: String, time: Date = Date()) {
        // A reviewed and answered message takes about eight steps: room for them at once, instead of the array
        // growing four times.
        var entries: [Entry] = []
        entries.reserveCapacity(Self.initialSteps)
        state = Mutex(
            State(
                heading: Snapshot(
                    id: 0, messageId: messageID, cid: cid, from: from, text: Self.cut(text),
                    time: Int64(time.timeIntervalSince1970 * 1000), blocked: false, reason: nil, decidedBy: nil, verdict: nil,
                    reviewed: false, steps: [],
                    dropped: 0),
                entries: entries, verdict: nil, started: DispatchTime.now().uptimeNanoseconds))
    }

    /// What the trace holds now, its texts formatted (outside the lock: the bot's thread may be adding a step).
    public var snapshot: Snapshot {
        let (heading, entries, verdict) = state.withLock { ($0.heading, $0.entries, $0.verdict) }
        var snapshot = heading
        snapshot.verdict = verdict.map { Self.cut($0.text) }
        snapshot.steps = entries.map(\.step)
        return snapshot
    }

    /// What the trace list filters on, without formatting any text.
    public struct Heading: Sendable, Hashable {
        public var id: Int
        public var messageId: String
        public var cid: String
        public var blocked: Bool
        /// Whether the message got a verdict (`Snapshot.verdict` is not nil).
        public var hasVerdict: Bool
    }

    /// The trace's number, message id, conversation, whether it was blocked and whether it has a verdict.
    public var heading: Heading {
        state.withLock {
            Heading(
                id: $0.heading.id, messageId: $0.heading.messageId, cid: $0.heading.cid, blocked: $0.heading.blocked,
                hasVerdict: $0.verdict != nil)
        }
    }

    /// Numbers the trace (done once by the store that keeps it).
    public func number(_ id: Int) { state.withLock { $0.heading.id = id } }

    /// Sets the message's id (a reviewed message once it is delivered).
    public func identify(messageID: String) { state.withLock { $0.heading.messageId = messageID } }

    /// Adds the verdict the message got (what the trace list shows).
    public func verdict(_ text: String, plugin: String? = nil) {
        verdict(.text(text), plugin: plugin)
    }

    /// Adds the verdict the message got, as its parts (each string part cut to `maxText`).
    public func verdict(_ detail: Detail, plugin: String? = nil) {
        state.withLock { $0.verdict = detail }
        add(.verdict, plugin: plugin, detail)
    }

    /// Adds a review step: the server asked the bot to review the message.
    public func reviewed(micros: Int? = nil, _ text: String) {
        reviewed(micros: micros, .text(text))
    }

    /// Adds a review step, as its parts.
    public func reviewed(micros: Int? = nil, _ detail: Detail) {
        state.withLock { $0.heading.reviewed = true }
        add(.review, micros: micros, detail)
    }

    /// Marks the message as kept from the conversation, and why.
    public func block(reason: String?, by plugin: String?) {
        state.withLock {
            $0.heading.blocked = true
            if $0.heading.reason == nil { $0.heading.reason = reason.map { Self.cut($0) } }
            if $0.heading.decidedBy == nil { $0.heading.decidedBy = plugin }
        }
    }

    /// Adds a step (dropped, and counted, past `maxSteps`).
    public func add(_ kind: Step.Kind, plugin: String? = nil, hook: String? = nil, micros: Int? = nil, _ text: String) {
        add(kind, plugin: plugin, hook: hook, micros: micros, .text(text))
    }

    /// Adds a step as its parts (dropped, and counted, past `maxSteps`); its text is made when the trace is read.
    /// `Detail`'s makers cut every string part to `maxText`, so a plugin's long text is not kept whole.
    public func add(_ kind: Step.Kind, plugin: String? = nil, hook: String? = nil, micros: Int? = nil, _ detail: Detail) {
        let now = DispatchTime.now().uptimeNanoseconds
        state.withLock {
            guard $0.entries.count < Self.maxSteps else {
                $0.heading.dropped += 1
                return
            }
            let at = Double(now &- $0.started) / 1_000_000
            $0.entries.append(
                Entry(kind: kind, at: (at * 1000).rounded() / 1000, plugin: plugin, hook: hook, micros: micros, detail: detail))
        }
    }

    /// Records one plugin's hook call: how long it ran (`nanos`), what it decided (`outcome`, nil for
    /// nothing), the actions it asked for and its failure.
    func hook(_ plugin: String, _ hook: String, nanos: UInt64, outcome: Outcome?, actions: [HookAction], error: HookError?) {
        // One action's name is a literal (nothing to allocate); several are joined now, not kept as the plugin's array.
        let asked: String? =
            switch actions.count {
            case 0: nil
            case 1: Self.name(of: actions[0].kind)
            default: Self.cut(actions.map { Self.name(of: $0.kind) }.joined(separator: ", "))
            }
        add(
            error == nil ? .hook : .error, plugin: plugin, hook: hook, micros: Int(nanos / 1000),
            .hook(outcome: outcome, asked: asked, error: error.map { Self.cut($0.message) }))
    }

    /// What a hook chain's value (the one that ended it) says, for a trace: a moderation or membership
    /// verdict, a `before_send` drop, a translation (its strings cut to `maxText`).
    static func describe(_ value: Any, hook: HookName) -> Outcome? {
        switch hook {
        case .beforeSend:
            return .drop(reason: (value as? String).map { Self.cut($0) })
        case .translate:
            return (value as? String).map { .translated(Self.cut($0)) }
        default:
            guard let verdict = value as? ModerationVerdict else { return nil }
            switch verdict {
            case .allow: return .verdict(.allow)
            case .replace(let text): return .verdict(.replace(text: Self.cut(text)))
            case .block(let reason, let code, let silent):
                return .verdict(.block(reason: reason.map { Self.cut($0) }, code: code, silent: silent))
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

    /// `text`, or its first `maxText` - 1 characters and "…" when it is longer. Cutting a step's string parts
    /// before its text is made gives the same text as cutting the text: a cut part still reaches past `maxText`.
    public static func cut(_ text: String) -> String {
        // A string has at least as many UTF-8 bytes as characters: most texts are found short without counting
        // their characters (grapheme breaking, a measured share of every step a trace adds).
        guard text.utf8.count > maxText, text.count > maxText else { return text }
        return String(text.prefix(maxText - 1)) + "…"
    }
}
