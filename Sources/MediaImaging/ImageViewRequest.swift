/// A thumbnail request in LeanCloud's URL form (qiniu's `imageView2`), as the SDKs build it:
/// `<file url>?imageView/<mode>/w/<W>/h/<H>/q/<Q>/format/<F>` (`AV.File#thumbnailURL(width, height,
/// quality = 100, scaleToFit = true, fmt = 'png')` always sends all four; older SDKs send only `w` when no height
/// is given). qiniu's own spelling `imageView2/<mode>/…` is accepted too.
///
/// - mode 2 (`scaleToFit`): the whole image, scaled to fit within W×H, aspect kept; with only one of W or H
///   the other side follows the aspect.
/// - mode 1 (`scaleToFit = false`): the image scaled to fill W×H, then the centre cut to exactly W×H; needs
///   both W and H.
///
/// Thumbnails are never enlarged: a 100×50 source asked for `w/400/h/400` comes back 100×50 (a bounded
/// output; qiniu does the same for mode 2). Other qiniu modes (0, 3–5) and keys (`interlace`,
/// `ignore-error`, …) are refused with a clear error rather than silently ignored.
public struct ImageViewRequest: Sendable, Equatable {
    public enum Mode: Int, Sendable {
        /// Fill W×H and cut the centre.
        case crop = 1
        /// Fit within W×H.
        case fit = 2
    }

    public var mode: Mode
    public var width: Int?
    public var height: Int?
    /// 1–100; nil means the encoder's default (75, qiniu's default).
    public var quality: Int?
    /// nil means the source's format (PNG for a GIF source).
    public var format: ImageFormat?

    public init(mode: Mode, width: Int?, height: Int?, quality: Int? = nil, format: ImageFormat? = nil) {
        self.mode = mode
        self.width = width
        self.height = height
        self.quality = quality
        self.format = format
    }

    /// The largest W or H accepted (LeanCloud's and qiniu's thumbnails stop well below this too).
    public static let maxDimension = 4096

    /// The imageView request in a URL's query (`imageView/2/w/100/h/100&other=1`): nil when the query names
    /// none, an error when it names one that is malformed.
    public static func fromQuery(_ query: String) throws(ThumbnailError) -> ImageViewRequest? {
        for part in query.split(separator: "&") {
            let spec = part.removingPercentEncodingIfPossible
            if spec.hasPrefix("imageView/") || spec.hasPrefix("imageView2/") || spec == "imageView" || spec == "imageView2" {
                return try parse(spec)
            }
        }
        return nil
    }

    /// Parses `imageView/2/w/100/h/100[/q/80][/format/jpg]` (or `imageView2/2/…`).
    public static func parse(_ spec: String) throws(ThumbnailError) -> ImageViewRequest {
        var parts = spec.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        if parts.last == "" { parts.removeLast() } // a trailing slash
        guard let head = parts.first else { throw .badRequest("empty imageView request") }
        parts.removeFirst()
        if head == "imageView" {
            guard !parts.isEmpty else { throw .badRequest("imageView needs a mode: imageView/2/w/W/h/H") }
        } else if head != "imageView2" {
            throw .badRequest("not an imageView request: \(head)")
        }
        guard let modeText = parts.first else { throw .badRequest("imageView needs a mode: imageView/2/w/W/h/H") }
        parts.removeFirst()
        guard let modeNumber = Int(modeText), let mode = Mode(rawValue: modeNumber) else {
            throw .badRequest("imageView mode \(modeText) is not supported (1: crop to W×H, 2: fit within W×H)")
        }
        guard parts.count % 2 == 0 else {
            throw .badRequest("imageView parameter \(parts.last ?? "") has no value (keys and values alternate: w/100/h/100)")
        }
        var request = ImageViewRequest(mode: mode, width: nil, height: nil)
        var seen: Set<String> = []
        for index in stride(from: 0, to: parts.count, by: 2) {
            let key = parts[index]
            let value = parts[index + 1]
            guard seen.insert(key).inserted else { throw .badRequest("imageView parameter \(key) is given twice") }
            switch key {
            case "w": request.width = try dimension(key, value)
            case "h": request.height = try dimension(key, value)
            case "q":
                guard let quality = Int(value), (1...100).contains(quality) else {
                    throw .badRequest("imageView quality must be 1-100, got \(value)")
                }
                request.quality = quality
            case "format":
                guard let format = ImageFormat(name: value) else {
                    throw .badRequest("imageView format \(value) is not supported (jpg, png, webp)")
                }
                request.format = format
            default:
                throw .badRequest("imageView parameter \(key) is not supported (w, h, q, format)")
            }
        }
        switch mode {
        case .fit:
            guard request.width != nil || request.height != nil else { throw .badRequest("imageView/2 needs w or h") }
        case .crop:
            guard request.width != nil, request.height != nil else { throw .badRequest("imageView/1 needs both w and h") }
        }
        return request
    }

    private static func dimension(_ key: String, _ value: String) throws(ThumbnailError) -> Int {
        guard let number = Int(value), number >= 1, number <= maxDimension else {
            throw .badRequest("imageView \(key) must be 1-\(maxDimension), got \(value)")
        }
        return number
    }
}

/// The formats a thumbnail is written in.
public enum ImageFormat: String, Sendable, CaseIterable {
    case jpeg
    case png
    case webp

    /// `jpg`, `jpeg`, `png`, `webp` (any case), as in imageView's `format/`.
    public init?(name: String) {
        switch name.lowercased() {
        case "jpg", "jpeg": self = .jpeg
        case "png": self = .png
        case "webp": self = .webp
        default: return nil
        }
    }

    public var mimeType: String {
        switch self {
        case .jpeg: "image/jpeg"
        case .png: "image/png"
        case .webp: "image/webp"
        }
    }
}

extension Substring {
    /// `%2F` and friends decoded when the query was escaped; the text as is when it is not valid escaping.
    fileprivate var removingPercentEncodingIfPossible: String {
        guard contains("%") else { return String(self) }
        var bytes: [UInt8] = []
        var iterator = utf8.makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next(), let low = iterator.next(),
                    let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)
                else { return String(self) }
                bytes.append(value)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
