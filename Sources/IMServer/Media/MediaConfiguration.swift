import Foundation

/// Settings of the media store (`[server] media`, `hookbot server --media-dir/--max-upload-bytes`).
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

    public init() {}

    /// The directory the local backend uses for a server whose SQLite file is `databasePath`.
    public func resolvedDirectory(databasePath: String) -> String {
        if let directory { return directory }
        let parent = (databasePath as NSString).deletingLastPathComponent
        return parent.isEmpty ? "media" : (parent as NSString).appendingPathComponent("media")
    }
}
