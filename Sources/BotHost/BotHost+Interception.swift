import Foundation
import HookRuntime
import IMClient
import IMCore
import IMServer
import Synchronization

/// Answering the server's interception requests: moderation and `before_send` decide before delivery.
extension BotHost {
    /// The verdict for one interception request. Runs off the actor: the plugins' review is one call on
    /// the Lua thread, bounded by `reviewBudget` so the answer reaches the server before its deadline.
    nonisolated func verdict(for request: Command) async -> Command {
        let until = ContinuousClock.now.advanced(by: reviewBudget)
        var verdict = Command(cmd: .hook, op: .verdict)
        verdict.id = request.id
        verdict.verdict = "allow"
        if request.kind == "message", let cid = request.cid, let from = request.fromPeerId, let body = request.msg {
            let message = HookMapping.hookMessage(id: "", cid: cid, from: from, body: body,
                                                  timestamp: Int64(Date().timeIntervalSince1970 * 1000), transient: false)
            await decide(message, body: body, until: until, into: &verdict)
        } else if request.kind == "membership", let cid = request.cid, let by = request.initBy, let action = request.action {
            let review = await runtime.reviewMembership(cid: cid, by: by, members: request.m ?? [], action: action, until: until)
            followUp(review.actions, review.errors, hook: "membership")
            if case .block(let reason, let code, _) = review.verdict {
                verdict.verdict = "drop"
                verdict.reason = reason ?? "refused by \(review.decidedBy ?? "a plugin")"
                verdict.appCode = code
            }
        }
        count { $0.verdicts += 1 }
        return verdict
    }

    /// Runs what a review asked for (warn, mute, kick, replies) after the verdict has been given.
    private nonisolated func followUp(_ actions: [HookAction], _ errors: [HookError], hook: String) {
        guard !actions.isEmpty || !errors.isEmpty else { return }
        Task { await self.finish(HookResult(actions: actions, errors: errors), hook: hook) }
    }

    private nonisolated func decide(_ message: HookMessage, body: String, until: ContinuousClock.Instant,
                                    into verdict: inout Command) async {
        if let until = mutedUntil(message.from, in: message.cid) {
            verdict.verdict = "drop"
            verdict.reason = "you are muted until \(ISO8601DateFormatter().string(from: until))"
            return
        }
        guard let (moderation, screened) = await runtime.review(message, until: until) else {
            // The review could not finish within the server's deadline: leave the decision to the server's
            // failure policy (counted and logged there) instead of guessing.
            count { $0.undecided += 1 }
            verdict.verdict = "none"
            verdict.reason = "review budget of \(reviewBudget) exhausted"
            return
        }
        followUp(moderation.actions + (screened?.actions ?? []), moderation.errors + (screened?.errors ?? []),
                 hook: "moderation")
        if case .block(let reason, let code, let silent) = moderation.verdict {
            count { $0.blocked += 1 }
            verdict.verdict = "drop"
            verdict.reason = reason ?? "blocked by \(moderation.decidedBy ?? "moderation")"
            verdict.appCode = code
            verdict.silent = silent ? true : nil
            return
        }
        guard let screened, let approved = screened.message else {
            count { $0.blocked += 1 }
            verdict.verdict = "drop"
            verdict.reason = screened?.dropReason ?? "dropped by \(screened?.droppedBy ?? "before_send")"
            return
        }
        if approved != message {
            verdict.verdict = "modify"
            verdict.msg = TypedMessage.decode(body) == nil && approved.type == MessageType.text.rawValue && approved.attrs.isEmpty
                ? approved.text ?? ""
                : HookMapping.typedMessage(approved).encoded()
        }
    }

    // MARK: Mutes

    /// Mutes are kept in the plugin state store under the host's own namespace, so they survive restarts,
    /// and in memory (`mutes`), so checking one costs no database read per message.
    func mute(_ user: String, in cid: String, for seconds: Int, reason: String?) async throws {
        let now = Date().timeIntervalSince1970
        let key = Self.muteKey(user, in: cid)
        try runtime.store.set(plugin: Self.hostNamespace, key: key, value: .double(now + Double(seconds)),
                              ttl: Double(seconds), now: now)
        mutes.withLock { $0[key] = seconds > 0 ? now + Double(seconds) : nil }
        logger.info("user muted", metadata: ["cid": "\(cid)", "user": "\(user)", "seconds": "\(seconds)", "reason": "\(reason ?? "")"])
    }

    /// Reads the stored mutes into memory (at start).
    func loadMutes() {
        let now = Date().timeIntervalSince1970
        let keys = (try? runtime.store.keys(plugin: Self.hostNamespace, prefix: "mute:", now: now)) ?? []
        var loaded: [String: Double] = [:]
        for key in keys {
            if let until = (try? runtime.store.get(plugin: Self.hostNamespace, key: key, now: now))??.doubleValue, until > now {
                loaded[key] = until
            }
        }
        mutes.withLock { $0 = loaded }
    }

    nonisolated func mutedUntil(_ user: String, in cid: String) -> Date? {
        let now = Date().timeIntervalSince1970
        let key = Self.muteKey(user, in: cid)
        let until = mutes.withLock { mutes -> Double? in
            guard let until = mutes[key] else { return nil }
            if until <= now { mutes[key] = nil }
            return until > now ? until : nil
        }
        return until.map(Date.init(timeIntervalSince1970:))
    }

    private static func muteKey(_ user: String, in cid: String) -> String { "mute:\(cid):\(user)" }

    static let hostNamespace = "hookbot.host"
}

/// Signs the bot's logins with its interceptor secret, and its conversation actions with the master key
/// when it has one (a server that requires signatures checks them with its master key).
struct SecretSignatureProvider: IMSignatureProvider {
    let secret: String
    var appID = "hookbot"
    var masterKey: String?

    func signature(clientId: String, action: IMSignatureAction) async throws -> IMSignature {
        let timestamp = Int64(Date().timeIntervalSince1970)
        let nonce = UUID().uuidString
        let signed: SignedAction
        switch action {
        case .open: signed = .login(clientID: clientId)
        case .startConversation(let members): signed = .start(clientID: clientId, members: members)
        case .join(let cid): signed = .member(clientID: clientId, conversationID: cid, members: [clientId], action: "join")
        case .invite(let cid, let members): signed = .member(clientID: clientId, conversationID: cid, members: members, action: "invite")
        case .kick(let cid, let members): signed = .member(clientID: clientId, conversationID: cid, members: members, action: "kick")
        }
        let key = if case .open = action { secret } else { masterKey ?? secret }
        let signature = Signer(appID: appID, masterKey: key).sign(signed, timestamp: timestamp, nonce: nonce)
        return IMSignature(timestamp: timestamp, nonce: nonce, signature: signature)
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
