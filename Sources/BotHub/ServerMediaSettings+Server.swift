import BotHost
import IMServer

extension MediaConfiguration {
    /// The media settings `hookbot.toml` or `hookbot server`'s flags gave, on the server's configuration.
    public mutating func apply(_ settings: ServerMediaSettings) {
        quotaBytes = settings.quotaBytes
        thumbnails.maxSourcePixels = settings.thumbnailMaxPixels
        thumbnails.maxConcurrentJobs = max(1, settings.thumbnailJobs)
        thumbnails.maxQueuedJobs = max(0, settings.thumbnailQueue)
        thumbnails.timeLimit = .milliseconds(settings.thumbnailTimeoutMillis)
        thumbnailCacheBytes = settings.thumbnailCacheBytes
        publicURL = settings.publicURL
        signedURLs = settings.signedURLs
        urlTTL = settings.urlTTL
        retentionGrace = settings.retentionGrace
        retentionInterval = settings.retentionInterval
        contentInDirectory = settings.contentInDirectory
    }
}
