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

enum MediaStores {
    /// The media store of a server: the local-directory backend with its records in the SQLite file. A
    /// server on PostgreSQL has none yet (its routes answer 4609) — the PostgreSQL backend is to come.
    static func open(_ configuration: ServerConfiguration, store: any ServerStore) throws -> (any MediaStore)? {
        guard let sqlite = store as? SQLiteStore else { return nil }
        return try LocalMediaStore(
            directory: configuration.media.resolvedDirectory(databasePath: configuration.databasePath),
            records: SQLiteMediaRecords(db: sqlite.db))
    }
}
