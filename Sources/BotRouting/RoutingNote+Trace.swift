import Foundation
import HookRuntime

extension MessageTrace {
    /// Adds what the routing core noted to the trace: verdicts, replies not sent (loop guard, rate limit,
    /// sends per event, screening), failed actions. Hook calls are added by the plugin engine itself.
    func record(_ note: RoutingNote) {
        switch note {
        case .verdict(let given):
            switch given {
            case .allow: self.verdict("allowed")
            case .replace(let text): self.verdict("text replaced with \"\(text)\"")
            case .modify: self.verdict("changed by before_send")
            case .block(let reason, let code, let silent, let by):
                var said = "blocked by \(by ?? "moderation")"
                if let reason { said += ": \(reason)" }
                if let code { said += " (appCode \(code))" }
                if silent { said += "; the sender is not told" }
                self.verdict(said, plugin: by)
                block(reason: reason, by: by)
            case .drop(let reason, let by):
                self.verdict("dropped by \(by ?? "before_send")" + (reason.map { ": \($0)" } ?? ""), plugin: by)
                block(reason: reason, by: by)
            case .muted(let until):
                let date = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: until))
                self.verdict("dropped: the sender is muted until \(date)")
                block(reason: "muted until \(date)", by: nil)
            }
        case .undecided:
            self.verdict("undecided: the review ran out of time; the server's failure policy decided")
        case .ignored(let hops) where hops > 0:
            add(.skipped, "not answered (loop guard): it carries \(hops) bot hops, the most answered is max_hops")
        case .delivered(let message):
            add(.delivered, "on_receive gets \"\(message.text ?? message.type.description)\"")
        case .notSent(_, let text, let by, let reason, let plugin):
            add(.skipped, plugin: plugin, "\"\(text)\" not sent: \(by)" + (reason.map { " (\($0))" } ?? ""))
        case .actionFailed(let action, _, let plugin, let error):
            add(.error, plugin: plugin, "\(action) failed: \(error)")
        default:
            break
        }
    }
}
