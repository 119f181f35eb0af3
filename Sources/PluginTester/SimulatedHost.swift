import BotRouting
import Foundation
import HookRuntime
import IMCore
import Logging
import Synchronization

/// Everything one step made the bots do, as data for expectations.
struct StepOutcome: Sendable {
    var verdict: String?
    var reason: String?
    var code: Int?
    var silent: Bool?
    /// The text `on_receive` saw (after a replace verdict or a `before_send` change).
    var text: String?
    /// The message was not answered (the bot's own, or at the hop limit).
    var ignored = false
    var translation: String?
    /// After an `offline` step: each receiver's notification, or false (no push).
    var pushes: JSONValue?
    var replies: [JSONValue] = []
    var transients: [JSONValue] = []
    var commands: [JSONValue] = []
    var actions: [JSONValue] = []
    /// The bots' own messages stopped by `before_send`, moderation or the rate limits.
    var dropped: [JSONValue] = []
    var logs: [JSONValue] = []
    var errors: [JSONValue] = []
    /// HTTP calls the plugins made, answered from the scenario's recordings.
    var http: [JSONValue] = []

    var json: [String: JSONValue] {
        var o: [String: JSONValue] = [
            "replies": .array(replies), "transients": .array(transients), "commands": .array(commands),
            "actions": .array(actions), "dropped": .array(dropped), "logs": .array(logs), "errors": .array(errors),
            "http": .array(http), "ignored": .bool(ignored),
        ]
        if let verdict { o["verdict"] = .string(verdict) }
        if let reason { o["reason"] = .string(reason) }
        if let code { o["code"] = .int(code) }
        if let silent { o["silent"] = .bool(silent) }
        if let text { o["text"] = .string(text) }
        if let translation { o["translation"] = .string(translation) }
        if let pushes { o["pushes"] = pushes }
        return o
    }

    /// Only what happened: no empty lists, no `ignored = false`.
    var summary: [String: JSONValue] {
        json.filter { key, v in v != .array([]) && !(key == "ignored" && v == .bool(false)) }
    }
}

/// What a scenario's bots do, step by step: each bot is a `PluginRuntime` behind the same routing core
/// (`MessageRouter`) a running bot uses, with a manual clock; its actions are recorded instead of sent. Messages
/// a bot sends reach the scenario's other bots (so replies can bounce between bots until the hop limit
/// stops them), a kick or add is followed by the event the server would send, and in interceptor mode
/// the first bot reviews every message before it is delivered.
final class SimulatedHost {
    let bots: [SimulatedBot]
    let clock: ManualClock
    let scenario: Scenario
    private let recorder: StepRecorder
    private var nextID = 0

    var main: SimulatedBot { bots[0] }

    init(bots: [SimulatedBot], recorder: StepRecorder, clock: ManualClock, scenario: Scenario) {
        self.bots = bots
        self.recorder = recorder
        self.clock = clock
        self.scenario = scenario
    }

    /// Runs `body`, then everything it set off (deliveries to other bots, membership events, HTTP
    /// callbacks), and returns what the bots did.
    func record(_ body: () async throws -> Void) async rethrows -> StepOutcome {
        recorder.begin()
        try await body()
        recorder.closeStep()
        await settle()
        return recorder.outcome
    }

    private func settle() async {
        // Bots answering each other stop at the hop limit; the bound only guards against a runaway.
        for _ in 0..<1000 {
            for bot in bots { await bot.runtime.waitForHTTPCalls() }
            guard let next = recorder.nextPending() else { return }
            switch next {
            case .event(let event):
                for bot in bots { await bot.router.event(event) }
            case .message(let message, let sender):
                await deliver(message, except: sender)
            }
        }
        recorder.error("more than 1000 follow-ups in one step; stopped")
    }

    /// The card with this id as last sent or updated in the case (the last card when nil), with its `cid`.
    func card(_ id: String?) -> [String: JSONValue]? { recorder.card(id) }

    func newMessageID() -> String {
        nextID += 1
        return "m\(nextID)"
    }

    // MARK: Steps

    /// A message from a user (or a bot) in a conversation every bot of the scenario is in.
    func message(_ message: HookMessage) async {
        await deliver(message, except: nil)
    }

    /// Reviews the message when the first bot intercepts, then routes it to every bot but its sender.
    private func deliver(_ message: HookMessage, except sender: String?) async {
        guard let delivered = await intercepted(message) else { return }
        for bot in bots where bot.id != sender {
            await bot.router.message(delivered)
        }
    }

