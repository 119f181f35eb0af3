import Foundation
import IMCore

/// A file stored on the server (`POST /media`'s answer): what the server computed from the bytes, never the
/// uploader's word. `url` is absolute, resolved against the client's media address.
@dynamicMemberLookup
public struct IMMediaFile: Sendable, Equatable {
    /// The file's id (`_lcfile.objId` in messages): 22 URL-safe characters, unguessable.
    public var id: String
    /// The stored name (path parts removed by the server).
    public var name: String
    /// Where anyone holding it can download the file.
    public var url: String
    /// What the server computed from the bytes: `size`, `sha256`, the sniffed `mime` (`image/png`, `audio/mpeg`,
    /// `application/octet-stream`…), the container's `format` (`png`, `jpeg`, `m4a`…) when recognised, `width` and
    /// `height`, and `duration` in seconds for audio and video whose container says so; each also reads as a
    /// property of the file (`file.size`).
    public var metadata: MediaMetadata
    /// When it was stored (ms).
    public var createdAt: Int64

    public init(
        id: String, name: String, url: String, size: Int64, sha256: String, mime: String, format: String? = nil,
        width: Int? = nil, height: Int? = nil, duration: Double? = nil, createdAt: Int64
    ) {
        self.id = id
        self.name = name
        self.url = url
        self.metadata = MediaMetadata(
            size: size, sha256: sha256, mime: mime, format: format, width: width, height: height, duration: duration)
        self.createdAt = createdAt
    }

    /// `file.size`, `file.mime`, …: the fields of `metadata`.
    public subscript<Value>(dynamicMember field: WritableKeyPath<MediaMetadata, Value>) -> Value {
        get { metadata[keyPath: field] }
        set { metadata[keyPath: field] = newValue }
    }

    /// The `_lcfile` of a message carrying this file (`objId`, `url`, `metaData`).
    public var fileInfo: FileInfo {
        FileInfo(
            url: url, objId: id, name: name, format: metadata.format, size: metadata.size, width: metadata.width,
            height: metadata.height, duration: metadata.duration)
    }

    /// The message type that shows this file: image, audio or video by its sniffed type, else file.
    public var messageType: MessageType { MessageType(mime: metadata.mime) }

    /// A thumbnail's URL in LeanCloud's form (see `FileInfo.thumbnailURL`).
    public func thumbnailURL(
        width: Int, height: Int, quality: Int = 100, scaleToFit: Bool = true, format: String? = nil
    ) -> String {
        fileInfo.thumbnailURL(width: width, height: height, quality: quality, scaleToFit: scaleToFit, format: format)
    }

    /// Reads `POST /media`'s answer; `base` resolves the relative `url` the server gives.
    init?(json: JSONValue, base: URL?) {
        guard let object = json.objectValue, let id = object["id"]?.stringValue, let name = object["name"]?.stringValue,
            let url = object["url"]?.stringValue, let size = object["size"]?.intValue
        else { return nil }
        self.init(
            id: id, name: name, url: IMMediaAddress.absolute(url, base: base), size: Int64(size),
            sha256: object["sha256"]?.stringValue ?? "", mime: object["mime"]?.stringValue ?? "application/octet-stream",
            format: object["format"]?.stringValue, width: object["width"]?.intValue.map { Int($0) },
            height: object["height"]?.intValue.map { Int($0) }, duration: object["duration"]?.doubleValue,
            createdAt: Int64(object["createdAt"]?.intValue ?? 0))
    }
}

extension MessageType {
    /// The type a file of this MIME type is sent as: `image/*` image, `audio/*` audio, `video/*` video, else file.
    public init(mime: String) {
        let lower = mime.lowercased()
        if lower.hasPrefix("image/") {
            self = .image
        } else if lower.hasPrefix("audio/") {
            self = .audio
        } else if lower.hasPrefix("video/") {
            self = .video
        } else {
            self = .file
        }
    }
}

extension FileInfo {
    /// A thumbnail's URL as LeanCloud's SDKs build it (`AV.File#thumbnailURL`):
    /// `<url>?imageView/<2 or 1>/w/<W>/h/<H>/q/<Q>[/format/<F>]`. Mode 2 (`scaleToFit`) fits within W×H
    /// keeping the aspect; mode 1 fills W×H and cuts the centre. The server never enlarges (docs/MEDIA.md).
    public func thumbnailURL(
        width: Int, height: Int, quality: Int = 100, scaleToFit: Bool = true, format: String? = nil
    ) -> String {
        var query = "imageView/\(scaleToFit ? 2 : 1)/w/\(width)/h/\(height)/q/\(quality)"
        if let format { query += "/format/\(format)" }
        return url + (url.contains("?") ? "&" : "?") + query
    }
}

