import Foundation
import HookRuntime
import IMCore
import Logging
import Synchronization

/// The routing core of a bot, with no transport: what a running bot (`BotHost`) and `hookbot test` do
/// with what arrives, and with the actions their plugins return.
///
/// - Messages: the bot's own are ignored; a message carrying `maxHops` bot hops is not answered; unless
///   the bot is intercepting (then `review` ran before delivery), moderation decides; then translation
///   (when the conversation has a target language or the message asks for one in `attrs.translate`);
///   then `on_receive`. Cmd messages go to `on_cmd`, transient ones to `on_transient`, events to their
///   hooks.
/// - Reviews (interceptor): a muted sender is dropped; otherwise moderation and `before_send` decide, as
///   one call within the server's deadline.
/// - Actions: at most `sendsPerEvent` sends answer one event; every message the bot sends goes through
///   `before_send` and moderation, counts against the per-conversation and global rate limits, and
///   carries its hop count; mutes are recorded here; the rest goes to the `BotOutlet`.
public final class MessageRouter: Sendable {
    public let settings: RoutingSettings
    public let plugins: PluginRuntime
    public let mutes: MuteList
    private let outlet: any BotOutlet
    private let note: @Sendable (RoutingNote) -> Void
    private let logger: Logger
    private let loopGuard: Mutex<LoopGuard>

    /// - Parameter note: told what happens, as it happens (counters, logs, test recorders).
    public init(
        settings: RoutingSettings, plugins: PluginRuntime, outlet: any BotOutlet,
        logger: Logger = Logger(label: "hookbot.routing"), note: @escaping @Sendable (RoutingNote) -> Void = { _ in }
    ) {
        self.settings = settings
        self.plugins = plugins
        self.outlet = outlet
        // Also added to the message's trace when the host traces it (MessageTrace.current).
        self.note = { routed in
            note(routed)
            MessageTrace.current?.record(routed)
        }
        self.logger = logger
        mutes = MuteList(store: plugins.store, clock: plugins.clock)
        loopGuard = Mutex(
            LoopGuard(
                limit: settings.replyLimit, globalLimit: settings.globalReplyLimit,
                window: settings.replyWindow, maxHops: settings.maxHops))
    }

    // MARK: Arrivals

    /// Routes a delivered message (common or typed; transient ones go to `transient(_:)`).
    nonisolated(nonsending) public func message(_ message: HookMessage) async {
        guard message.from != settings.botID else { return note(.ignored(hops: 0)) }
        // Counted once its hooks ran: `ctx.conv(cid).member(uid).messages` counts the member's earlier messages.
        defer { plugins.members.counted(message.from, in: message.cid) }
        note(.arrived(.message))
        let hops = message.attrs[LoopGuard.hopKey]?.intValue ?? 0
        guard loopGuard.withLock({ $0.mayAnswer(hops: hops) }) else {
            logger.debug("not answering: hop limit", metadata: ["cid": "\(message.cid)", "hops": "\(hops)"])
            return note(.ignored(hops: hops))
        }
        let language = targetLanguage(for: message)
        if !settings.intercepting, language == nil {
            // Moderation and on_receive as one unit, so a reload cannot fall between them.
            let outcome = await plugins.incoming(message)
            note(.verdict(Self.verdict(outcome.moderation)))
            if let delivered = outcome.delivered { note(.delivered(delivered)) }
            return await finish(HookResult(actions: outcome.actions, errors: outcome.errors), replyingTo: hops)
        }
        var delivered = message
        if !settings.intercepting {
            let moderation = await plugins.moderate(message)
            note(.verdict(Self.verdict(moderation)))
            await finish(HookResult(actions: moderation.actions, errors: moderation.errors))
            switch moderation.verdict {
            case .block: return
            case .replace(let text): delivered.text = text
            case .allow: break
            }
        }
        if let language, let text = delivered.text {
            let translation = await plugins.translate(text: text, from: nil, to: language, messageID: delivered.id)
            await finish(HookResult(actions: translation.actions, errors: translation.errors))
            if let translated = translation.text {
                note(.translated(translated))
                delivered.attrs["translation"] = .object(["to": .string(language), "text": .string(translated)])
            }
        }
        note(.delivered(delivered))
        let (result, screenings) = await plugins.receiveAndScreen(delivered, as: settings.botID)
        await finish(result, replyingTo: hops, screenings: screenings)
    }