    /// An edit of a message: reviewed like a send when the first bot intercepts (a block refuses it),
    /// then `on_edit` of every bot but the editor with the new version.
    func edit(_ message: HookMessage) async {
        guard let edited = await intercepted(message) else { return }
        let editedAt = Int64(clock.now * 1000)
        for bot in bots where bot.id != message.from {
            await bot.router.event(.edited(edited, editedAt: editedAt))
        }
    }

    /// The message as the server would pass it on when the first bot intercepts (it reviews everything but
    /// its own messages): the bot's review becomes the `HookVerdict` a running bot answers the server with, and
    /// that verdict is applied as the server applies it — as sent, with the body the verdict gives (decoded
    /// as the receiving bots would decode it), or nil when it refuses the message or declines to decide (a
    /// scenario has no failure policy to fall back on).
    private func intercepted(_ message: HookMessage) async -> HookMessage? {
        guard main.router.settings.intercepting, message.from != main.id else { return message }
        let review = await main.router.review(message)
        await main.router.finish(review.followUp)
        switch review.verdict(sentBody: message.typedMessage.encoded(), undecided: "the review did not finish") {
        case .allow, .modify(body: nil, _): return message
        case .modify(let body?, _):
            var delivered = HookMessage(
                id: message.id, cid: message.cid, from: message.from, body: body, timestamp: message.timestamp,
                transient: message.transient)
            delivered.binary = message.binary
            return delivered
        case .drop, .declined, .pushes, .unhooked: return nil
        }
    }

    func transient(_ message: HookMessage) async {
        for bot in bots { await bot.router.transient(message) }
    }

    func command(_ command: HookCommand) async {
        for bot in bots { await bot.router.command(command) }
    }

    func event(_ event: HookEvent) async {
        for bot in bots { await bot.router.event(event) }
    }

    func advance(_ seconds: Double) async {
        // Schedules due on the way fire at their own times, in order (a week of a daily cron job runs 7
        // times); timers keep firing once at the end, as before.
        let target = clock.now + seconds
        var steps = 0
        while steps < 10_000 {
            var next: Double?
            for bot in bots {
                if let d = await bot.runtime.nextScheduleDue, d > clock.now, d < target { next = min(next ?? d, d) }
            }
            guard let next else { break }
            clock.set(next)
            for bot in bots { await bot.router.finish(await bot.runtime.fireDueTimers(now: clock.now)) }
            steps += 1
        }
        clock.set(target)
        for bot in bots { await bot.router.finish(await bot.runtime.fireDueTimers(now: clock.now)) }
    }

    func translate(text: String, from: String?, to: String, messageID: String?) async {
        recorder.translated(await main.router.translate(text: text, from: from, to: to, messageID: messageID))
    }

    /// An `offline` step: the main bot's `on_offline` chain over `receivers`, as the server would ask it.
    func offline(_ message: HookMessage, _ step: [String: JSONValue]) async throws {
        let outcome = await main.router.offline(message, receivers: try OfflineStep.receivers(message, step))
        recorder.pushes(OfflineStep.pushes(outcome))
        await main.router.finish(HookResult(actions: outcome.actions, errors: outcome.errors))
    }

    func reload() async {
        for bot in bots {
            let report = await bot.runtime.reloadAll()
            recorder.errors(report.errors)
            await bot.router.finish(HookResult(actions: report.actions))
        }
    }

    func shutdown() async {
        for bot in bots { await bot.runtime.shutdown() }
    }
}

/// One bot of a scenario: its plugins and its routing core.
struct SimulatedBot: Sendable {
    let id: String
    let runtime: PluginRuntime
    let router: MessageRouter

    /// - Parameter main: the scenario's first bot, whose verdicts and deliveries a step's expectations read.
    init(id: String, runtime: PluginRuntime, settings: RoutingSettings, recorder: StepRecorder, main: Bool, logger: Logger) {
        self.id = id
        self.runtime = runtime
        router = MessageRouter(
            settings: settings, plugins: runtime,
            outlet: RecordingOutlet(bot: id, runtime: runtime, recorder: recorder), logger: logger
        ) { note in
            recorder.note(note, main: main)
        }
    }
}

/// Records a bot's actions for the step, and queues what the server would make of them: its messages
/// for the other bots, and membership events after kicks and adds.
struct RecordingOutlet: BotOutlet {
    let bot: String
    let runtime: PluginRuntime
    let recorder: StepRecorder

