import Foundation
import MediaImaging

/// Settings of the media store (`[server]` media keys in hookbot.toml, `hookbot server --media-*`; docs/MEDIA.md,
/// "Settings").
public struct MediaConfiguration: Sendable, Equatable {
    /// The directory of the local backend; nil: `media` beside the SQLite file.
    public var directory: String?
    /// Largest file accepted, in bytes (100 MiB by default). A larger `Content-Length` is refused before
    /// the body is read; a chunked body is cut off when it passes this.
    public var maxUploadBytes: Int64 = 100 << 20
    /// Bytes one client may keep stored (all its files together; 1 GiB by default); nil: no quota.
    public var quotaBytes: Int64? = 1 << 30
    /// `Cache-Control` of downloads: files never change under an id, so they may be cached long.
    public var cacheControl: String = "private, max-age=31536000, immutable"
    /// The bounds of thumbnail work: source pixels, jobs at once, jobs waiting, time per job.
    public var thumbnails = ThumbnailLimits()
    /// Bytes of thumbnails kept on disk (`<directory>/thumbs/`), least recently used evicted first; 0: none kept.
    public var thumbnailCacheBytes: Int64 = 256 << 20
    /// The origin clients reach this server by (`https://chat.example.com`, optionally with a path prefix
    /// behind a proxy: `https://example.com/im`), without a trailing `/` (`SettingValues.publicURL` checks
    /// and normalises what the operator wrote). Every
    /// absolute file URL the server writes starts with it. nil: see `MediaURLs` for what is written instead.
    public var publicURL: String?
    /// File URLs the server hands out carry an expiry and an HMAC in their path; GET/HEAD without a valid,
    /// unexpired one answer 403. False (the default): the URL is an unguessable capability that never expires.
    public var signedURLs = false
    /// How long a signed URL stays valid, in seconds.
    public var urlTTL: Int = 24 * 3600
    /// Files no stored message or conversation references are deleted once this old (24 h by default; the
    /// SDKs upload before they send). docs/MEDIA.md, "Retention".
    public var retentionGrace: Duration = .seconds(24 * 3600)
    /// How often the server collects them (hourly by default); zero: only `hookbot media gc` does.
    public var retentionInterval: Duration = .seconds(3600)

    /// On a PostgreSQL store, keep file bytes in `directory` (then shared by every node, e.g. over NFS)
    /// instead of the database (the default: docs/DEPLOY.md). No effect on SQLite, whose bytes are always there.
    public var contentInDirectory = false

    public init() {}

    /// The directory the local backend uses for a server whose SQLite file is `databasePath`.
    public func resolvedDirectory(databasePath: String) -> String {
        if let directory { return directory }
        let parent = (databasePath as NSString).deletingLastPathComponent
        return parent.isEmpty ? "media" : (parent as NSString).appendingPathComponent("media")
    }
}
