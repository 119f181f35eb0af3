extension MessageTrace {
    /// What a step says, kept as its parts (which plugin's verdict, the reply's text, a number of hops…) and made into
    /// `Step.text` only when the console reads the trace. A traced message used to make about ten such texts by
    /// interpolation, each then freed 500 messages later, and few traces are ever read.
    ///
    /// Made only by the static functions below, which cut every string part to `maxText` (an O(1) check for most
    /// strings): a plugin's long text is not kept whole. A step keeps at most four such parts (an action: its name,
    /// conversation, user and reason), so up to about four times `maxText` characters where it used to keep one cut
    /// text (a trace still holds at most `maxSteps` steps).
    /// The text made from the parts is cut again, and is the same as cutting the whole text was: a part that was
    /// cut still reaches past `maxText` in it.
    public struct Detail: Sendable, Hashable {
        let parts: Parts

        enum Parts: Sendable, Hashable {
            case text(String)
            case reviewAsked(kind: String, budget: String)
            case reviewAnswered(verdict: String, reason: String?)
            case deliveredAs(messageID: String)
            case hook(outcome: Outcome?, asked: String?, error: String?)
            case receives(text: String?, type: Int)
            case sent(transient: Bool, cid: String, text: String)
            case notSent(text: String, by: String, reason: String?)
            case loopGuard(hops: Int)
            case replaced(text: String)
            case blocked(by: String?, reason: String?, code: Int?, silent: Bool)
            case dropped(by: String?, reason: String?)
            // Rare (a plugin's mute, kick, warning…) and the largest: boxed, so the other steps stay small.
            indirect case action(what: String, cid: String, target: ActionTarget)
        }

        /// A text made already (for rare steps, where making it later saves nothing).
        public static func text(_ text: String) -> Detail { Detail(parts: .text(cut(text))) }

        /// "the server asked for a review (message, budget 200 ms)"
        public static func reviewAsked(kind: String, budget: String) -> Detail {
            Detail(parts: .reviewAsked(kind: cut(kind), budget: cut(budget)))
        }

        /// "answered drop: spam" (the verdict's name and its reason, if any).
        public static func reviewAnswered(verdict: String, reason: String?) -> Detail {
            Detail(parts: .reviewAnswered(verdict: cut(verdict), reason: reason.map { cut($0) }))
        }

        /// "delivered as <message id>" (a reviewed message's delivery continues its trace).
        public static func deliveredAs(_ messageID: String) -> Detail { Detail(parts: .deliveredAs(messageID: cut(messageID))) }

        /// "on_receive gets "<text>"" (or the type's number, for a message without text).
        public static func receives(text: String?, type: Int) -> Detail {
            Detail(parts: .receives(text: text.map { cut($0) }, type: type))
        }

        /// "message to <cid>: "<text>"" or "transient message to …".
        public static func sent(transient: Bool, cid: String, text: String) -> Detail {
            Detail(parts: .sent(transient: transient, cid: cut(cid), text: cut(text)))
        }

        /// ""<text>" not sent: <by> (<reason>)": a reply held back, by what (loop guard, rate limit…) and why.
        public static func notSent(text: String, by: String, reason: String?) -> Detail {
            Detail(parts: .notSent(text: cut(text), by: cut(by), reason: reason.map { cut($0) }))
        }

        /// "not answered (loop guard): it carries <hops> bot hops, …"
        public static func loopGuard(hops: Int) -> Detail { Detail(parts: .loopGuard(hops: hops)) }

        /// The routing verdict "text replaced with "<text>"".
        public static func replaced(text: String) -> Detail { Detail(parts: .replaced(text: cut(text))) }

        /// The routing verdict "blocked by <plugin or moderation>: <reason> (appCode <code>); the sender is not told".
        public static func blocked(by plugin: String?, reason: String?, code: Int?, silent: Bool) -> Detail {
            Detail(parts: .blocked(by: plugin.map { cut($0) }, reason: reason.map { cut($0) }, code: code, silent: silent))
        }

        /// The routing verdict "dropped by <plugin or before_send>: <reason>".
        public static func dropped(by plugin: String?, reason: String?) -> Detail {
            Detail(parts: .dropped(by: plugin.map { cut($0) }, reason: reason.map { cut($0) }))
        }

        /// "<what> in <cid> (<user>, <seconds> s: <reason>)": an action a plugin asked for, carried out.
        public static func action(_ what: String, in cid: String, _ action: HookAction) -> Detail {
            Detail(parts: .action(what: cut(what), cid: cut(cid), target: ActionTarget(action.kind)))
        }

        /// One hook call's outcome, the actions it asked for (one name, or several joined) and its failure.
        static func hook(outcome: Outcome?, asked: String?, error: String?) -> Detail {
            Detail(parts: .hook(outcome: outcome, asked: asked.map { cut($0) }, error: error.map { cut($0) }))
        }

        /// The step's text (not cut: `Entry.step` cuts it).
        var text: String {
            switch parts {
            case .text(let text): text
            case .reviewAsked(let kind, let budget): "the server asked for a review (\(kind), budget \(budget))"
            case .reviewAnswered(let verdict, let reason): "answered \(verdict)" + (reason.map { ": \($0)" } ?? "")
            case .deliveredAs(let id): "delivered as \(id)"
            case .hook(let outcome, let asked, let error):
                {
                    var parts: [String] = []
                    if let outcome { parts.append(outcome.text) }
                    if let asked { parts.append("asked for " + asked) }
                    if let error { parts.append("failed: \(error)") }
                    return parts.isEmpty ? "no verdict" : parts.joined(separator: "; ")
                }()
            case .receives(let text, let type): "on_receive gets \"\(text ?? type.description)\""
            case .sent(let transient, let cid, let text): "\(transient ? "transient message" : "message") to \(cid): \"\(text)\""
            case .notSent(let text, let by, let reason): "\"\(text)\" not sent: \(by)" + (reason.map { " (\($0))" } ?? "")
            case .loopGuard(let hops): "not answered (loop guard): it carries \(hops) bot hops, the most answered is max_hops"
            case .replaced(let text): "text replaced with \"\(text)\""
            case .blocked(let by, let reason, let code, let silent):
                {
                    var said = "blocked by \(by ?? "moderation")"
                    if let reason { said += ": \(reason)" }
                    if let code { said += " (appCode \(code))" }
                    if silent { said += "; the sender is not told" }
                    return said
                }()
            case .dropped(let by, let reason): "dropped by \(by ?? "before_send")" + (reason.map { ": \($0)" } ?? "")
            case .action(let what, let cid, let target): "\(what) in \(cid)" + target.text
            }
        }
    }

    /// What a hook chain's value (the one that ended it) said: a `before_send` drop, a translation, a moderation or
    /// membership verdict. Its strings are cut when it is made (`describe`).
    enum Outcome: Sendable, Hashable {
        case drop(reason: String?)
        case translated(String)
        case verdict(ModerationVerdict)

        var text: String {
            switch self {
            case .drop(let reason): reason.map { $0.isEmpty ? "drop" : "drop: \($0)" } ?? "drop"
            case .translated(let text): "translated: \(text)"
            case .verdict(.allow): "allow"
            case .verdict(.replace(let text)): "replace with \"\(text)\""
            case .verdict(.block(let reason, let code, let silent)):
                {
                    var said = "block"
                    if let reason { said += ": \(reason)" }
                    if let code { said += " (appCode \(code))" }
                    if silent { said += " (silent)" }
                    return said
                }()
            }
        }
    }

    /// Whom an action is aimed at and why, for a trace (" (Tom: spam)").
    enum ActionTarget: Sendable, Hashable {
        case none
        case user(String, seconds: Int?, reason: String?)
        case command(String)

        init(_ kind: HookAction.Kind) {
            switch kind {
            case .mute(_, let user, let seconds, let reason):
                self = .user(cut(user), seconds: seconds, reason: reason.map { cut($0) })
            case .kick(_, let user, let reason), .warn(_, let user, let reason):
                self = .user(cut(user), seconds: nil, reason: reason.map { cut($0) })
            case .block(_, let user, _), .add(_, let user): self = .user(cut(user), seconds: nil, reason: nil)
            case .sendCommand(_, let command): self = .command(cut(command.action))
            default: self = .none
            }
        }

        var text: String {
            switch self {
            case .none: ""
            case .user(let user, let seconds, let reason):
                " (\(user)\(seconds.map { ", \($0) s" } ?? "")\(reason.map { ": \($0)" } ?? ""))"
            case .command(let action): " (\(action))"
            }
        }
    }
}