    nonisolated(nonsending) func send(_ message: HookMessage, transient: Bool, mentions: [String], replyTo: String?, plugin: String)
        async throws
    {
        var o: [String: JSONValue] = ["cid": .string(message.cid), "plugin": .string(plugin), "from": .string(bot)]
        if let text = message.text { o["text"] = .string(text) }
        if message.type != MessageType.text.rawValue {
            o["type"] = await runtime.typeName(of: message.type).map(JSONValue.string) ?? .int(message.type)
        }
        var attrs = message.attrs
        o["hops"] = attrs.removeValue(forKey: LoopGuard.hopKey) ?? .int(0)
        if !attrs.isEmpty { o["attrs"] = .object(attrs) }
        if let replyTo, !replyTo.isEmpty { o["reply_to"] = .string(replyTo) }
        if !mentions.isEmpty { o["mentions"] = .array(mentions.map(JSONValue.string)) }
        recorder.sent(.object(o), transient: transient)
        if message.type == HookCards.messageType, let card = message.attrs["card"] { recorder.card(card, cid: message.cid) }
        if !transient {
            var delivered = message
            delivered.id = "\(bot)-\(recorder.nextMessageNumber(of: bot))"
            if message.type == HookCards.messageType {
                // What the server's ack tells a real host: the card's message, for ctx.card_update.
                let now = runtime.clock.now()
                HookCards.recordSent(delivered, id: delivered.id, timestamp: Int64(now * 1000), store: runtime.store, now: now)
            }
            recorder.queue(.message(delivered, from: bot))
        }
    }

    nonisolated(nonsending) func perform(_ action: HookAction) async throws {
        let plugin = JSONValue.string(action.plugin)
        func record(_ fields: [String: JSONValue], reason: String? = nil) {
            var o = fields
            o["plugin"] = plugin
            if let reason { o["reason"] = .string(reason) }
            recorder.action(.object(o))
        }
        switch action.kind {
        case .sendCommand(let cid, let command):
            recorder.command(
                .object([
                    "cid": .string(cid), "action": .string(command.action), "ext": .object(command.ext),
                    "plugin": plugin,
                ]))
        case .recall(let cid, let id):
            record(["kind": "recall", "cid": .string(cid), "id": .string(id)])
        case .edit(let cid, let id, _, let message):
            // A card update: recorded with the card as it now is (`expect = { edits = { … } }`).
            var o: [String: JSONValue] = ["kind": "edit", "cid": .string(cid), "id": .string(id)]
            if let text = message.text { o["text"] = .string(text) }
            if let card = message.attrs["card"] {
                o["card"] = card
                recorder.card(card, cid: cid)
            }
            record(o)
        case .kick(let cid, let user, let reason):
            record(["kind": "kick", "cid": .string(cid), "user": .string(user)], reason: reason)
            recorder.queue(.event(.membersLeft(cid: cid, members: [user], by: bot)))
        case .add(let cid, let user):
            record(["kind": "add", "cid": .string(cid), "user": .string(user)])
            recorder.queue(.event(.membersJoined(cid: cid, members: [user], by: bot)))
        case .mute(let cid, let user, let seconds, let reason):
            record(["kind": "mute", "cid": .string(cid), "user": .string(user), "seconds": .int(seconds ?? 600)], reason: reason)
        case .block(let cid, let user, let blocked):
            record(["kind": blocked ? "block" : "unblock", "cid": .string(cid), "user": .string(user)])
            if blocked { recorder.queue(.event(.membersLeft(cid: cid, members: [user], by: bot))) }
        case .warn(let cid, let user, let reason):
            record(["kind": "warn", "cid": .string(cid), "user": .string(user)], reason: reason)
        case .lock(let cid, let locked, let reason):
            record(["kind": locked ? "lock" : "unlock", "cid": .string(cid)], reason: reason)
        case .updateAttribute(let cid, let key, let value):
            record(["kind": "update_attr", "cid": .string(cid), "key": .string(key), "value": value])
        case .log(let level, let message):
            recorder.log("\(level.rawValue): \(message)")
        case .send, .sendTransient, .directMessage:
            break
        }
    }

    /// The scenario's 1:1 conversation of the bot with `user` is `dm:<user>` (a step sends there as
    /// `{ cid = "dm:Tom", … }`).
    nonisolated(nonsending) func directConversation(with user: String) async throws -> String {
        "dm:\(user)"
    }
}