    /// Routes a transient message to `on_transient`.
    nonisolated(nonsending) public func transient(_ message: HookMessage) async {
        guard message.from != settings.botID else { return }
        note(.arrived(.transient))
        await finish(await plugins.transient(message))
    }

    /// Routes a cmd message to `on_cmd`.
    nonisolated(nonsending) public func command(_ command: HookCommand) async {
        guard command.from != settings.botID else { return }
        note(.arrived(.command))
        await finish(await plugins.command(command))
    }

    /// Routes a conversation event (membership, update, recall) to its hook.
    nonisolated(nonsending) public func event(_ event: HookEvent) async {
        note(.arrived(.event))
        track(event)
        await finish(await plugins.handle(event))
    }

    /// Asks the translation providers directly (what `hookbot test`'s translate step does).
    nonisolated(nonsending) public func translate(text: String, from: String?, to: String, messageID: String?) async -> String? {
        let translation = await plugins.translate(text: text, from: from, to: to, messageID: messageID)
        await finish(HookResult(actions: translation.actions, errors: translation.errors))
        return translation.text
    }

    private func targetLanguage(for message: HookMessage) -> String? {
        if let requested = message.attrs["translate"]?.stringValue { return requested }
        return settings.translateTo[message.cid]
    }

    static func verdict(_ moderation: ModerationOutcome) -> RoutingNote.Verdict {
        switch moderation.verdict {
        case .allow: .allow
        case .replace(let text): .replace(text)
        case .block(let reason, let code, let silent): .block(reason: reason, code: code, silent: silent, by: moderation.decidedBy)
        }
    }

    // MARK: Reviews

    /// What an interceptor answers about one message, and the actions the review asked for (warn, mute,
    /// replies), which the caller runs with `finish(_:)` once the answer is on its way.
    public struct Review: Sendable {
        public enum Decision: Sendable, Equatable {
            case allow
            /// Deliver this message instead.
            case modify(HookMessage)
            case drop(reason: String, code: Int?, silent: Bool)
            /// The review did not finish before `until`: nobody decided.
            case undecided
        }
        public var decision: Decision
        public var followUp: HookResult
    }

