import CVips
import Dispatch
import Foundation

/// The bounds every thumbnail job is held to.
public struct ThumbnailLimits: Sendable, Equatable {
    /// The largest source, width × height of one page, read from the header before any pixel is decoded
    /// (decompression bombs: a small PNG may declare 50000×50000).
    public var maxSourcePixels: Int
    /// Jobs running at once; more wait in a queue.
    public var maxConcurrentJobs: Int
    /// Jobs waiting at once; beyond that a request is refused (`busy`) rather than queued without bound.
    public var maxQueuedJobs: Int
    /// The longest a job may compute before libvips is told to stop it.
    public var timeLimit: Duration

    public init(
        maxSourcePixels: Int = 50_000_000, maxConcurrentJobs: Int = 2, maxQueuedJobs: Int = 64,
        timeLimit: Duration = .seconds(10)
    ) {
        self.maxSourcePixels = maxSourcePixels
        self.maxConcurrentJobs = max(1, maxConcurrentJobs)
        self.maxQueuedJobs = max(0, maxQueuedJobs)
        self.timeLimit = timeLimit
    }
}

/// What an image file's header says (no pixel decoded).
public struct ImageHeader: Sendable, Equatable {
    /// `jpeg`, `png`, `webp` or `gif`.
    public var format: String
    public var width: Int
    /// One page's height.
    public var height: Int
    public var pages: Int
}

/// A finished thumbnail: the encoded bytes and what they are.
public struct Thumbnail: Sendable {
    public var bytes: [UInt8]
    public var format: ImageFormat
    public var width: Int
    public var height: Int
}

/// Makes bounded thumbnails with libvips: source size checked from the header first, a fixed number of
/// jobs at once (each on a thread of its own, off Swift's cooperative pool), a queue of bounded length, and a
/// time limit per job enforced inside libvips' pipeline. JPEG sources are shrunk while they are decoded, so
/// a 12-megapixel photo costs a fraction of its full decode.
public final class Thumbnailer: Sendable {
    public let limits: ThumbnailLimits
    private let gate: JobGate

    public init(limits: ThumbnailLimits = ThumbnailLimits()) {
        self.limits = limits
        self.gate = JobGate(running: limits.maxConcurrentJobs, queued: limits.maxQueuedJobs)
    }

    /// Reads the header of the image in `path`: refuses junk and formats outside JPEG, PNG, WebP and GIF.
    public static func header(path: String) throws(ThumbnailError) -> ImageHeader {
        try startVips()
        guard let loaderName = hb_vips_loader(path) else {
            throw .unsupportedImage(takeVipsError(or: "unknown file format"))
        }
        let loader = String(cString: loaderName)
        guard let format = allowedLoaders[loader] else {
            throw .unsupportedImage("libvips reads it with \(loader), which is not enabled")
        }
        var width: Int32 = 0
        var height: Int32 = 0
        var pages: Int32 = 0
        guard hb_vips_header(path, &width, &height, &pages) == 0 else {
            throw .decodeFailed(takeVipsError(or: "unreadable header"))
        }
        return ImageHeader(format: format, width: Int(width), height: Int(height), pages: Int(pages))
    }

    /// A thumbnail of the image in `path` as `request` asks, within the limits.
    public func thumbnail(path: String, request: ImageViewRequest) async throws(ThumbnailError) -> Thumbnail {
        try await gate.enter()
        let result = await run(path: path, request: request)
        await gate.leave()
        return try result.get()
    }

    /// A thumbnail of a source that has to be written to a file first (a `MediaStore`'s byte stream):
    /// `writeSource` writes the file at the temporary path it is given, inside the job's slot, so no more than
    /// `maxConcurrentJobs` copies exist at once, and the file is removed afterwards. Throws `ThumbnailError`,
    /// or what `writeSource` threw.
    public func thumbnail(request: ImageViewRequest, writeSource: (String) async throws -> Void) async throws -> Thumbnail {
        try await gate.enter()
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("hookbot-thumb-\(UUID().uuidString)").path
        let result: Result<Thumbnail, any Error>
        do {
            try await writeSource(path)
            result = await run(path: path, request: request).mapError { $0 }
        } catch {
            result = .failure(error)
        }
        unlink(path)
        await gate.leave()
        return try result.get()
    }

    private func run(path: String, request: ImageViewRequest) async -> Result<Thumbnail, ThumbnailError> {
        let limits = limits
        return await withCheckedContinuation { continuation in
            DispatchQueue.global(qos: .userInitiated).async {
                continuation.resume(
                    returning: Result { () throws(ThumbnailError) in
                        try Self.make(path: path, request: request, limits: limits)
                    })
            }
        }
    }