/// The outcome of the step being run, filled in from every bot's routing notes and outlet, and the
/// follow-ups still to run.
final class StepRecorder: Sendable {
    enum FollowUp: Sendable {
        case message(HookMessage, from: String)
        case event(HookEvent)
    }

    private struct State {
        var outcome = StepOutcome()
        /// Per bot, how many messages it has sent in the case (for their ids: `modbot-1`, …).
        var sentBy: [String: Int] = [:]
        var pending: [FollowUp] = []
        /// The cards sent or updated in the case, by id, and the last one's id (for `click` steps).
        var cards: [String: [String: JSONValue]] = [:]
        var lastCard: String?
        /// While the step's own event is routed; what follows is not the step's verdict.
        var open = false
    }

    private let state = Mutex(State())

    var outcome: StepOutcome { state.withLock { $0.outcome } }

    func begin() {
        state.withLock { state in
            state.outcome = StepOutcome()
            state.pending = []
            state.open = true
        }
    }

    func nextMessageNumber(of bot: String) -> Int {
        state.withLock { state in
            state.sentBy[bot, default: 0] += 1
            return state.sentBy[bot]!
        }
    }
    func closeStep() { state.withLock { $0.open = false } }

    func card(_ card: JSONValue, cid: String) {
        guard var o = card.objectValue, let id = o["id"]?.stringValue else { return }
        o["cid"] = .string(cid)
        state.withLock { state in
            state.cards[id] = o
            state.lastCard = id
        }
    }

    func card(_ id: String?) -> [String: JSONValue]? {
        state.withLock { state in (id ?? state.lastCard).flatMap { state.cards[$0] } }
    }

    func queue(_ followUp: FollowUp) { state.withLock { $0.pending.append(followUp) } }

    func nextPending() -> FollowUp? {
        state.withLock { $0.pending.isEmpty ? nil : $0.pending.removeFirst() }
    }

    func sent(_ message: JSONValue, transient: Bool) {
        state.withLock { if transient { $0.outcome.transients.append(message) } else { $0.outcome.replies.append(message) } }
    }

    func command(_ command: JSONValue) { state.withLock { $0.outcome.commands.append(command) } }
    func action(_ action: JSONValue) { state.withLock { $0.outcome.actions.append(action) } }
    func log(_ line: String) { state.withLock { $0.outcome.logs.append(.string(line)) } }
    func error(_ line: String) { state.withLock { $0.outcome.errors.append(.string(line)) } }
    func errors(_ errors: [HookError]) { for e in errors { error(e.description) } }
    func http(_ call: JSONValue) { state.withLock { $0.outcome.http.append(call) } }
    func translated(_ text: String?) { state.withLock { $0.outcome.translation = text } }
    func pushes(_ pushes: JSONValue) { state.withLock { $0.outcome.pushes = pushes } }

    /// Records a routing note; verdicts and deliveries count only for the main bot during the step itself.
    func note(_ note: RoutingNote, main: Bool) {
        state.withLock { state in
            switch note {
            case .hookErrors(let errors):
                state.outcome.errors += errors.map { .string($0.description) }
            case .actionFailed(let action, let cid, let plugin, let error):
                state.outcome.errors.append(.string("\(plugin): \(action) in \(cid) failed: \(error)"))
            case .notSent(_, let text, let by, let reason, _):
                var o: [String: JSONValue] = ["text": .string(text), "by": .string(by)]
                if let reason { o["reason"] = .string(reason) }
                state.outcome.dropped.append(.object(o))
            default:
                guard main, state.open else { return }
                Self.record(note, into: &state.outcome)
            }
        }
    }

    private static func record(_ note: RoutingNote, into out: inout StepOutcome) {
        switch note {
        case .verdict(let verdict):
            switch verdict {
            case .allow: out.verdict = "allow"
            case .replace: out.verdict = "replace"
            case .modify: out.verdict = "modify"
            case .block(let reason, let code, let silent, _):
                out.verdict = "block"
                out.reason = reason
                out.code = code
                out.silent = silent
            case .drop(let reason, let by):
                out.verdict = "drop"
                out.reason = reason ?? "dropped by \(by ?? "before_send")"
            case .muted(let until):
                out.verdict = "muted"
                out.reason = "muted until \(Int(until))"
            }
        case .ignored:
            out.ignored = true
            if out.verdict == nil { out.verdict = "ignored" }
        case .delivered(let message):
            out.text = message.text
        case .translated(let text):
            out.translation = text
        default:
            break
        }
    }
}
