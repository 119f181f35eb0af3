import Foundation
import IMCore
import NIOCore

/// One stored file as the records table keeps it. Several records may share one content (de-duplication):
/// the public `id` is random and says nothing about the content hash.
public struct MediaRecord: Sendable, Equatable {
    /// Public id (random, URL-safe, unguessable; `MediaIDs.make()`).
    public var id: String
    /// The uploader's client id; `""` for the operator or the app key.
    public var owner: String
    /// The file name the uploader gave, cleaned of path parts (`MediaNames.clean`).
    public var name: String
    /// The Content-Type the uploader declared, if any (the served type is `metadata.mime`).
    public var declaredMIME: String?
    public var metadata: MediaMetadata
    /// Milliseconds since 1970.
    public var createdAt: Int64

    public init(id: String, owner: String, name: String, declaredMIME: String?, metadata: MediaMetadata, createdAt: Int64) {
        self.id = id
        self.owner = owner
        self.name = name
        self.declaredMIME = declaredMIME
        self.metadata = metadata
        self.createdAt = createdAt
    }
}

/// What an upload asks for. `id` may be chosen before any byte arrives (LeanCloud's `fileTokens` answers
/// the id and URL first): make it with `MediaIDs.make()`.
public struct MediaUpload: Sendable {
    public var id: String
    public var owner: String
    public var name: String
    public var declaredMIME: String?
    /// The body is cut off (and nothing kept) once it passes this many bytes.
    public var maxBytes: Int64
    /// The owner's stored bytes (all its records) may not pass this after the upload; nil: no quota.
    public var quotaBytes: Int64?

    public init(id: String = MediaIDs.make(), owner: String, name: String, declaredMIME: String?, maxBytes: Int64, quotaBytes: Int64?) {
        self.id = id
        self.owner = owner
        self.name = name
        self.declaredMIME = declaredMIME
        self.maxBytes = maxBytes
        self.quotaBytes = quotaBytes
    }
}

/// Why a media operation failed; each has an HTTP status and a numeric code for the HTTP answer.
public struct MediaError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The body passed `MediaUpload.maxBytes` (HTTP 413, code 4601).
        case tooLarge
        /// The owner's quota would be passed (HTTP 413, code 4602).
        case quotaExceeded
        /// The body ended before its declared length or the client went away (HTTP 400, code 4603).
        case truncated
        /// No such file (HTTP 404, code 4604).
        case notFound
        /// The id is taken already (HTTP 409, code 4605).
        case idTaken
        /// Writing failed: disk full, permissions (HTTP 507, code 4606). Nothing half-written is kept.
        case storageFailed
        /// The caller may not do this (HTTP 403, code 4607).
        case forbidden
        /// A request the route cannot use: a bad Range, a bad name (HTTP 400 or 416, code 4608).
        case badRequest
        /// This server's store keeps no media records (HTTP 501, code 4609).
        case unavailable
    }

    public var kind: Kind
    public var reason: String

    public init(_ kind: Kind, _ reason: String) {
        self.kind = kind
        self.reason = reason
    }

    public var code: Int {
        switch kind {
        case .tooLarge: 4601
        case .quotaExceeded: 4602
        case .truncated: 4603
        case .notFound: 4604
        case .idTaken: 4605
        case .storageFailed: 4606
        case .forbidden: 4607
        case .badRequest: 4608
        case .unavailable: 4609
        }
    }

    public var description: String { "\(code) \(reason)" }
}

/// Where file bytes and their records live. `ContentAddressedMediaStore` is the one implementation: records
/// in the server's database (`MediaRecordTable`), bytes in a `MediaContent` backend (the local directory,
/// or the PostgreSQL database so that every node of a cluster serves every file; an S3-compatible bucket
/// fits the same shape). `store` streams a body in and commits it whole or not at all, `read` streams a
/// byte range out.
public protocol MediaStore: Sendable {
    /// Streams `body` in (never whole in memory), computes the metadata, de-duplicates by SHA-256 and
    /// records the file under `upload.id`. Throws `MediaError` (.tooLarge, .quotaExceeded, .truncated,
    /// .idTaken, .storageFailed); on any error nothing is kept.
    func store<Body: AsyncSequence>(_ upload: MediaUpload, body: Body) async throws -> MediaRecord
    where Body.Element == ByteBuffer

    /// The record of `id`, or nil.
    func record(_ id: String) async throws -> MediaRecord?

    /// The bytes of `record` in `range` (offsets into the content, already checked against its size), as
    /// chunks of at most a few hundred KiB.
    func read(_ record: MediaRecord, range: Range<Int64>) -> AsyncThrowingStream<ByteBuffer, any Error>

    /// Removes the record; the content goes when no other record shares it. False when there was none.
    func delete(_ id: String) async throws -> Bool

    /// Bytes stored by `owner` (the sum of its records' sizes: the quota counts these).
    func usage(owner: String) async throws -> Int64
}

/// Public ids of stored files: 22 characters of URL-safe base64 from 16 random bytes (128 bits).
public enum MediaIDs {
    public static func make() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    /// An id a client may name: 1–64 characters of `[A-Za-z0-9_-]`.
    public static func isValid(_ id: String) -> Bool {
        !id.isEmpty && id.count <= 64
            && id.unicodeScalars.allSatisfy { ($0.isASCII && CharacterSet.alphanumerics.contains($0)) || $0 == "-" || $0 == "_" }
    }
}

/// File names as stored and served: the last path component, no control characters, at most 200 bytes.
public enum MediaNames {
    public static func clean(_ name: String) -> String {
        let last = name.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last.map(String.init) ?? ""
        var kept = String(String.UnicodeScalarView(last.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F && $0 != "\"" }))
        while kept.utf8.count > 200 { kept.removeLast() }
        if kept == "." || kept == ".." || kept.trimmingCharacters(in: .whitespaces).isEmpty { return "file" }
        return kept
    }
}