    private static func make(path: String, request: ImageViewRequest, limits: ThumbnailLimits) throws(ThumbnailError) -> Thumbnail {
        let header = try header(path: path)
        guard header.width * header.height <= limits.maxSourcePixels else {
            throw .sourceTooLarge(width: header.width, height: header.height, limit: limits.maxSourcePixels)
        }
        let format = request.format ?? ImageFormat(name: header.format) ?? .png
        // libvips' thumbnail takes a width and an optional height; a missing side is "unbounded" (the
        // largest size libvips accepts), so the other side alone decides the scale.
        let unbounded: Int32 = 10_000_000
        let width = request.width.map(Int32.init) ?? unbounded
        let height = request.height.map(Int32.init) ?? unbounded
        let (seconds, attoseconds) = limits.timeLimit.components
        let timeoutMicroseconds = seconds * 1_000_000 + attoseconds / 1_000_000_000_000
        var buffer: UnsafeMutableRawPointer?
        var length = 0
        var outWidth: Int32 = 0
        var outHeight: Int32 = 0
        var timedOut: Int32 = 0
        let status = hb_vips_thumbnail(
            path, header.format == "jpeg" ? 1 : 0, header.format == "webp" ? 1 : 0, shrinkOnLoad(header, request), width, height,
            request.mode == .crop ? 1 : 0, format.vipsCode, Int32(request.quality ?? 75), gint64(timeoutMicroseconds), &buffer, &length,
            &outWidth, &outHeight, &timedOut)
        defer { hb_vips_free(buffer) }
        if status != 0 && timedOut != 0 {
            hb_vips_clear_error()
            throw .timedOut(milliseconds: Int(timeoutMicroseconds / 1000))
        }
        guard status == 0, let buffer else { throw .decodeFailed(takeVipsError(or: "thumbnail failed")) }
        let bytes = [UInt8](UnsafeRawBufferPointer(start: buffer, count: length))
        return Thumbnail(bytes: bytes, format: format, width: Int(outWidth), height: Int(outHeight))
    }

    /// How much smaller a JPEG or WebP should be decoded (1, 2, 4 or 8) before libvips' own resampling: the
    /// factor the request needs, halved for quality, as libvips' `thumbnail` from a file chooses it.
    private static func shrinkOnLoad(_ header: ImageHeader, _ request: ImageViewRequest) -> Int32 {
        var factors: [Double] = []
        if let width = request.width { factors.append(Double(header.width) / Double(width)) }
        if let height = request.height { factors.append(Double(header.height) / Double(height)) }
        // Fitting within W×H shrinks by the larger factor; filling it (crop) by the smaller one.
        guard let factor = request.mode == .fit ? factors.max() : factors.min() else { return 1 }
        switch factor {
        case 16...: return 8
        case 8...: return 4
        case 4...: return 2
        default: return 1
        }
    }

    /// The loaders `hb_vips_start` leaves unblocked, by the class name `vips_foreign_find_load` answers.
    private static let allowedLoaders: [String: String] = [
        "VipsForeignLoadJpegFile": "jpeg", "VipsForeignLoadPngFile": "png", "VipsForeignLoadWebpFile": "webp",
        "VipsForeignLoadNsgifFile": "gif",
    ]
}

/// libvips started once per process (see `hb_vips_start`): one worker thread per job, since jobs already run
/// side by side under `ThumbnailLimits.maxConcurrentJobs`.
private let vipsStarted: Bool = hb_vips_start(1) == 0

func startVips() throws(ThumbnailError) {
    guard vipsStarted else { throw .decodeFailed("libvips failed to start: \(takeVipsError(or: "unknown error"))") }
}

/// The text of libvips' error buffer (one per process), cleared.
private func takeVipsError(or fallback: String) -> String {
    let text = String(cString: hb_vips_error()).trimmingCharacters(in: "\n ")
    hb_vips_clear_error()
    return text.isEmpty ? fallback : text
}

extension ImageFormat {
    fileprivate var vipsCode: Int32 {
        switch self {
        case .jpeg: Int32(HB_VIPS_JPEG)
        case .png: Int32(HB_VIPS_PNG)
        case .webp: Int32(HB_VIPS_WEBP)
        }
    }
}

extension String {
    fileprivate func trimmingCharacters(in set: String) -> String {
        var text = Substring(self)
        while let last = text.last, set.contains(last) { text.removeLast() }
        while let first = text.first, set.contains(first) { text.removeFirst() }
        return String(text)
    }
}

/// At most `running` holders at once and `queued` waiters; a waiter beyond that is refused.
private actor JobGate {
    private let capacity: Int
    private let queueLimit: Int
    private var active = 0
    private var waiters: [CheckedContinuation<Void, Never>] = []

    init(running: Int, queued: Int) {
        capacity = running
        queueLimit = queued
    }

    func enter() async throws(ThumbnailError) {
        if active < capacity {
            active += 1
            return
        }
        guard waiters.count < queueLimit else { throw .busy(queued: waiters.count) }
        await withCheckedContinuation { waiters.append($0) }
    }

    /// Hands the slot to the first waiter, or frees it.
    func leave() {
        if waiters.isEmpty {
            active -= 1
        } else {
            waiters.removeFirst().resume()
        }
    }
}