/// How far an upload or a download has got.
public struct IMTransferProgress: Sendable, Equatable {
    /// Bytes handed to the connection (uploads) or written (downloads) so far.
    public var completedBytes: Int64
    /// The whole size, when known (a file, `Data`, a sequence given its length, a download's
    /// `Content-Length`).
    public var totalBytes: Int64?

    public init(completedBytes: Int64, totalBytes: Int64?) {
        self.completedBytes = completedBytes
        self.totalBytes = totalBytes
    }

    /// 0…1, when the total is known (1 for an empty file).
    public var fraction: Double? {
        guard let totalBytes else { return nil }
        return totalBytes == 0 ? 1 : Double(completedBytes) / Double(totalBytes)
    }
}

extension IMTransferProgress: CustomStringConvertible {
    /// `45% (450 KB of 1.0 MB)`, or `450 KB` when the total is unknown.
    public var description: String {
        let done = IMMediaSummary.bytes(completedBytes)
        guard let totalBytes, let fraction else { return done }
        return "\(Int(fraction * 100))% (\(done) of \(IMMediaSummary.bytes(totalBytes)))"
    }
}

/// What `IMClient.uploadEvents` yields: progress, then the stored file.
public enum IMUploadEvent: Sendable, Equatable {
    case progress(IMTransferProgress)
    /// The last event: the server's record of the file.
    case completed(IMMediaFile)
}

/// One byte range of a download (HTTP `Range`).
public struct IMByteRange: Sendable, Equatable, CustomStringConvertible {
    /// `bytes=a-b`, `bytes=a-` or `bytes=-n`.
    public let headerValue: String

    private init(_ headerValue: String) { self.headerValue = headerValue }

    /// Bytes `range.lowerBound` up to (not including) `range.upperBound`; nil for an empty or negative range.
    public init?(_ range: Range<Int64>) {
        guard range.lowerBound >= 0, !range.isEmpty else { return nil }
        self.init("bytes=\(range.lowerBound)-\(range.upperBound - 1)")
    }

    /// From `offset` to the end (resuming a download).
    public static func from(_ offset: Int64) -> IMByteRange { IMByteRange("bytes=\(max(0, offset))-") }

    /// The last `count` bytes.
    public static func last(_ count: Int64) -> IMByteRange { IMByteRange("bytes=-\(max(1, count))") }

    public var description: String { headerValue }
}

/// What a download got.
public struct IMDownload: Sendable, Equatable {
    /// 200 (the whole file) or 206 (the range asked for).
    public var status: Int
    /// Bytes received.
    public var byteCount: Int64
    public var contentType: String?
    /// `bytes a-b/size` for a range.
    public var contentRange: String?
    /// The file's `ETag` (its SHA-256, quoted).
    public var etag: String?
}

extension IMMessage {
    /// The file an image, audio, video or file message carries (`_lcfile`: `objId` is the stored file's id,
    /// `url`, and the server-filled `name`, `size`, `width`, `height`, `duration`, `format`); nil otherwise.
    public var file: FileInfo? { content.typedMessage?.file }
}

/// Where media URLs point: the client's HTTP address, derived from its WebSocket URL.
enum IMMediaAddress {
    /// `http(s)://host:port` (and a proxy's prefix) for the options; nil when there is none (an in-process
    /// client without `mediaBaseURL`).
    static func base(for options: IMClientOptions) -> URL? {
        if let given = options.mediaBaseURL {
            return URL(string: given.hasSuffix("/") ? String(given.dropLast()) : given)
        }
        guard options.localEndpoint == nil, var components = URLComponents(string: options.url) else { return nil }
        switch components.scheme?.lowercased() {
        case "ws", "http": components.scheme = "http"
        case "wss", "https": components.scheme = "https"
        default: return nil
        }
        guard components.host != nil else { return nil }
        components.path = ""
        components.query = nil
        components.fragment = nil
        return components.url
    }

    /// `url` made absolute against `base` (a server's `/media/…` path); absolute URLs are left alone.
    static func absolute(_ url: String, base: URL?) -> String {
        guard url.hasPrefix("/"), !url.hasPrefix("//"), let base else { return url }
        return base.absoluteString + url
    }
}
