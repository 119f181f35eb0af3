import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import IMCore

/// LeanCloud's storage REST API for files, as the official storage SDK (`AV.File#save()`, `fetch()`,
/// `destroy()`) calls it, on the server's port:
/// - `POST /1.1/fileTokens` `{name, mime_type?, metaData?, …}` answers the file's `objectId` and public `url`
///   before any byte is sent, with `provider: "s3"`, an `upload_url` on this server that carries its own
///   short-lived authorisation (`LeanCloudUploadTicket`) and the same ticket as `token`;
/// - `PUT <upload_url>` with the bytes (no LeanCloud header: the SDK sends only `Content-Type` and
///   `Cache-Control`) streams them into the `MediaStore` under that `objectId`; the upload is complete when
///   the `PUT` ends;
/// - `POST /1.1/fileCallback` `{token, result}`: `result: false` removes what the upload stored, `true` is
///   acknowledged (the SDK sends it without waiting for the answer);
/// - `GET /1.1/files/<objectId>`: the file with the metadata the server computed;
/// - `DELETE /1.1/files/<objectId>`: by its uploader (session token) or the master key.
/// Who is asking is `LeanCloudCaller`; errors answer `{"code", "reason", "error"}` (`LeanCloudFilesError`,
/// and `MediaError`'s 46xx codes for the store's refusals).
enum LeanCloudFilesRoute {
    /// Largest `fileTokens` / `fileCallback` JSON body.
    static let maxJSONBytes = 64 * 1024

