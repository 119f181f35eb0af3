/// Why a thumbnail was not made: each case has a numeric code (4621-4626, after the media store's 4601-4609), the HTTP
/// status an HTTP route answers with, and a reason for people.
public enum ThumbnailError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The imageView request is malformed (4621, HTTP 400).
    case badRequest(String)
    /// The file is not an image libvips may decode here: junk, or a format outside JPEG, PNG, WebP, GIF
    /// (4622, HTTP 415).
    case unsupportedImage(String)
    /// The header declares more pixels than the limit: refused before any pixel is decoded (4623, HTTP 422).
    case sourceTooLarge(width: Int, height: Int, limit: Int)
    /// Every thumbnail worker is busy and the queue is full (4624, HTTP 503).
    case busy(queued: Int)
    /// The job ran past its time limit and was stopped (4625, HTTP 503).
    case timedOut(milliseconds: Int)
    /// The image is damaged (truncated, bad data) or libvips failed (4626, HTTP 422).
    case decodeFailed(String)

    public var code: Int {
        switch self {
        case .badRequest: 4621
        case .unsupportedImage: 4622
        case .sourceTooLarge: 4623
        case .busy: 4624
        case .timedOut: 4625
        case .decodeFailed: 4626
        }
    }

    public var httpStatus: Int {
        switch self {
        case .badRequest: 400
        case .unsupportedImage: 415
        case .sourceTooLarge, .decodeFailed: 422
        case .busy, .timedOut: 503
        }
    }

    public var reason: String {
        switch self {
        case .badRequest(let detail): detail
        case .unsupportedImage(let detail): "not a supported image (JPEG, PNG, WebP, GIF): \(detail)"
        case .sourceTooLarge(let width, let height, let limit):
            "image is \(width)×\(height) = \(width * height) pixels, more than the thumbnail limit of \(limit)"
        case .busy(let queued): "thumbnailer busy: every worker is in use and \(queued) jobs are waiting; retry later"
        case .timedOut(let milliseconds): "thumbnail stopped after its time limit of \(milliseconds) ms"
        case .decodeFailed(let detail): "image could not be decoded: \(detail)"
        }
    }

    public var description: String { "\(code) \(reason)" }
}
