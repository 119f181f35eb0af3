import Foundation

/// The media settings of the embedded server under `[server]` in hookbot.toml (docs/MEDIA.md, "Settings"), as
/// the bot host reads them; `hookbot run` hands them to the server's `MediaConfiguration` (BotHost does not link
/// the server, so the defaults are repeated here: MediaConfigTests checks that they agree).
public struct ServerMediaSettings: Sendable, Equatable {
    /// `media_quota`: bytes one client may keep stored; nil (`0` or `"none"`): no quota.
    public var quotaBytes: Int64? = 1 << 30
    /// `thumbnail_max_pixels`: the largest thumbnail source, width × height.
    public var thumbnailMaxPixels = 50_000_000
    /// `thumbnail_jobs`: thumbnail jobs at once.
    public var thumbnailJobs = 2
    /// `thumbnail_queue`: jobs waiting at once; more are refused as busy.
    public var thumbnailQueue = 64
    /// `thumbnail_timeout_ms`: the longest one job may take.
    public var thumbnailTimeoutMillis = 10_000
    /// `thumbnail_cache`: bytes of thumbnails kept on disk; 0: none.
    public var thumbnailCacheBytes: Int64 = 256 << 20
    /// `public_url`: the origin clients reach the server by, normalised (no trailing `/`).
    public var publicURL: String?
    /// `signed_urls`: file URLs carry an expiry and an HMAC; `url_ttl`: how long they stay valid, in seconds.
    public var signedURLs = false
    public var urlTTL = 24 * 3600
    /// `media_grace`: files nothing references are deleted once this old; `media_gc_interval`: how often
    /// the server collects them (zero: only `hookbot media gc`).
    public var retentionGrace: Duration = .seconds(24 * 3600)
    public var retentionInterval: Duration = .seconds(3600)
    /// `media_in_directory`: on PostgreSQL, keep file bytes in the media directory instead of the database.
    public var contentInDirectory = false

    public init() {}
}