    /// Registers the routes; with no media store (a server on PostgreSQL, for now) each answers 4609.
    static func register(on router: Router<BasicRequestContext>, service: IMService, media store: (any MediaStore)?) {
        let configuration = service.configuration
        let limits = configuration.media
        let media: any MediaStore = store ?? NoMediaStore()
        let key = LeanCloudUploadTicket.signingKey(configuration)
        let urls = service.mediaURLs
        router.post("/1.1/fileTokens") { request, _ in
            await answering {
                guard store != nil else { throw MediaError(.unavailable, "this server keeps no files (no media store on PostgreSQL yet)") }
                let caller = try await LeanCloudCaller.identify(request, configuration: configuration, tokens: service.tokens)
                let body = try await jsonBody(request)
                try await refuseEarly(declaredSize: body["metaData"]?["size"]?.intValue, caller: caller, media: media, limits: limits)
                let base = urls.publicURL ?? baseURL(request, configuration)
                return try fileToken(request, body: body, caller: caller, base: base, urls: urls, key: key)
            }
        }
        router.put("/1.1/fileUploads/:objectId") { request, context in
            await answering {
                try await upload(request, objectID: context.parameters.get("objectId") ?? "", media: media, limits: limits, key: key)
            }
        }
        router.post("/1.1/fileCallback") { request, _ in
            await answering {
                let body = try await jsonBody(request)
                guard let token = body["token"]?.stringValue else { throw LeanCloudFilesError.invalidField("token (a string) is required") }
                let ticket = try LeanCloudUploadTicket.decode(token, key: key)
                if body["result"]?.boolValue == false, let record = try await media.record(ticket.objectID),
                    record.owner == (ticket.uploader ?? "")
                {
                    _ = try await media.delete(ticket.objectID)
                }
                return HTTPJSON.response(.ok, [String: JSONValue]())
            }
        }
        // Browsers on another origin (the SDK in a web app) ask first; authority is in headers, never cookies,
        // so any origin may call.
        for path in ["/1.1/fileTokens", "/1.1/fileCallback", "/1.1/files", "/1.1/files/:objectId", "/1.1/fileUploads/:objectId"] {
            router.on(RouterPath(path), method: .options) { _, _ in preflight() }
        }
        // `AV.File.withURL(name, url).save()` asks for a record of a file kept elsewhere: `POST /1.1/files/<name>`
        // `{name, url, mime_type, metaData}` (the SDK puts the name in the path; `/1.1/files` is taken too).
        let external = ExternalFiles.table(service.store)
        for path in ["/1.1/files", "/1.1/files/:objectId"] {
            router.post(RouterPath(path)) { request, _ in
                await answering {
                    let caller = try await LeanCloudCaller.identify(request, configuration: configuration, tokens: service.tokens)
                    guard let external else { throw MediaError(.unavailable, "this server keeps no records of external files") }
                    let body = try await jsonBody(request)
                    guard let given = body["url"]?.stringValue else {
                        throw LeanCloudFilesError.invalidField("url (the file's http or https URL) is required")
                    }
                    guard let url = ExternalFiles.acceptable(given) else {
                        throw LeanCloudFilesError.invalidField(
                            "url must be an absolute http or https URL without credentials, of at most \(ExternalFiles.maxURLBytes) bytes")
                    }
                    let mime = body["mime_type"]?.stringValue.flatMap { $0.isEmpty ? nil : String($0.prefix(200)) }
                    let file = try await external.record(
                        owner: caller.clientID ?? "", url: url, name: ExternalFiles.name(given: body["name"]?.stringValue, url: url),
                        mime: mime)
                    let answer: [String: JSONValue] = [
                        "objectId": .string(file.id), "name": .string(file.name), "url": .string(file.url),
                        "createdAt": .string(isoDate(file.createdAt)),
                    ]
                    return HTTPJSON.response(.created, JSONValue.object(answer))
                }
            }
        }
        router.get("/1.1/files/:objectId") { request, context in
            await answering {
                // With signed URLs the answer hands out a fresh one, so the id alone is not enough: a caller the
                // storage API knows (a session, the master key, or the app key while signatures are off).
                if urls.signed { _ = try await LeanCloudCaller.identify(request, configuration: configuration, tokens: service.tokens) }
                let id = context.parameters.get("objectId") ?? ""
                guard MediaIDs.isValid(id), let record = try await media.record(id) else {
                    // A file kept elsewhere: its record, with the URL it was given.
                    if MediaIDs.isValid(id), let file = try await external?.find(id) {
                        return HTTPJSON.response(.ok, JSONValue.object(ExternalFiles.json(file)))
                    }
                    throw LeanCloudFilesError.notFound("no file \(id)")
                }
                let url = urls.url(id: record.id, name: record.name, requestBase: baseURL(request, configuration))
                return HTTPJSON.response(.ok, JSONValue.object(fileJSON(record, url: url)))
            }
        }
        router.delete("/1.1/files/:objectId") { request, context in
            await answering {
                let caller = try await LeanCloudCaller.identify(request, configuration: configuration, tokens: service.tokens)
                let id = context.parameters.get("objectId") ?? ""
                guard MediaIDs.isValid(id), let record = try await media.record(id) else {
                    if MediaIDs.isValid(id), let file = try await external?.find(id) {
                        guard caller.mayDelete(owner: file.owner) else {
                            throw LeanCloudFilesError.forbidden("only the client that named \(id) or the master key may delete it")
                        }
                        _ = try await external?.delete(id)
                        return HTTPJSON.response(.ok, [String: JSONValue]())
                    }
                    throw LeanCloudFilesError.notFound("no file \(id)")
                }
                var allowed = caller.mayDelete(owner: record.owner)
                if !allowed, case .client(let clientID) = caller {
                    allowed = try await service.mayDelete(media: id, owner: record.owner, by: clientID)
                }
                guard allowed else {
                    throw LeanCloudFilesError.forbidden(
                        "only the uploader of \(id), the master key, or a manager of every conversation that shows it may delete it")
                }
                _ = try await media.delete(id)
                return HTTPJSON.response(.ok, [String: JSONValue]())
            }
        }
    }

    /// The headers the SDK sends (`src/request.js`, `src/uploader/s3.js`), allowed from any origin.
    static let allowedHeaders =
        "X-LC-Id, X-LC-Key, X-LC-Sign, X-LC-Session, X-LC-IM-Session-Token, X-LC-UA, X-LC-Prod, X-LC-Hook-Key, Content-Type, Cache-Control"

    private static func preflight() -> Response {
        var response = Response(status: .noContent)
        response.headers[.accessControlAllowOrigin] = "*"
        response.headers[.accessControlAllowMethods] = "GET, POST, PUT, DELETE, OPTIONS"
        response.headers[.accessControlAllowHeaders] = allowedHeaders
        response.headers[.accessControlMaxAge] = "86400"
        return response
    }

