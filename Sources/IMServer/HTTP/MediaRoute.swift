import Foundation
import HTTPTypes
import Hummingbird
import IMCore

/// Hookbot's own media API on the server's port (docs/MEDIA.md):
/// - `POST /media?name=<file name>`: the body is the file (any `Content-Type`, not multipart). The caller
///   is a logged-in client (`X-LC-IM-Session-Token`) or the operator (`X-LC-Key: <master key>,master`).
///   Answers 201 with the record and the metadata the server computed.
/// - `GET /media/<id>[/<name>]` (and `HEAD`): the bytes, with `Range`, `ETag` / `If-None-Match`,
///   `Cache-Control`, the sniffed `Content-Type` and `Content-Disposition`. Anyone with the URL may read;
///   with signed URLs (`MediaConfiguration.signedURLs`) only by `GET /media/<id>/<expires>-<mac>/<name>`
///   with a valid, unexpired signature (`MediaURLs`), else 403 / 4610, 4611.
/// - `DELETE /media/<id>`: the uploader or the operator.
///
/// Errors answer `{"code", "reason", "error"}`: `MediaError` codes 46xx, and 4112 (`sessionTokenExpired`)
/// for a missing or unknown session token.
enum MediaRoute {
    static func register(on router: Router<BasicRequestContext>, service: IMService, media: (any MediaStore)?) {
        let limits = service.configuration.media
        let urls = service.mediaURLs
        let thumbnails = service.mediaThumbnails
        router.post("/media") { request, _ -> Response in
            await guarded { try await upload(request, service: service, media: available(media), limits: limits, urls: urls) }
        }
        // `/media/<id>/<name>` and, signed, `/media/<id>/<expires>-<mac>/<name>`.
        // (Hummingbird wants one parameter name per position: `:part` is the name or the signature.)
        for path in ["/media/:id", "/media/:id/:part", "/media/:id/:part/:name"] {
            let signedPath = path.hasSuffix(":name")
            for head in [false, true] {
                let handler: @Sendable (Request, BasicRequestContext) async -> Response = { request, context in
                    await guarded {
                        let id = context.parameters.get("id") ?? ""
                        try urls.check(id: id, signature: signedPath ? context.parameters.get("part") : nil)
                        return try await download(
                            request, id: id, media: available(media), limits: limits, thumbnails: thumbnails, head: head)
                    }
                }
                if head { router.head(RouterPath(path), use: handler) } else { router.get(RouterPath(path), use: handler) }
            }
        }
        router.delete("/media/:id") { request, context -> Response in
            await guarded { try await delete(request, context: context, service: service, media: available(media)) }
        }
        // A page on another origin (a remote bot's console) uploads with a session token header: its browser
        // asks first. Authority is in headers, never cookies, so any origin may call, as /1.1/files allows.
        for path in ["/media", "/media/:id"] {
            router.on(RouterPath(path), method: .options) { _, _ in
                var response = Response(status: .noContent)
                response.headers[.accessControlAllowOrigin] = "*"
                response.headers[.accessControlAllowMethods] = "GET, HEAD, POST, DELETE, OPTIONS"
                response.headers[.accessControlAllowHeaders] = "X-LC-IM-Session-Token, X-LC-Key, Content-Type"
                response.headers[.accessControlMaxAge] = "86400"
                return response
            }
        }
    }

    private static func available(_ media: (any MediaStore)?) throws -> any MediaStore {
        guard let media else {
            throw MediaError(.unavailable, "this server keeps no media: the PostgreSQL media backend is not built yet")
        }
        return media
    }

    /// `answered`, readable from any origin.
    private static func guarded(_ body: () async throws -> Response) async -> Response {
        var response = await answered(body)
        response.headers[.accessControlAllowOrigin] = "*"
        return response
    }

