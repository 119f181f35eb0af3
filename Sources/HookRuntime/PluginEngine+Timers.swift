import CLua
import Foundation
import Logging

/// Timers (`ctx.after`, `ctx.every`): fired by the host's timer driver, within each plugin's share.
extension PluginEngine {
    /// The earliest due time of any timer (in clock seconds), if any.
    public var nextTimerDue: Double? {
        let timers = ordered.filter { !$0.disabled }.flatMap { $0.timers.values.map(\.due) }.min()
        // dialogs waiting for an answer (ctx.ask) time out from the same driver (PluginEngine+Dialogs.swift)
        let dialogs = nextDialogDue
        guard let schedules = nextScheduleDue else { return [timers, dialogs].compactMap { $0 }.min() }
        return [timers, dialogs, schedules].compactMap { $0 }.min()
    }

    /// Number of live timers over all plugins.
    public var timerCount: Int {
        return ordered.reduce(0) { $0 + $1.timers.count }
    }

    /// Fires every timer due at `now` (default: the clock's now), earliest
    /// first. A repeating timer fires at most once per call and is then
    /// rescheduled one interval after its due time (or after `now` if it fell
    /// further behind).
    public func fireDueTimers(now: Double? = nil) -> HookResult {
        let t = now ?? clock.now()
        var due: [(plugin: LuaPlugin, order: Int, timer: PluginTimer)] = []
        for (i, plugin) in ordered.enumerated() where !plugin.disabled {
            for timer in plugin.timers.values where timer.due <= t { due.append((plugin, i, timer)) }
        }
        due.sort { a, b in
            if a.timer.due != b.timer.due { return a.timer.due < b.timer.due }
            if a.order != b.order { return a.order < b.order }
            return a.timer.id < b.timer.id
        }
        var result = expireDialogs(now: t)
        for (plugin, _, timer) in due {
            guard !plugin.disabled, plugin.L != nil, let current = plugin.timers[timer.id] else { continue }
            if limits.timerShare > 0 {
                let now = Self.monotonicSeconds()
                if now - plugin.timerWindow.start >= 1 { plugin.timerWindow = (now, 0, false) }
                if plugin.timerWindow.spent >= limits.timerShare {
                    // Out of its share this second: the timer waits for the next window.
                    plugin.timers[timer.id]?.due = t + (1 - (now - plugin.timerWindow.start))
                    if !plugin.timerWindow.overrun {
                        plugin.timerWindow.overrun = true
                        account(plugin, HookError(plugin: plugin.name, hook: "timer", reason: .timerBudget), into: &result.errors)
                    }
                    continue
                }
            }
            let once = current.interval == nil
            if let iv = current.interval {
                var next = current.due + iv
                if next <= t { next = t + iv }
                plugin.timers[timer.id]?.due = next
            } else {
                plugin.timers[timer.id] = nil
            }
            let started = Self.monotonicSeconds()
            let fired = call(plugin, cid: nil, messageID: nil) { plugin in plugin.fireTimer(id: timer.id, once: once) }
            plugin.timerWindow.spent += Self.monotonicSeconds() - started
            result.errors += fired.errors
            result.actions += fired.actions
        }
        fireDueSchedules(at: t, into: &result)
        return result
    }

    private static func monotonicSeconds() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
}