    /// Runs `body`, turning what it throws into LeanCloud's error answer; every answer may be read cross-origin.
    private static func answering(_ body: () async throws -> Response) async -> Response {
        var response: Response
        do {
            response = try await body()
        } catch let error as LeanCloudFilesError {
            response = error.response
        } catch let error as MediaError {
            response = MediaRoute.failure(error)
        } catch {
            response = LeanCloudFilesError.internalError("\(error)").response
        }
        response.headers[.accessControlAllowOrigin] = "*"
        response.headers[.accessControlExposeHeaders] = "ETag"
        return response
    }

    private static func jsonBody(_ request: Request) async throws -> [String: JSONValue] {
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: maxJSONBytes)
        } catch {
            throw LeanCloudFilesError.invalidJSON("the body must be a JSON object of at most \(maxJSONBytes) bytes")
        }
        guard let object = JSONValue.parse(bytes: buffer.readableBytesView)?.objectValue else {
            throw LeanCloudFilesError.invalidJSON("the body must be a JSON object")
        }
        return object
    }

    /// The SDK sends the size it knows (`metaData.size`: a Buffer's or a Blob's) with `fileTokens`: a file over the
    /// cap or the uploader's quota is refused before it is sent at all. The `PUT` checks again, on the bytes.
    private static func refuseEarly(declaredSize: Int?, caller: LeanCloudCaller, media: any MediaStore, limits: MediaConfiguration)
        async throws
    {
        guard let size = declaredSize.map(Int64.init), size > 0 else { return }
        if size > limits.maxUploadBytes {
            throw MediaError(.tooLarge, "the file has \(size) bytes; files may have at most \(limits.maxUploadBytes)")
        }
        if let quota = limits.quotaBytes, let owner = caller.clientID {
            let used = try await media.usage(owner: owner)
            if used + size > quota {
                throw MediaError(.quotaExceeded, "\(owner) keeps \(used) bytes; \(size) more would pass the quota of \(quota)")
            }
        }
    }

    /// `base`: the public URL, else the origin the request came by (the answer goes to this requester only).
    private static func fileToken(
        _ request: Request, body: [String: JSONValue], caller: LeanCloudCaller, base: String, urls: MediaURLs, key: Data
    ) throws -> Response {
        guard let rawName = body["name"]?.stringValue else { throw LeanCloudFilesError.invalidField("name (a string) is required") }
        let name = MediaNames.clean(rawName)
        let declared = body["mime_type"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 }
        let mime = declared ?? MIMEGuess.fromExtension(of: name)
        let ticket = LeanCloudUploadTicket(
            objectID: MediaIDs.make(), uploader: caller.clientID, name: name, mimeType: mime,
            expires: Int64(Date().timeIntervalSince1970) + LeanCloudUploadTicket.lifetime)
        let token = ticket.encoded(key: key)
        var query = URLComponents()
        query.queryItems = [URLQueryItem(name: "token", value: token)]
        let answer: [String: JSONValue] = [
            "objectId": .string(ticket.objectID), "token": .string(token),
            "url": .string(urls.url(id: ticket.objectID, name: name, requestBase: base)),
            "upload_url": .string("\(base)/1.1/fileUploads/\(ticket.objectID)\(query.string ?? "")"), "provider": .string("s3"),
            "mime_type": .string(mime), "bucket": .string("hookbot"), "key": .string("\(ticket.objectID)/\(name)"),
            "createdAt": .string(isoDate(Int64(Date().timeIntervalSince1970 * 1000))),
        ]
        return HTTPJSON.response(.ok, JSONValue.object(answer))
    }

    private static func upload(_ request: Request, objectID: String, media: any MediaStore, limits: MediaConfiguration, key: Data)
        async throws
        -> Response
    {
        let query = Dictionary(request.uri.queryParameters.map { (String($0.key), String($0.value)) }) { first, _ in first }
        guard let token = query["token"] else { throw LeanCloudFilesError.unauthorized("the upload URL's token is missing") }
        let ticket = try LeanCloudUploadTicket.decode(token, key: key)
        guard ticket.objectID == objectID else { throw LeanCloudFilesError.unauthorized("the upload token is for another file") }
        if let length = request.headers[.contentLength].flatMap({ Int64($0) }), length > limits.maxUploadBytes {
            throw MediaError(.tooLarge, "the file has \(length) bytes; files may have at most \(limits.maxUploadBytes)")
        }
        let declared = request.headers[.contentType].flatMap { $0.isEmpty ? nil : $0 } ?? ticket.mimeType
        let record = try await media.store(
            MediaUpload(
                id: objectID, owner: ticket.uploader ?? "", name: ticket.name, declaredMIME: declared, maxBytes: limits.maxUploadBytes,
                quotaBytes: limits.quotaBytes),
            body: request.body)
        var response = HTTPJSON.response(.ok, [String: JSONValue]())
        response.headers[.eTag] = "\"\(record.metadata.sha256)\""
        return response
    }

    /// What `GET /1.1/files/<id>` answers: LeanCloud's `_File` fields, `metaData` as the server computed it.
    static func fileJSON(_ record: MediaRecord, url: String) -> [String: JSONValue] {
        let metadata = record.metadata
        var meta: [String: JSONValue] = [
            "size": .int(Int(metadata.size)), "owner": .string(record.owner.isEmpty ? "unknown" : record.owner),
            "sha256": .string(metadata.sha256), "mime_type": .string(metadata.mime),
        ]
        if let format = metadata.format { meta["format"] = .string(format) }
        if let width = metadata.width { meta["width"] = .int(width) }
        if let height = metadata.height { meta["height"] = .int(height) }
        if let duration = metadata.duration { meta["duration"] = .double(duration) }
        let created = JSONValue.string(isoDate(record.createdAt))
        return [
            "objectId": .string(record.id), "name": .string(record.name), "url": .string(url),
            "mime_type": .string(metadata.mime), "metaData": .object(meta), "provider": .string("s3"), "bucket": .string("hookbot"),
            "key": .string("\(record.id)/\(record.name)"), "createdAt": created, "updatedAt": created,
        ]
    }

    /// `scheme://host[:port]` as the client reached this server: its `Host`, and `X-Forwarded-Proto` when a
    /// proxy in front terminates TLS. Used only when no public URL is set, and only in answers to that client.
    static func baseURL(_ request: Request, _ configuration: ServerConfiguration) -> String {
        let host = request.head.authority ?? "\(configuration.host):\(configuration.port)"
        let forwarded = request.headers[HTTPField.Name("X-Forwarded-Proto")!]?.lowercased()
        let scheme = forwarded == "https" || forwarded == "http" ? forwarded! : (configuration.tls == nil ? "http" : "https")
        return "\(scheme)://\(host)"
    }

    static func isoDate(_ millis: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date(timeIntervalSince1970: Double(millis) / 1000))
    }
}

