import BotRouting
import Foundation
import HookRuntime
import IMClient
import IMCore
import NIOCore
import Synchronization

/// Answering the server's interception requests: the routing core's review decides before delivery.
extension BotHost {
    /// The answer to a `hook request` command that came over the WebSocket (an undecodable request is
    /// allowed, as the server would on no answer with its default policy).
    nonisolated func verdict(for command: Command) async -> Command {
        guard let request = HookRequest(command: command) else { return HookVerdict.allow.command(id: command.id) }
        return await verdict(for: request).command(id: command.id)
    }

    /// `router.review` with `trace` as the current trace, on the caller's executor. The closure captures
    /// `isolation` so that it runs there: without, Swift 6.3 runs it, and the nonsending review in it, on its
    /// pool, a hop from the Lua thread and back per review.
    private func review(
        _ message: HookMessage, until: ContinuousClock.Instant, tracedBy trace: MessageTrace?,
        isolation: isolated (any Actor)? = #isolation
    ) async -> MessageRouter.Review {
        await MessageTrace.$current.withValue(trace) {
            _ = isolation
            return await router.review(message, until: until)
        }
    }

    /// Answers an in-process interception request by calling `answered` on the Lua thread, where the server
    /// applies the verdict (`HookAnswerer`): the request moves from the server's thread to the Lua thread once,
    /// and nothing waits on Swift's pool in between (issue 30).
    nonisolated func answer(_ request: HookRequest, then answered: @escaping @Sendable (HookVerdict?) -> Void) {
        guard let reviewStart else {
            Task { await self.startReview(request, then: answered) }
            return
        }
        // The task's first job is queued on the Lua loop from here, and the review runs in it (the hop onto the
        // host, whose executor is that loop, takes no job). Given to the loop as a closure that then started an
        // isolated task, the review ran one job later; a task started here without the preference, even one
        // isolated to the host, started on Swift's pool, a wake-up more (issue 30, round 8). Detached, as that
        // task was: it carries none of the asking task's task-locals (a message's trace) or its priority.
        Task.detached(executorPreference: reviewStart) { await self.startReview(request, then: answered) }
    }

    private func startReview(_ request: HookRequest, then answered: @escaping @Sendable (HookVerdict?) -> Void) async {
        await review(request) { answered($0) }
    }

    /// The verdict for one interception request (see `review(_:answering:)`).
    nonisolated(nonsending) func verdict(for request: HookRequest) async -> HookVerdict {
        var given = HookVerdict.allow
        await review(request) { given = $0 }
        return given
    }

    /// Reviews one interception request on the caller's executor: the Lua thread for the in-process bot
    /// (`answer`), Swift's pool for requests that came over the WebSocket (which so never wait for the Lua thread
    /// but for the plugins' review, one call there, bounded by `reviewBudget` so the answer reaches the server
    /// before its deadline). `answered` gets the verdict as soon as it is known, once: what only records the
    /// review (its trace) comes after it, and what the review asked for (warn, mute, replies) runs after it on a
    /// task of its own.
    nonisolated(nonsending) func review(_ request: HookRequest, answering answered: (HookVerdict) -> Void) async {
        let asked = ContinuousClock.now
        let until = ContinuousClock.now.advanced(by: reviewBudget)
        var review: MessageRouter.Review?
        var original: (message: HookMessage, body: String)?
        var trace: MessageTrace?
        // An edit (with the message's id) is reviewed like a send: moderation applies to it. Binary content
        // is not reviewed.
        let sent: (id: String, cid: String, from: String, body: String?)? =
            switch request {
            case .message(let cid, let from, let content, _, _): ("", cid, from, content.text)
            case .edit(let cid, let messageID, let from, let content, _): (messageID, cid, from, content.text)
            case .membership, .offline: nil
            }
        switch request {
        case .offline:
            // Offline receivers: the on_offline chain, with the deadline the request carries.
            return answered(await offlineVerdict(for: request))
        case .message, .edit:
            guard let sent, let body = sent.body else { break }
            let message = HookMessage(
                id: sent.id, cid: sent.cid, from: sent.from, body: body, timestamp: Int64(Date().timeIntervalSince1970 * 1000),
                transient: false)
            original = (message, body)
            let traced = traces.review(message)
            traced?.reviewed(.reviewAsked(kind: request.kind.rawValue, budget: reviewBudgetText))
            trace = traced
            await knowSender(sent.from, in: sent.cid, until: until)
            review = await self.review(message, until: until, tracedBy: traced)
            if case .message = request, runtime.reach?.contains(sent.cid) == false, review?.decision.drops != true {
                // Delivered where the bot is no member: no delivery reaches the bot to count it.
                router.plugins.members.counted(sent.from, in: sent.cid)
            }
        case .membership(let cid, let actor, let changed, let action):
            review = await router.reviewMembership(cid: cid, by: actor, members: changed, action: action.rawValue, until: until)
            if runtime.reach?.contains(cid) == false, review?.decision.drops != true {
                // Where the bot only reviews, this is all it learns of joins and departures.
                let members = router.plugins.members
                switch action {
                case .join, .invite: members.joined(changed, in: cid, at: Date().timeIntervalSince1970, founding: false)
                case .quit, .kick: members.left(changed, from: cid)
                }
            }
        }
        count { $0.verdicts += 1 }
        guard let review else { return answered(.allow) }
        let verdict = review.verdict(sentBody: original?.body, undecided: "review budget of \(reviewBudget) exhausted")
        answered(verdict)
        if let trace, let original {
            let took = asked.duration(to: .now)
            let micros = Int(took.components.seconds * 1_000_000 + took.components.attoseconds / 1_000_000_000_000)
            trace.reviewed(micros: micros, .reviewAnswered(verdict: verdict.name, reason: verdict.reason))
            // Where the bot is no member no delivery reaches it to continue the trace: nothing waits for one (such
            // entries only pushed out the others of the store's bounded list).
            switch (review.decision, verdict) {
            case (_, .drop): break
            case _ where runtime.reach?.contains(original.message.cid) == false: break
            case (.modify(let approved), _): traces.awaitDelivery(trace, as: approved)
            default: traces.awaitDelivery(trace, as: original.message)
            }
        }
        let followUp = review.followUp
        if !followUp.actions.isEmpty || !followUp.errors.isEmpty {
            let router = router
            Task { await MessageTrace.$current.withValue(trace) { await router.finish(followUp) } }
        }
    }
}

