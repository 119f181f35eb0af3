import CoreMetrics
import Foundation
import IMCore
import Logging

extension OfflineHook {
    /// A message whose pushes are queued and held while the interceptor's `on_offline` decides.
    struct Held: Sendable {
        var record: MessageRecord
        /// The receivers with a queued push, each once.
        var receivers: [String]
        var content: PushContent
        /// The `due_at` of the held pushes.
        var heldDue: Int64
        var deadline: Int
        /// Title and body of a changed notification are cut to this, as a template's.
        var maxCharacters: Int
    }

    /// What `answer` does to the held pushes: receivers whose push goes, and the new content of the others
    /// it changed (receivers it does not name keep the default).
    static func decisions(_ answer: Answer, for held: Held) -> (dropping: Set<String>, rewriting: [String: String]) {
        var dropping = Set<String>()
        var rewriting: [String: String] = [:]
        switch answer {
        case .defaults, .unhooked:
            break
        case .dropAll:
            dropping = Set(held.receivers)
        case .decide(let decisions, let rest):
            for receiver in held.receivers {
                switch decisions[receiver] ?? rest {
                case nil: continue
                case .drop?: dropping.insert(receiver)
                case .change(let fields)?:
                    let changed = held.content.merging(fields, maxCharacters: held.maxCharacters)
                    if changed != held.content { rewriting[receiver] = changed.stored }
                }
            }
        }
        return (dropping, rewriting)
    }
}

extension PushDispatcher {
    /// Asks the interceptor's `on_offline` about a message's held pushes and releases them as it answers;
    /// no answer within the deadline, a disconnected interceptor or a bad answer release the defaults.
    func askOffline(_ hub: InterceptorHub, _ interceptor: String, store: any PushHoldStore, _ held: OfflineHook.Held) async {
        let request = OfflineHook.request(
            for: held.record, receivers: held.receivers, content: held.content, deadlineMillis: held.deadline)
        let reply = await hub.askOffline(interceptor, request, deadlineMillis: held.deadline)
        var decided: (dropping: Set<String>, rewriting: [String: String]) = ([], [:])
        let answer: OfflineHook.Answer? = if case .verdict(let verdict) = reply { OfflineHook.Answer(verdict) } else { nil }
        let answered = if case .missing = reply { false } else if case .timedOut = reply { false } else { true }
        let outcome = !answered ? "no_answer" : answer == nil ? "invalid" : answer == .unhooked ? "unhooked" : "answered"
        Counter(label: "hookbot_push_offline_hook_total", dimensions: [("outcome", outcome)], factory: factory).increment()
        if let answer {
            decided = OfflineHook.decisions(answer, for: held)
        } else {
            logger.warning(
                !answered ? "on_offline: no answer in time; the default pushes go" : "on_offline: invalid answer; the default pushes go",
                metadata: [
                    "message": "\(held.record.id)", "interceptor": "\(interceptor)", "deadline_ms": "\(held.deadline)",
                    "answer": "\(reply)",
                ])
        }
        do {
            try await store.releaseHeldPushes(
                messageID: held.record.id, heldDue: held.heldDue, dropping: decided.dropping, rewriting: decided.rewriting,
                now: Identifiers.nowMillis())
        } catch {
            // The held pushes go out as they were queued when their hold ends.
            logger.error("push: releasing held pushes failed", metadata: ["message": "\(held.record.id)", "error": "\(error)"])
        }
    }
}