    private static func answered(_ body: () async throws -> Response) async -> Response {
        do {
            return try await body()
        } catch let error as MediaError {
            return failure(error)
        } catch let error as MediaURLError {
            return answer(.forbidden, code: error.code, reason: error.reason, detail: error.detail)
        } catch let error as IMError {
            let status: HTTPResponse.Status = error.knownCode == .sessionTokenExpired ? .unauthorized : .badRequest
            return answer(status, code: error.code, reason: error.reason, detail: error.detail ?? error.reason)
        } catch {
            return answer(.internalServerError, code: IMError(.internalError).code, reason: "INTERNAL_ERROR", detail: "\(error)")
        }
    }

    static func status(_ kind: MediaError.Kind) -> HTTPResponse.Status {
        switch kind {
        case .tooLarge, .quotaExceeded: .contentTooLarge
        case .truncated, .badRequest: .badRequest
        case .notFound: .notFound
        case .idTaken: .conflict
        case .storageFailed: .init(code: 507, reasonPhrase: "Insufficient Storage")
        case .forbidden: .forbidden
        case .unavailable: .notImplemented
        }
    }

    /// A media failure's answer (also LeanCloud's file API's: the same statuses and codes).
    static func failure(_ error: MediaError) -> Response {
        answer(status(error.kind), code: error.code, reason: "\(error.kind)", detail: error.reason)
    }

    private static func answer(_ status: HTTPResponse.Status, code: Int, reason: String, detail: String) -> Response {
        HTTPJSON.error(status, code: code, reason: reason, detail: detail)
    }

    /// Who is calling: a client id, `""` for the operator; throws when neither.
    private static func caller(_ request: Request, service: IMService) async throws -> String {
        if let key = request.headers[HTTPField.Name("X-LC-Key")!], let master = service.configuration.masterKey,
            key == "\(master),master"
        {
            return ""
        }
        guard let token = request.headers[HTTPField.Name("X-LC-IM-Session-Token")!], !token.isEmpty else {
            throw IMError(.sessionTokenExpired, "the header X-LC-IM-Session-Token (the st of session opened) is missing")
        }
        guard let clientID = try await service.tokens.clientID(for: token) else {
            throw IMError(.sessionTokenExpired, "the session token is unknown or expired; open a session again")
        }
        return clientID
    }

    private static func upload(
        _ request: Request, service: IMService, media: any MediaStore, limits: MediaConfiguration, urls: MediaURLs
    ) async throws -> Response {
        let owner = try await caller(request, service: service)
        // Refused before a byte of the body is read when the declared length says so.
        if let length = request.headers[.contentLength].flatMap({ Int64($0) }), length > limits.maxUploadBytes {
            throw MediaError(.tooLarge, "Content-Length \(length) passes the upload limit of \(limits.maxUploadBytes) bytes")
        }
        let query = Dictionary(request.uri.queryParameters.map { (String($0.key), String($0.value)) }) { first, _ in first }
        let record = try await media.store(
            MediaUpload(
                owner: owner, name: query["name"] ?? "file", declaredMIME: request.headers[.contentType],
                maxBytes: limits.maxUploadBytes, quotaBytes: owner.isEmpty ? nil : limits.quotaBytes),
            body: request.body)
        return HTTPJSON.response(.created, json(record, url: urls.uploadAnswerURL(id: record.id, name: record.name)))
    }

    /// The JSON of a record, as `POST /media` answers it.
    static func json(_ record: MediaRecord, url: String) -> JSONValue {
        let m = record.metadata
        var object: [String: JSONValue] = [
            "id": .string(record.id), "name": .string(record.name), "url": .string(url), "size": .int(Int(m.size)),
            "sha256": .string(m.sha256), "mime": .string(m.mime), "createdAt": .int(Int(record.createdAt)),
        ]
        if let format = m.format { object["format"] = .string(format) }
        if let width = m.width { object["width"] = .int(width) }
        if let height = m.height { object["height"] = .int(height) }
        if let duration = m.duration { object["duration"] = .double(duration) }
        return .object(object)
    }

