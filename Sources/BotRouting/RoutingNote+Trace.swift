import Foundation
import HookRuntime

extension MessageTrace {
    /// Adds what the routing core noted to the trace: verdicts, replies not sent (loop guard, rate limit,
    /// sends per event, screening), failed actions. Hook calls are added by the plugin engine itself. The common
    /// steps are kept as their parts (`MessageTrace.Detail`), their texts made when the trace is read.
    func record(_ note: RoutingNote) {
        switch note {
        case .verdict(let given):
            switch given {
            case .allow: self.verdict("allowed")
            case .replace(let text): self.verdict(.replaced(text: text))
            case .modify: self.verdict("changed by before_send")
            case .block(let reason, let code, let silent, let by):
                self.verdict(.blocked(by: by, reason: reason, code: code, silent: silent), plugin: by)
                block(reason: reason, by: by)
            case .drop(let reason, let by):
                self.verdict(.dropped(by: by, reason: reason), plugin: by)
                block(reason: reason, by: by)
            case .muted(let until):
                let date = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: until))
                self.verdict("dropped: the sender is muted until \(date)")
                block(reason: "muted until \(date)", by: nil)
            }
        case .undecided:
            self.verdict("undecided: the review ran out of time; the server's failure policy decided")
        case .ignored(let hops) where hops > 0:
            add(.skipped, .loopGuard(hops: hops))
        case .delivered(let message):
            add(.delivered, .receives(text: message.text, type: message.type))
        case .notSent(_, let text, let by, let reason, let plugin):
            add(.skipped, plugin: plugin, .notSent(text: text, by: by, reason: reason))
        case .actionFailed(let action, _, let plugin, let error):
            add(.error, plugin: plugin, "\(action) failed: \(error)")
        default:
            break
        }
    }
}
