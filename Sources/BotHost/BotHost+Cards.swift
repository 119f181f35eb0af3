import Foundation
import HookRuntime

/// Cards (`ctx.card`): the host's part is to remember which message each card became, so that
/// `ctx.card_update` can edit it; clicks come back as cmd messages the runtime checks (CardClicks.swift).
extension BotHost {
    /// Records a sent card's message id and timestamp in the bot's state once the server acknowledged it.
    static func cardRecorder(_ runtime: PluginRuntime) -> @Sendable (HookMessage, String, Int64) -> Void {
        let store = runtime.store
        let clock = runtime.clock
        return { message, id, timestamp in
            HookCards.recordSent(message, id: id, timestamp: timestamp, store: store, now: clock.now())
        }
    }
}