    private static func download(
        _ request: Request, id: String, media: any MediaStore, limits: MediaConfiguration, thumbnails: MediaThumbnails, head: Bool
    ) async throws -> Response {
        guard let record = try await media.record(id) else { throw MediaError(.notFound, "no file \(id)") }
        // ?imageView/…: a thumbnail (MediaThumbnailRoute.swift).
        let thumbnail = await thumbnails.response(request, record: record, media: media, cacheControl: limits.cacheControl, head: head)
        if let thumbnail { return thumbnail }
        let size = record.metadata.size
        let etag = "\"\(record.metadata.sha256)\""
        var headers: HTTPFields = [
            .contentType: record.metadata.mime, .eTag: etag, .cacheControl: limits.cacheControl, .acceptRanges: "bytes",
            .contentDisposition: disposition(record), HTTPField.Name("X-Content-Type-Options")!: "nosniff",
        ]
        if let match = request.headers[.ifNoneMatch],
            match.split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces) == etag || $0 == "*" })
        {
            return Response(status: .notModified, headers: headers)
        }
        var range: Range<Int64> = 0..<size
        var status: HTTPResponse.Status = .ok
        if let text = request.headers[.range], request.headers[.ifRange].map({ $0 == etag }) ?? true {
            guard let asked = byteRange(text, size: size) else {
                headers[.contentRange] = "bytes */\(size)"
                return Response(
                    status: .rangeNotSatisfiable, headers: headers,
                    body: .init(
                        byteBuffer: ByteBuffer(string: #"{"code":4608,"reason":"badRequest","error":"unsatisfiable Range \#(text)"}"#)))
            }
            range = asked
            status = .partialContent
            headers[.contentRange] = "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(size)"
        }
        headers[.contentLength] = String(range.count)
        if head || range.isEmpty { return Response(status: status, headers: headers) }
        return Response(status: status, headers: headers, body: ResponseBody(asyncSequence: media.read(record, range: range)))
    }

    /// One range of `bytes=a-b`, `bytes=a-` or `bytes=-n` within `size`; nil when unsatisfiable or not of
    /// that form (several ranges are not served).
    static func byteRange(_ text: String, size: Int64) -> Range<Int64>? {
        guard text.hasPrefix("bytes="), !text.contains(",") else { return nil }
        let spec = text.dropFirst(6).trimmingCharacters(in: .whitespaces)
        guard let dash = spec.firstIndex(of: "-") else { return nil }
        let first = spec[..<dash]
        let last = spec[spec.index(after: dash)...]
        if first.isEmpty {
            guard let suffix = Int64(last), suffix > 0, size > 0 else { return nil }
            return max(0, size - suffix)..<size
        }
        guard let start = Int64(first), start >= 0, start < size else { return nil }
        if last.isEmpty { return start..<size }
        guard let end = Int64(last), end >= start else { return nil }
        return start..<min(size, end + 1)
    }

    /// Images, audio and video show inline; anything else downloads. The name is given both as plain ASCII
    /// and as RFC 5987 UTF-8.
    static func disposition(_ record: MediaRecord) -> String {
        let mime = record.metadata.mime
        let inline = mime.hasPrefix("image/") || mime.hasPrefix("audio/") || mime.hasPrefix("video/")
        let ascii = String(String.UnicodeScalarView(record.name.unicodeScalars.map { $0.isASCII && $0 != "\\" ? $0 : "_" }))
        let encoded =
            record.name.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? "file"
        return "\(inline ? "inline" : "attachment"); filename=\"\(ascii)\"; filename*=UTF-8''\(encoded)"
    }

    private static func delete(_ request: Request, context: BasicRequestContext, service: IMService, media: any MediaStore) async throws
        -> Response
    {
        let who = try await caller(request, service: service)
        let id = context.parameters.get("id") ?? ""
        guard let record = try await media.record(id) else { throw MediaError(.notFound, "no file \(id)") }
        let allowed = try await who.isEmpty ? true : service.mayDelete(media: id, owner: record.owner, by: who)
        guard allowed else {
            throw MediaError(
                .forbidden, "only the uploader of \(id), the operator, or a manager of every conversation that shows it may delete it")
        }
        guard try await media.delete(id) else { throw MediaError(.notFound, "no file \(id)") }
        return HTTPJSON.response(.ok, ["deleted": JSONValue.string(id)])
    }
}
