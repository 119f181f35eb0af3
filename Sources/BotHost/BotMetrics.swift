import CoreMetrics

/// The bot host's metrics: actions executed for plugins, by kind, and those that failed
/// (`hookbot_bot_actions_total`, `hookbot_bot_action_errors_total`, labelled by `action`).
final class BotMetrics: Sendable {
    /// The actions the host executes (`BotHost.run(_:_:plugin:_:)` names).
    static let actions = ["send", "send_transient", "send_cmd", "recall", "kick", "add", "mute", "update_attr"]

    private let executed: [String: Counter]
    private let failed: [String: Counter]

    init(factory: any MetricsFactory) {
        func counters(_ label: String) -> [String: Counter] {
            Dictionary(
                uniqueKeysWithValues: Self.actions.map { action in
                    (action, Counter(label: label, dimensions: [("action", action)], factory: factory))
                })
        }
        executed = counters("hookbot_bot_actions_total")
        failed = counters("hookbot_bot_action_errors_total")
    }

    func executed(_ action: String) { executed[action]?.increment() }
    func failed(_ action: String) { failed[action]?.increment() }
}