    /// Reviews a message before delivery: a muted sender's message is dropped; otherwise moderation and,
    /// unless it blocks, `before_send` decide, as one call that runs no hook past `until`.
    nonisolated(nonsending) public func review(_ message: HookMessage, until: ContinuousClock.Instant? = nil) async -> Review {
        if !settings.mutesOnServer, let end = mutes.mutedUntil(message.from, in: message.cid) {
            note(.verdict(.muted(until: end)))
            let date = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: end))
            return Review(decision: .drop(reason: "you are muted until \(date)", code: nil, silent: false), followUp: .init())
        }
        guard let (moderation, screened) = await plugins.review(message, until: until) else {
            note(.undecided)
            return Review(decision: .undecided, followUp: .init())
        }
        let followUp = HookResult(
            actions: moderation.actions + (screened?.actions ?? []),
            errors: moderation.errors + (screened?.errors ?? []))
        let verdict = Self.verdict(moderation)
        if case .block(let reason, let code, let silent) = moderation.verdict {
            note(.verdict(verdict))
            let said = reason ?? "blocked by \(moderation.decidedBy ?? "moderation")"
            return Review(decision: .drop(reason: said, code: code, silent: silent), followUp: followUp)
        }
        guard let screened, let approved = screened.message else {
            note(.verdict(.drop(reason: screened?.dropReason, by: screened?.droppedBy)))
            let said = screened?.dropReason ?? "dropped by \(screened?.droppedBy ?? "before_send")"
            return Review(decision: .drop(reason: said, code: nil, silent: false), followUp: followUp)
        }
        if approved == message {
            note(.verdict(.allow))
            return Review(decision: .allow, followUp: followUp)
        }
        note(.verdict(verdict == .allow ? .modify : verdict))
        return Review(decision: .modify(approved), followUp: followUp)
    }

    /// Reviews a proposed membership change with the `membership` chain.
    nonisolated(nonsending) public func reviewMembership(
        cid: String, by: String, members: [String], action: String,
        until: ContinuousClock.Instant? = nil
    ) async -> Review {
        let review = await plugins.reviewMembership(cid: cid, by: by, members: members, action: action, until: until)
        let followUp = HookResult(actions: review.actions, errors: review.errors)
        guard case .block(let reason, let code, _) = review.verdict else { return Review(decision: .allow, followUp: followUp) }
        return Review(
            decision: .drop(reason: reason ?? "refused by \(review.decidedBy ?? "a plugin")", code: code, silent: false),
            followUp: followUp)
    }

    // MARK: Actions

    /// Reports a result's hook errors (the plugin runtime has logged them) and executes its actions, which
    /// answer a message that carried `hops` bot hops (0 for anything else).
    nonisolated(nonsending) public func finish(
        _ result: HookResult, replyingTo hops: Int = 0,
        screenings: [Int: PluginRuntime.Screening] = [:]
    ) async {
        if !result.errors.isEmpty { note(.hookErrors(result.errors)) }
        await execute(result.actions, hops: hops + 1, screenings: screenings)
    }

    /// Executes actions in order; `screenings` holds send actions' screening done already (by index).
    /// At most `sendsPerEvent` of them may send, however many conversations they aim at.
    nonisolated(nonsending) private func execute(_ actions: [HookAction], hops: Int, screenings: [Int: PluginRuntime.Screening]) async {
        var sends = 0
        var refused: [HookAction] = []
        for (index, action) in actions.enumerated() {
            if action.kind.sends {
                sends += 1
                if sends > settings.sendsPerEvent {
                    refused.append(action)
                    continue
                }
            }
            await execute(action, hops: hops, screening: screenings[index])
        }
        guard !refused.isEmpty else { return }
        for action in refused {
            note(
                .notSent(
                    cid: action.kind.conversation ?? "", text: Self.text(of: action), by: "sends per event",
                    reason: "at most \(settings.sendsPerEvent) sends answer one event", plugin: action.plugin))
        }
        logger.warning(
            "too many messages for one event; the rest were not sent",
            metadata: [
                "limit": "\(settings.sendsPerEvent)", "refused": "\(refused.count)",
                "plugins": "\(Set(refused.map(\.plugin)).sorted())",
            ])
    }

    private static func text(of action: HookAction) -> String {
        switch action.kind {
        case .send(_, let message, _), .sendTransient(_, let message), .directMessage(_, let message): message.text ?? ""
        case .sendCommand(_, let command): command.action
        case .warn(_, let user, let reason): "@\(user) " + (reason ?? warning)
        default: ""
        }
    }

    /// What a warning says when the plugin gave no reason.
    static let warning = "please follow the conversation rules"

    nonisolated(nonsending) private func execute(_ action: HookAction, hops: Int, screening: PluginRuntime.Screening?) async {
        let plugin = action.plugin
        switch action.kind {
        case .send(let cid, let message, let replyTo):
            await send(message, to: cid, hops: hops, plugin: plugin, transient: false, replyTo: replyTo, screening: screening)
        case .sendTransient(let cid, let message):
            await send(message, to: cid, hops: hops, plugin: plugin, transient: true, screening: screening)
        case .sendCommand(let cid, let command):
            guard allowSend(in: cid, text: command.action, plugin: plugin) else { return }
            await perform(action, "send_cmd", cid)
        case .mute(let cid, let user, let seconds, let reason):
            do {
                try mutes.mute(user, in: cid, for: seconds ?? 600)
                logger.info(
                    "user muted",
                    metadata: [
                        "cid": "\(cid)", "user": "\(user)", "seconds": "\(seconds ?? 600)",
                        "reason": "\(reason ?? "")",
                    ])
            } catch {
                return failed("mute", cid, plugin: plugin, error)
            }
            await perform(action, "mute", cid)
        case .warn(let cid, let user, let reason):
            await perform(action, "warn", cid)
            let text = "@\(user) " + (reason ?? Self.warning)
            await send(
                HookMessage(cid: cid, type: MessageType.text.rawValue, text: text), to: cid, hops: hops, plugin: plugin,
                transient: false, mentions: [user])
        case .block(let cid, _, let blocked):
            await perform(action, blocked ? "block" : "unblock", cid)
        case .recall(let cid, _):
            await perform(action, "recall", cid)
        case .edit(let cid, _, _, let message):
            // A card update (ctx.card_update): an edit of the bot's own message, rate-limited like a send.
            guard allowSend(in: cid, text: message.text ?? "", plugin: plugin) else { return }
            await perform(action, "edit", cid)
        case .kick(let cid, _, _):
            await perform(action, "kick", cid)
        case .add(let cid, _):
            await perform(action, "add", cid)
        case .updateAttribute(let cid, _, _):
            await perform(action, "update_attr", cid)
        case .lock(let cid, let locked, let reason):
            do {
                try await outlet.perform(action)
                plugins.members.setLocked(locked, cid)
                logger.info(
                    locked ? "conversation locked" : "conversation unlocked", metadata: ["cid": "\(cid)", "reason": "\(reason ?? "")"])
            } catch {
                failed(locked ? "lock" : "unlock", cid, plugin: plugin, error)
            }
        case .directMessage(let user, let message):
            // The host finds or opens the 1:1 conversation once (ConversationMembers remembers it); then it
            // is an ordinary send there, screened and rate-limited like any other.
            let cid: String
            if let known = plugins.members.direct(with: user) {
                cid = known
            } else {
                do {
                    cid = try await outlet.directConversation(with: user)
                } catch {
                    return failed("dm", "", plugin: plugin, error)
                }
                plugins.members.setDirect(cid, with: user)
            }
            await send(message, to: cid, hops: hops, plugin: plugin, transient: false, screening: screening)
        case .log:
            await perform(action, "log", "")
        }
    }

    nonisolated(nonsending) private func perform(_ action: HookAction, _ what: String, _ cid: String) async {
        do { try await outlet.perform(action) } catch { return failed(what, cid, plugin: action.plugin, error) }
        if what != "log" { MessageTrace.current?.add(.action, plugin: action.plugin, .action(what, in: cid, action)) }
    }

    private func failed(_ what: String, _ cid: String, plugin: String, _ error: any Error) {
        note(.actionFailed(action: what, cid: cid, plugin: plugin, error: "\(error)"))
    }

    private func allowSend(in cid: String, text: String, plugin: String) -> Bool {
        let now = plugins.clock.now()
        guard loopGuard.withLock({ $0.allowSend(in: cid, now: now) }) else {
            note(.notSent(cid: cid, text: text, by: "rate limit", reason: nil, plugin: plugin))
            logger.warning("reply rate limit reached; message not sent", metadata: ["cid": "\(cid)", "plugin": "\(plugin)"])
            return false
        }
        return true
    }

    /// Screens one of the bot's own messages (unless done already), applies the rate limits, marks its
    /// hop count and hands it to the outlet.
    nonisolated(nonsending) private func send(
        _ message: HookMessage, to cid: String, hops: Int, plugin: String, transient: Bool,
        replyTo: String? = nil, mentions: [String] = [], screening: PluginRuntime.Screening? = nil
    ) async {
        var outgoing = message
        outgoing.cid = cid
        outgoing.from = settings.botID
        let (screened, moderation) =
            if let screening { (screening.screened, screening.moderation) } else {
                await plugins.screen(outgoing)
            }
        let followUp = screened.actions + (moderation?.actions ?? [])
        let errors = screened.errors + (moderation?.errors ?? [])
        if !followUp.isEmpty || !errors.isEmpty { await finish(HookResult(actions: followUp, errors: errors)) }
        guard var approved = screened.message, let moderation else {
            note(
                .notSent(
                    cid: cid, text: outgoing.text ?? "", by: screened.droppedBy ?? "", reason: screened.dropReason,
                    plugin: plugin))
            logger.info(
                "own message dropped by before_send",
                metadata: ["plugin": "\(screened.droppedBy ?? "")", "reason": "\(screened.dropReason ?? "")"])
            return
        }
        switch moderation.verdict {
        case .block(let reason, _, _):
            note(.notSent(cid: cid, text: approved.text ?? "", by: moderation.decidedBy ?? "", reason: reason, plugin: plugin))
            logger.info(
                "own message blocked by moderation",
                metadata: ["plugin": "\(moderation.decidedBy ?? "")", "reason": "\(reason ?? "")"])
            return
        case .replace(let text):
            approved.text = text
        case .allow:
            break
        }
        guard allowSend(in: cid, text: approved.text ?? "", plugin: plugin) else { return }
        approved.attrs[LoopGuard.hopKey] = .int(hops)
        do {
            try await outlet.send(approved, transient: transient, mentions: mentions, replyTo: replyTo, plugin: plugin)
            MessageTrace.current?.add(.sent, plugin: plugin, .sent(transient: transient, cid: cid, text: approved.text ?? ""))
            note(.sent(cid: cid, transient: transient))
        } catch {
            failed(transient ? "send_transient" : "send", cid, plugin: plugin, error)
        }
    }
}
