import Foundation

/// What the server computed about a stored file — never the client's word. One type for the server's records and
/// the SDK's `IMMediaFile`, which hold the same facts.
public struct MediaMetadata: Sendable, Hashable, Codable {
    /// Bytes stored.
    public var size: Int64
    /// SHA-256 of the content, lowercase hex (also where the local backend keeps the bytes).
    public var sha256: String
    /// MIME type sniffed from the magic bytes (`application/octet-stream` when nothing matched).
    public var mime: String
    /// Short format name when the bytes were recognised: png, jpeg, gif, webp, wav, mp3, mp4, ogg, …
    public var format: String?
    /// Image dimensions in pixels, from the header.
    public var width: Int?
    public var height: Int?
    /// Audio/video duration in seconds, where the container says so.
    public var duration: Double?

    public init(
        size: Int64, sha256: String, mime: String, format: String? = nil, width: Int? = nil, height: Int? = nil,
        duration: Double? = nil
    ) {
        self.size = size
        self.sha256 = sha256
        self.mime = mime
        self.format = format
        self.width = width
        self.height = height
        self.duration = duration
    }
}
