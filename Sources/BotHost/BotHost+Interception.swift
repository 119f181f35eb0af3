import BotRouting
import Foundation
import HookRuntime
import IMClient
import IMCore
import Synchronization

/// Answering the server's interception requests: the routing core's review decides before delivery.
extension BotHost {
    /// The verdict for one interception request. Runs off the actor: the plugins' review is one call on
    /// the Lua thread, bounded by `reviewBudget` so the answer reaches the server before its deadline.
    /// What the review asked for (warn, mute, replies) runs after the verdict has been given.
    nonisolated func verdict(for request: Command) async -> Command {
        // Offline receivers (kind "offline"): the on_offline chain, with the deadline the request carries.
        if request.kind == "offline" { return await offlineVerdict(for: request) }
        let until = ContinuousClock.now.advanced(by: reviewBudget)
        var verdict = Command(cmd: .hook, op: .verdict)
        verdict.id = request.id
        verdict.verdict = "allow"
        var review: Router.Review?
        var original: (message: HookMessage, body: String)?
        // An edit (kind "edit", the message's id in mid) is reviewed like a send: moderation applies to it.
        if request.kind == "message" || request.kind == "edit", let cid = request.cid, let from = request.fromPeerId,
            let body = request.msg
        {
            let message = HookMapping.hookMessage(
                id: request.kind == "edit" ? request.mid ?? "" : "", cid: cid, from: from, body: body,
                timestamp: Int64(Date().timeIntervalSince1970 * 1000), transient: false)
            original = (message, body)
            review = await router.review(message, until: until)
        } else if request.kind == "membership", let cid = request.cid, let by = request.initBy, let action = request.action {
            review = await router.reviewMembership(cid: cid, by: by, members: request.m ?? [], action: action, until: until)
        }
        count { $0.verdicts += 1 }
        guard let review else { return verdict }
        switch review.decision {
        case .allow:
            break
        case .modify(let approved):
            verdict.verdict = "modify"
            // A plain-text message stays plain text unless the plugins gave it a type or attributes.
            let plain = original.map { TypedMessage.decode($0.body) == nil } ?? false
            verdict.msg =
                plain && approved.type == MessageType.text.rawValue && approved.attrs.isEmpty
                ? approved.text ?? ""
                : HookMapping.typedMessage(approved).encoded()
        case .drop(let reason, let code, let silent):
            verdict.verdict = "drop"
            verdict.reason = reason
            verdict.appCode = code
            verdict.silent = silent ? true : nil
        case .undecided:
            // The review could not finish within the server's deadline: leave the decision to the server's
            // failure policy (counted and logged there) instead of guessing.
            verdict.verdict = "none"
            verdict.reason = "review budget of \(reviewBudget) exhausted"
        }
        let followUp = review.followUp
        if !followUp.actions.isEmpty || !followUp.errors.isEmpty {
            let router = router
            Task { await router.finish(followUp) }
        }
        return verdict
    }
}

/// Signs the bot's logins with its interceptor secret, and its conversation actions with the master key
/// when it has one (a server that requires signatures checks them with its master key).
struct SecretSignatureProvider: IMSignatureProvider {
    let secret: String
    var appID = "hookbot"
    var masterKey: String?

    func signature(clientId: String, action: IMSignatureAction) async throws -> IMSignature {
        let key = if case .open = action { secret } else { masterKey ?? secret }
        return Signer(appID: appID, masterKey: key).signature(for: action, clientID: clientId)
    }
}

/// Answers in-process interception requests for the bot host it is given once the host exists (the
/// client that carries the requests is made before the host).
final class Reviewer: Sendable {
    struct Reference { weak var host: BotHost? }
    let host = Mutex(Reference())

    func answer(_ request: Command) async -> Command {
        guard let host = host.withLock({ $0.host }) else {
            var verdict = Command(cmd: .hook, op: .verdict)
            verdict.id = request.id
            verdict.verdict = "allow"
            return verdict
        }
        return await host.verdict(for: request)
    }
}