/// The type LeanCloud's `fileTokens` answers for a name's extension (what the SDK then `PUT`s with); the
/// type served is always the one sniffed from the bytes.
enum MIMEGuess {
    static let byExtension: [String: String] = [
        "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp",
        "mp3": "audio/mpeg", "wav": "audio/wav", "m4a": "audio/mp4", "ogg": "audio/ogg", "mp4": "video/mp4", "mov": "video/quicktime",
        "txt": "text/plain", "json": "application/json", "pdf": "application/pdf", "zip": "application/zip",
    ]

    static func fromExtension(of name: String) -> String {
        guard let dot = name.lastIndex(of: ".") else { return "application/octet-stream" }
        return byExtension[name[name.index(after: dot)...].lowercased()] ?? "application/octet-stream"
    }
}

/// What the routes use when the server has no media store: every operation answers 4609.
private struct NoMediaStore: MediaStore {
    private var error: MediaError { MediaError(.unavailable, "this server keeps no files (no media store on PostgreSQL yet)") }
    func store<Body: AsyncSequence>(_ upload: MediaUpload, body: Body) async throws -> MediaRecord where Body.Element == ByteBuffer {
        throw error
    }
    func record(_ id: String) async throws -> MediaRecord? { throw error }
    func read(_ record: MediaRecord, range: Range<Int64>) -> AsyncThrowingStream<ByteBuffer, any Error> {
        AsyncThrowingStream { $0.finish(throwing: error) }
    }
    func delete(_ id: String) async throws -> Bool { throw error }
    func usage(owner: String) async throws -> Int64 { throw error }
}

extension LeanCloudCaller {
    /// Whether this caller may delete a file of `owner`: the master key any, a client its own, the app key those
    /// stored with the app key.
    func mayDelete(owner: String) -> Bool {
        switch self {
        case .master: true
        case .client(let clientID): owner == clientID
        case .app: owner.isEmpty
        }
    }
}
