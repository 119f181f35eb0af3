import Foundation
import HookRuntime
import IMCore

extension MessageRouter {
    /// Asks the plugins' `on_offline` chain what the offline receivers of `message` are told (docs/PUSH.md,
    /// "on_offline"). The actions the hooks asked for are in the outcome: the caller runs them with
    /// `finish(_:)` once the answer is on its way.
    nonisolated(nonsending) public func offline(
        _ message: HookMessage, receivers: [OfflineReceiver], until: ContinuousClock.Instant? = nil
    ) async -> OfflineOutcome {
        await plugins.offline(message, receivers: receivers, until: until)
    }
}
