import BotHost
import IMCore
import IMServer

extension PushConfiguration {
    /// The push settings `hookbot.toml` (`[push…]`) or `hookbot server --push-config` gave, on the server's
    /// configuration; what the file left unset keeps the server's default.
    public mutating func apply(_ settings: PushSettings) {
        providers = settings.providers.map { provider in
            switch provider {
            case .apns(let value): PushProviderConfiguration(.apns(value))
            case .fcm(let value): PushProviderConfiguration(.fcm(value))
            case .webPush(let value): PushProviderConfiguration(.webPush(value))
            case .unifiedPush(let value): PushProviderConfiguration(.unifiedPush(value))
            case .webhook(let value): PushProviderConfiguration(.webhook(value))
            }
        }
        for index in providers.indices { providers[index].rate = settings.rates[providers[index].name] }
        http = settings.http
        templates.byType.merge(settings.templatesByType) { _, new in new }
        if let plain = settings.plainTemplate { templates.plain = plain }
        if let other = settings.otherTemplate { templates.other = other }
        if let title = settings.titleTemplate { templates.title = title }
        if let sound = settings.sound { templates.sound = sound }
        if let most = settings.maxBodyCharacters { templates.maxBodyCharacters = most }
        for (cid, table) in settings.conversationTemplates {
            // Checked when the file was read.
            conversations[cid] = try? PushConversationTemplates(object: .object(table))
        }
        if let workers = settings.workers { queue.workers = workers }
        if let delay = settings.retryDelay { queue.retryDelay = delay }
        if let delay = settings.maxRetryDelay { queue.maxRetryDelay = delay }
        if let age = settings.maxAge { queue.maxAge = age }
        if let deadline = settings.offlineHookDeadlineMillis { offlineHookDeadlineMillis = deadline }
    }
}