/// Member info for conversations the bot only reviews as the server's interceptor: it gets no
/// membership events there, so when a sender is unknown it asks the server for the conversation's members
/// (`conv query` flag 4, which the server answers for interceptors) and records them, so that
/// `ctx.conv(cid).member(uid)` (and with it moderation's `new_members` rules) knows join times, roles and
/// message counts.
extension BotHost {
    /// How often one conversation is asked for at most.
    static let memberQueryInterval = 1.0

    nonisolated(nonsending) func knowSender(_ user: String, in cid: String, until: ContinuousClock.Instant) async {
        let members = router.plugins.members
        guard members.member(user, of: cid) == nil, runtime.reach?.contains(cid) != true,
            members.claimQuery(of: cid, now: Date().timeIntervalSince1970, every: Self.memberQueryInterval)
        else { return }
        let client = client
        let router = router
        let logger = logger
        let query = Task {
            var command = Command(cmd: .conv, op: .query)
            command.where = IMConversationQuery().whereKey("objectId", equalTo: .string(cid)).whereJSON
            command.limit = 1
            command.flag = 4
            do {
                guard let conversation = try await client.send(command).results?.first else { return }
                if let creator = conversation.c { router.setConversationRole("Owner", of: creator, in: cid) }
                router.learn(conversation)
            } catch {
                logger.warning("could not read a reviewed conversation's members", metadata: ["cid": "\(cid)", "error": "\(error)"])
            }
        }
        // Waited for with half the review's budget; a slower answer still fills the records for the next message.
        let wait = (until - ContinuousClock.now) / 2
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await query.value }
            group.addTask { try? await Task.sleep(for: wait) }
            await group.next()
            group.cancelAll()
        }
    }
}

extension MessageRouter.Review.Decision {
    /// Whether the message is refused.
    var drops: Bool {
        if case .drop = self { true } else { false }
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
    let host = Mutex(Weak<BotHost>(nil))

    func answer(_ request: HookRequest, then answered: @escaping @Sendable (HookVerdict?) -> Void) {
        guard let host = host.withLock({ $0.value }) else { return answered(.allow) }
        host.answer(request, then: answered)
    }

    /// A review is probably on its way (`ReviewHeadsUp`): the host's Lua thread gets ready for it.
    func headsUp() {
        host.withLock { $0.value }?.reviewStart?.wakeAhead.headsUp()
    }
}

/// The server in process as the bot's client sees it, with the bot host as the interceptor that answers by
/// callback (`connectLocally(receive:closed:answering:)`) whatever the client asks to attach with.
struct AnsweringEndpoint: LocalEndpoint {
    let base: any LocalEndpoint
    let answerer: HookAnswerer
    let headsUp: ReviewHeadsUp

    func connectLocally(
        receive: @escaping @Sendable (Command) -> Void, closed: @escaping @Sendable () -> Void, review: HookReviewer?
    ) -> LocalConnection? {
        base.connectLocally(receive: receive, closed: closed, answering: answerer, headsUp: headsUp)
    }
}

/// The Lua loop as the executor an in-process review's task starts on (`BotHost.answer`). A job runs as the loop's
/// serial executor's, as the loop's own jobs do, so that the task's hop onto the host (whose executor is that loop)
/// runs in place. Only the review's task (and the child tasks it starts) prefers it: the Lua thread is not offered
/// to Swift's other work this way.
final class ReviewStart: TaskExecutor {
    let loop: any EventLoop
    /// Keeps the Lua thread awake from the server's heads-up until the review's job is queued here.
    let wakeAhead: LuaWakeAhead

    init(_ loop: any EventLoop) {
        self.loop = loop
        wakeAhead = LuaWakeAhead(loop: loop)
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute {
            job.runSynchronously(isolatedTo: self.loop.executor.asUnownedSerialExecutor(), taskExecutor: self.asUnownedTaskExecutor())
        }
        wakeAhead.reviewQueued()
    }
}
