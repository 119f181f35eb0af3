import BotRouting
import Foundation
import HookRuntime
import IMCore

/// Answering the server's `offline` requests (docs/PUSH.md, "on_offline"): the plugins' `on_offline` chain
/// decides what each offline receiver's push says, or that there is none.
extension BotHost {
    /// The answer to one `offline` request: `unhooked` when no plugin has the hook (the server stops asking
    /// for a while), `allow` for the defaults, `drop` for no push at all, or `modify` with `msg` a JSON
    /// object mapping each changed receiver to the changes of its notification (null removes a field) or
    /// `false`. The chain runs within the server's deadline (`attr.deadline`) less 20 % (at least 20 ms).
    nonisolated func offlineVerdict(for request: Command) async -> Command {
        var verdict = Command(cmd: .hook, op: .verdict)
        verdict.id = request.id
        verdict.verdict = "allow"
        guard let cid = request.cid, let from = request.fromPeerId, let ids = request.m, !ids.isEmpty else { return verdict }
        let deadline = max(1, request.attr?["deadline"]?.intValue ?? 1000)
        let until = ContinuousClock.now.advanced(by: .milliseconds(max(deadline - max(20, deadline / 5), 1)))
        let timestamp = request.timestamp ?? Int64(Date().timeIntervalSince1970 * 1000)
        let message =
            if let bytes = request.binaryMsg {
                HookMessage(
                    id: request.mid ?? "", cid: cid, from: from, type: MessageType.text.rawValue, timestamp: timestamp, binary: bytes)
            } else {
                HookMapping.hookMessage(
                    id: request.mid ?? "", cid: cid, from: from, body: request.msg ?? "", timestamp: timestamp, transient: false)
            }
        let notification = request.attr?["notification"]?.objectValue ?? [:]
        let mentioned = Set(request.mentionPids ?? [])
        let receivers = ids.map {
            OfflineReceiver(id: $0, mentioned: request.mentionAll == true || mentioned.contains($0), notification: notification)
        }
        let outcome = await router.offline(message, receivers: receivers, until: until)
        count { $0.verdicts += 1 }
        if !outcome.actions.isEmpty || !outcome.errors.isEmpty {
            let router = router
            Task { await router.finish(HookResult(actions: outcome.actions, errors: outcome.errors)) }
        }
        guard outcome.hooked else {
            verdict.verdict = "unhooked"
            return verdict
        }
        if outcome.receivers.allSatisfy({ $0.notification == nil }) {
            verdict.verdict = "drop"
            return verdict
        }
        var changes: [String: JSONValue] = [:]
        for receiver in outcome.receivers {
            guard let final = receiver.notification else {
                changes[receiver.id] = .bool(false)
                continue
            }
            let changed = OfflineNotification.changes(from: notification, to: final)
            if !changed.isEmpty { changes[receiver.id] = .object(changed) }
        }
        if !changes.isEmpty {
            verdict.verdict = "modify"
            verdict.msg = JSONValue.object(changes).jsonString()
        }
        return verdict
    }
}
