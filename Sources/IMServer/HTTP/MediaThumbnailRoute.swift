import Foundation
import HTTPTypes
import Hummingbird
import IMCore
import MediaImaging
import NIOCore
import Synchronization

/// Thumbnails of stored images in LeanCloud's URL form: `GET /media/<id>[/<name>]?imageView/2/w/W/h/H[/q/Q]
/// [/format/F]` (what `AV.File#thumbnailURL()` appends to a file's URL; docs/MEDIA.md). `MediaRoute.download`
/// asks here first; a query without `imageView` is served as the file itself.
///
/// A thumbnail is looked up in the server's `ThumbnailCache` first (by content SHA-256 and the normalised
/// request): a hit is served from disk, with no libvips job and no read of the stored file. On a miss the stored
/// bytes are copied to a temporary file (streamed, as any `MediaStore` gives them, inside the job's slot),
/// thumbnailed under the server's `Thumbnailer` limits, and the result kept in the cache.
final class MediaThumbnails: Sendable {
    /// One thumbnailer per server: its limits (source pixels, jobs at once, queue, time per job) bound all of
    /// the server's thumbnail work.
    let thumbnailer: Thumbnailer
    let cache: ThumbnailCache
    /// libvips jobs started (cache misses that passed the checks).
    private let jobs = Atomic<Int>(0)
    /// Jobs running or waiting, by what they make (`made`).
    private let inFlight = Mutex<[ThumbnailCache.Key: Task<Thumbnail, any Error>]>([:])

    /// With the server's limits, and its cache in `<media dir>/thumbs`.
    init(_ configuration: ServerConfiguration) {
        let media = configuration.media
        thumbnailer = Thumbnailer(limits: media.thumbnails)
        cache = ThumbnailCache(
            directory: (media.resolvedDirectory(databasePath: configuration.databasePath) as NSString).appendingPathComponent("thumbs"),
            capacity: media.thumbnailCacheBytes)
    }

    var jobsStarted: Int { jobs.load(ordering: .relaxed) }

    /// The stored types libvips may decode here (`Thumbnailer` blocks every other loader).
    static let imageTypes: Set<String> = ["image/jpeg", "image/png", "image/webp", "image/gif"]

    /// The thumbnail answer when the query asks for one; nil when it does not.
    func response(_ request: Request, record: MediaRecord, media: any MediaStore, cacheControl: String, head: Bool) async
        -> Response?
    {
        let spec: ImageViewRequest
        do {
            guard let parsed = try ImageViewRequest.fromQuery(request.uri.query ?? "") else { return nil }
            spec = parsed
        } catch {
            return Self.failure(error)
        }
        guard Self.imageTypes.contains(record.metadata.mime) else {
            return Self.failure(.unsupportedImage("the file is \(record.metadata.mime)"))
        }
        // One ETag per content and request: the same thumbnail of the same bytes is the same answer.
        let tag = Self.tag(spec)
        let etag = "\"\(record.metadata.sha256)-\(tag)\""
        var headers: HTTPFields = [.eTag: etag, .cacheControl: cacheControl, HTTPField.Name("X-Content-Type-Options")!: "nosniff"]
        if let match = request.headers[.ifNoneMatch],
            match.split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces) == etag || $0 == "*" })
        {
            return Response(status: .notModified, headers: headers)
        }
        // The size the store read from the header at upload: a bomb is refused before its bytes are copied.
        if let width = record.metadata.width, let height = record.metadata.height, width * height > thumbnailer.limits.maxSourcePixels {
            return Self.failure(.sourceTooLarge(width: width, height: height, limit: thumbnailer.limits.maxSourcePixels))
        }
        let cacheKey = ThumbnailCache.Key(sha256: record.metadata.sha256, request: tag)
        let bytes: [UInt8]
        let format: ImageFormat
        if let hit = await cache.get(cacheKey) {
            (bytes, format) = (hit.bytes, hit.format)
            headers[Self.cacheHeader] = "hit"
        } else {
            let thumbnail: Thumbnail
            do {
                thumbnail = try await made(cacheKey, spec: spec, record: record, media: media).value
            } catch let error as ThumbnailError {
                return Self.failure(error)
            } catch {
                return Self.answer(
                    .internalServerError, code: IMError(.internalError).code, reason: "INTERNAL_ERROR", detail: "reading the file: \(error)"
                )
            }
            (bytes, format) = (thumbnail.bytes, thumbnail.format)
            headers[Self.cacheHeader] = "miss"
        }
        headers[.contentType] = format.mimeType
        headers[.contentLength] = String(bytes.count)
        if head { return Response(status: .ok, headers: headers) }
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// The job making this thumbnail: one per key at a time, so a burst of the same request (a new image in a
    /// large group, every member's client asking for its thumbnail at once) runs one job and takes one slot;
    /// the others wait for its result. The job keeps its result in the cache before it leaves the table.
    private func made(_ key: ThumbnailCache.Key, spec: ImageViewRequest, record: MediaRecord, media: any MediaStore)
        -> Task<Thumbnail, any Error>
    {
        inFlight.withLock { running in
            if let job = running[key] { return job }
            let job = Task {
                defer { self.inFlight.withLock { _ = $0.removeValue(forKey: key) } }
                let thumbnail = try await self.thumbnailer.thumbnail(request: spec) { path in
                    self.jobs.add(1, ordering: .relaxed)
                    try await Self.spool(media.read(record, range: 0..<record.metadata.size), to: path)
                }
                await self.cache.put(key, bytes: thumbnail.bytes, format: thumbnail.format)
                return thumbnail
            }
            running[key] = job
            return job
        }
    }

    /// `X-Hookbot-Thumbnail: hit` when the answer came from the cache, `miss` when a job made it.
    static let cacheHeader = HTTPField.Name("X-Hookbot-Thumbnail")!

    /// `2-w100-h-q75-jpeg`: what distinguishes one thumbnail of a content from another.
    static func tag(_ spec: ImageViewRequest) -> String {
        "\(spec.mode.rawValue)-w\(spec.width.map(String.init) ?? "")-h\(spec.height.map(String.init) ?? "")-q\(spec.quality ?? 75)-"
            + (spec.format?.rawValue ?? "source")
    }

    private static func spool(_ chunks: AsyncThrowingStream<ByteBuffer, any Error>, to path: String) async throws {
        guard FileManager.default.createFile(atPath: path, contents: nil), let handle = FileHandle(forWritingAtPath: path) else {
            throw MediaError(.storageFailed, "cannot create \(path)")
        }
        defer { try? handle.close() }
        for try await chunk in chunks {
            try handle.write(contentsOf: Data(chunk.readableBytesView))
        }
    }

    private static func failure(_ error: ThumbnailError) -> Response {
        answer(HTTPResponse.Status(code: error.httpStatus), code: error.code, reason: error.kindName, detail: error.reason)
    }

    private static func answer(_ status: HTTPResponse.Status, code: Int, reason: String, detail: String) -> Response {
        HTTPJSON.error(status, code: code, reason: reason, detail: detail)
    }
}

extension ThumbnailError {
    /// The case's name, as `MediaRoute` answers `reason` (`badRequest`, `sourceTooLarge`, …).
    fileprivate var kindName: String {
        switch self {
        case .badRequest: "badRequest"
        case .unsupportedImage: "unsupportedImage"
        case .sourceTooLarge: "sourceTooLarge"
        case .busy: "busy"
        case .timedOut: "timedOut"
        case .decodeFailed: "decodeFailed"
        }
    }
}
