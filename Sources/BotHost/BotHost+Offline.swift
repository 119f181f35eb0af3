import BotRouting
import Foundation
import HookRuntime
import IMCore

/// Answering the server's `offline` requests (docs/PUSH.md, "on_offline"): the plugins' `on_offline` chain
/// decides what each offline receiver's push says, or that there is none.
extension BotHost {
    /// The answer to one `offline` request: `unhooked` when no plugin has the hook (the server stops asking
    /// for a while), `allow` for the defaults, `drop` for no push at all, or `pushes` mapping each changed
    /// receiver to the changes of its notification (null removes a field) or no push. The chain runs within
    /// the server's deadline (`deadlineMillis`, 1 s when not given) less 20 % (at least 20 ms).
    nonisolated(nonsending) func offlineVerdict(for request: HookRequest) async -> HookVerdict {
        guard
            case .offline(
                let cid, let messageID, let from, let stored, let mentionPids, let mentionAll, let content, let ids, let notification,
                let deadline) =
                request, !ids.isEmpty
        else { return .allow }
        let budget = max(1, deadline ?? 1000)
        let until = ContinuousClock.now.advanced(by: .milliseconds(max(budget - max(20, budget / 5), 1)))
        let timestamp = stored ?? Int64(Date().timeIntervalSince1970 * 1000)
        let message =
            switch content {
            case .binary(let bytes):
                HookMessage(id: messageID, cid: cid, from: from, type: MessageType.text.rawValue, timestamp: timestamp, binary: bytes)
            case .text(let body):
                HookMessage(id: messageID, cid: cid, from: from, body: body, timestamp: timestamp, transient: false)
            }
        let mentioned = Set(mentionPids ?? [])
        let receivers = ids.map {
            OfflineReceiver(id: $0, mentioned: mentionAll || mentioned.contains($0), notification: notification)
        }
        let outcome = await router.offline(message, receivers: receivers, until: until)
        count { $0.verdicts += 1 }
        if !outcome.actions.isEmpty || !outcome.errors.isEmpty {
            let router = router
            Task { await router.finish(HookResult(actions: outcome.actions, errors: outcome.errors)) }
        }
        guard outcome.hooked else { return .unhooked }
        if outcome.receivers.allSatisfy({ $0.notification == nil }) { return .drop() }
        var changes: [String: HookVerdict.PushDecision] = [:]
        for receiver in outcome.receivers {
            guard let final = receiver.notification else {
                changes[receiver.id] = .drop
                continue
            }
            let changed = OfflineNotification.changes(from: notification, to: final)
            if !changed.isEmpty { changes[receiver.id] = .change(changed) }
        }
        return changes.isEmpty ? .allow : .pushes(changes, others: nil)
    }
}
