import Foundation
import HookRuntime
import IMClient
import IMCore

/// Executing the actions plugins return. Every message the bot sends first goes through the plugins'
/// `before_send` and moderation, carries a hop count, and counts against the per-conversation rate limit.
extension BotHost {
    /// Executes actions in order; `screenings` holds send actions' screening done already (by index).
    /// The actions answer one event: at most `sendsPerEvent` of them may send (the rest are counted as
    /// rate-limited and logged), however many conversations they aim at.
    func execute(_ actions: [HookAction], hops: Int = 1, screenings: [Int: PluginRuntime.Screening] = [:]) async {
        var sends = 0
        var refused = 0
        for (index, action) in actions.enumerated() {
            if action.kind.sends {
                sends += 1
                if sends > configuration.sendsPerEvent {
                    refused += 1
                    continue
                }
            }
            await execute(action, hops: hops, screening: screenings[index])
        }
        if refused > 0 {
            count { $0.rateLimited += refused }
            logger.warning("too many messages for one event; the rest were not sent", metadata: [
                "limit": "\(configuration.sendsPerEvent)", "refused": "\(refused)",
                "plugins": "\(Set(actions.filter(\.kind.sends).map(\.plugin)).sorted())",
            ])
        }
    }

    private func execute(_ action: HookAction, hops: Int, screening: PluginRuntime.Screening?) async {
        let plugin = action.plugin
        switch action.kind {
        case .send(let cid, let message, _):
            await send(message, to: cid, hops: hops, plugin: plugin, transient: false, screening: screening)
        case .sendTransient(let cid, let message):
            await send(message, to: cid, hops: hops, plugin: plugin, transient: true, screening: screening)
        case .sendCommand(let cid, let command):
            guard allowSend(in: cid, plugin: plugin) else { return }
            await run("send_cmd", cid, plugin: plugin) {
                _ = try await client.conversation(cid).sendCmd(action: command.action, ext: HookMapping.im(command.ext))
            }
        case .recall(let cid, let messageID):
            await run("recall", cid, plugin: plugin) {
                _ = try await client.conversation(cid).recall(messageId: messageID, timestamp: 0)
            }
        case .kick(let cid, let user, _):
            await run("kick", cid, plugin: plugin) { _ = try await client.conversation(cid).remove(members: [user]) }
        case .add(let cid, let user):
            await run("add", cid, plugin: plugin) { _ = try await client.conversation(cid).add(members: [user]) }
        case .mute(let cid, let user, let seconds, let reason):
            await run("mute", cid, plugin: plugin) {
                try await mute(user, in: cid, for: seconds ?? 600, reason: reason)
            }
        case .warn(let cid, let user, let reason):
            let text = "@\(user) " + (reason ?? "please follow the conversation rules")
            await send(HookMessage(cid: cid, type: MessageType.text.rawValue, text: text), to: cid, hops: hops,
                       plugin: plugin, transient: false, mentions: [user])
        case .updateAttribute(let cid, let key, let value):
            await run("update_attr", cid, plugin: plugin) {
                _ = try await client.conversation(cid).update(patch: ["attr.\(key)": HookMapping.im(value)])
            }
        case .log:
            break
        }
    }

    private func allowSend(in cid: String, plugin: String) -> Bool {
        guard loopGuard.allowSend(in: cid, now: Date().timeIntervalSince1970) else {
            count { $0.rateLimited += 1 }
            logger.warning("reply rate limit reached; message not sent", metadata: ["cid": "\(cid)", "plugin": "\(plugin)"])
            return false
        }
        return true
    }

    private func send(_ message: HookMessage, to cid: String, hops: Int, plugin: String, transient: Bool,
                      mentions: [String]? = nil, screening: PluginRuntime.Screening? = nil) async {
        var outgoing = message
        outgoing.cid = cid
        outgoing.from = configuration.clientID
        let (screened, moderation) = if let screening { (screening.screened, screening.moderation) } else {
            await runtime.screen(outgoing)
        }
        let followUp = screened.actions + (moderation?.actions ?? [])
        let errors = screened.errors + (moderation?.errors ?? [])
        if !followUp.isEmpty || !errors.isEmpty {
            await finish(HookResult(actions: followUp, errors: errors), hook: "before_send")
        }
        guard var approved = screened.message, let moderation else {
            count { $0.dropped += 1 }
            logger.info("own message dropped by before_send", metadata: ["plugin": "\(screened.droppedBy ?? "")", "reason": "\(screened.dropReason ?? "")"])
            return
        }
        switch moderation.verdict {
        case .block(let reason, _, _):
            count { $0.dropped += 1 }
            logger.info("own message blocked by moderation", metadata: ["plugin": "\(moderation.decidedBy ?? "")", "reason": "\(reason ?? "")"])
            return
        case .replace(let text):
            approved.text = text
        case .allow:
            break
        }
        guard allowSend(in: cid, plugin: plugin) else { return }
        approved.attrs[LoopGuard.hopKey] = .int(hops)
        let content = IMMessageContent.typed(HookMapping.typedMessage(approved))
        let options = IMSendOptions(transient: transient, mentionPids: mentions)
        let what = transient ? "send_transient" : "send"
        await run(what, cid, plugin: plugin) {
            // Submitted in order; the ack is awaited off the event path so replies can be pipelined.
            let pending = try await client.conversation(cid).submit(content, options: options)
            self.count { $0.sent += 1 }
            pending.onFailure { error in self.actionFailed(what, cid, plugin: plugin, error) }
        }
    }
}
