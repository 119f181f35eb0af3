import AsyncHTTPClient
import Foundation
import IMCore
import NIOCore
import NIOFileSystem

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Uploads to and downloads from the server's media API (`/media`, docs/MEDIA.md) over HTTP, on
/// AsyncHTTPClient's shared client. Uploads carry the session token of the client's login
/// (`X-LC-IM-Session-Token`), so the client must be open. Files on disk are streamed in 256 KiB chunks,
/// never read whole into memory. The server's errors are thrown as `IMError`s with its code and reason
/// (4601 `tooLarge`, 4602 `quotaExceeded`, 4112 for a refused session token…) and the HTTP status in the detail.
extension IMClient {
    /// The server's HTTP address for media: `IMClientOptions.mediaBaseURL`, or the WebSocket URL's scheme
    /// (`ws` → `http`, `wss` → `https`), host and port. Nil for an in-process client without `mediaBaseURL`.
    public nonisolated var mediaBaseURL: URL? { IMMediaAddress.base(for: options) }

    /// A file's URL as the server gave it (`/media/<id>/<name>`) made absolute against `mediaBaseURL`;
    /// absolute URLs are returned as they are.
    public nonisolated func absoluteMediaURL(_ url: String) -> String { IMMediaAddress.absolute(url, base: mediaBaseURL) }

    /// Uploads the file at `file` (streamed from disk) and returns the server's record. `name` defaults to
    /// the file's name, `mime` (sent as `Content-Type`; the server sniffs the real type anyway) to none.
    /// `progress` is called as chunks are handed to the connection; the last call has the file's size.
    @discardableResult
    public nonisolated func upload(
        fileAt file: URL, name: String? = nil, mime: String? = nil,
        progress: (@Sendable (IMTransferProgress) -> Void)? = nil
    ) async throws(IMError) -> IMMediaFile {
        let name = name ?? file.lastPathComponent
        return try await Self.mapErrors("upload \(file.path)") {
            try await FileSystem.shared.withFileHandle(forReadingAt: FilePath(file.path)) { handle in
                let info = try await handle.info()
                guard info.type == .regular else { throw IMError(.invalidArgument, "\(file.path) is not a regular file") }
                let chunks = handle.readChunks(in: 0..<info.size, chunkLength: .kibibytes(256))
                return try await self.post(chunks, length: info.size, name: name, mime: mime, progress: progress)
            }
        }
    }

    /// Uploads bytes held in memory.
    @discardableResult
    public nonisolated func upload(
        _ data: Data, name: String, mime: String? = nil, progress: (@Sendable (IMTransferProgress) -> Void)? = nil
    ) async throws(IMError) -> IMMediaFile {
        let chunks = Self.slices(of: data, size: 256 << 10)
        return try await Self.mapErrors("upload \(name)") {
            try await self.post(chunks, length: Int64(data.count), name: name, mime: mime, progress: progress)
        }
    }

    /// Uploads a sequence of byte chunks (a recording as it is made, say). With `length` nil the body is sent
    /// chunked and the server stops it when it passes the upload limit.
    @discardableResult
    public nonisolated func upload<Chunks: AsyncSequence & Sendable>(
        _ chunks: Chunks, length: Int64?, name: String, mime: String? = nil,
        progress: (@Sendable (IMTransferProgress) -> Void)? = nil
    ) async throws(IMError) -> IMMediaFile where Chunks.Element == Data {
        let buffers = chunks.map { ByteBuffer(bytes: $0) }
        return try await Self.mapErrors("upload \(name)") {
            try await self.post(buffers, length: length, name: name, mime: mime, progress: progress)
        }
    }

    /// `upload(fileAt:)` as an `AsyncSequence`: `.progress` events, then `.completed` with the server's record;
    /// a failure ends the sequence with the `IMError`. Ending the iteration early cancels the upload.
    public nonisolated func uploadEvents(
        fileAt file: URL, name: String? = nil, mime: String? = nil
    ) -> AsyncThrowingStream<IMUploadEvent, any Error> {
        let (stream, continuation) = AsyncThrowingStream<IMUploadEvent, any Error>.makeStream()
        let task = Task {
            do {
                let record = try await upload(fileAt: file, name: name, mime: mime) { continuation.yield(.progress($0)) }
                continuation.yield(.completed(record))
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    /// Downloads `url` (a file's `url`, absolute or the server's `/media/…` path) into `destination`, streamed;
    /// the file appears only when the download is complete (written beside it, then renamed over it).
    /// `range` asks for part of it (`206`).
    @discardableResult
    public nonisolated func download(
        _ url: String, to destination: URL, range: IMByteRange? = nil,
        progress: (@Sendable (IMTransferProgress) -> Void)? = nil
    ) async throws(IMError) -> IMDownload {
        try await Self.mapErrors("download \(url)") {
            let response = try await self.get(url, range: range)
            let total = response.headers.first(name: "Content-Length").flatMap { Int64($0) }
            let partial = destination.deletingLastPathComponent()
                .appendingPathComponent(".\(destination.lastPathComponent).\(UUID().uuidString).part")
            var written: Int64 = 0
            do {
                try await FileSystem.shared.withFileHandle(forWritingAt: FilePath(partial.path)) { handle in
                    var writer = handle.bufferedWriter()
                    for try await chunk in response.body {
                        written += Int64(chunk.readableBytes)
                        try await writer.write(contentsOf: chunk)
                        progress?(IMTransferProgress(completedBytes: written, totalBytes: total))
                    }
                    try await writer.flush()
                }
                if let total, written != total {
                    throw IMError(.connectionLost, "the download ended after \(written) of \(total) bytes")
                }
                guard rename(partial.path, destination.path) == 0 else {
                    throw IMError(.invalidArgument, "cannot write \(destination.path): \(String(cString: strerror(errno)))")
                }
            } catch {
                unlink(partial.path)
                throw error
            }
            return Self.summary(response, bytes: written)
        }
    }

    /// Downloads `url` into memory; a body longer than `maxBytes` fails with `RESPONSE_TOO_LARGE` (9011)
    /// (use `download(_:to:)` for big files).
    public nonisolated func data(at url: String, range: IMByteRange? = nil, maxBytes: Int = 16 << 20) async throws(IMError) -> Data {
        try await Self.mapErrors("download \(url)") {
            let response = try await self.get(url, range: range)
            if let length = response.headers.first(name: "Content-Length").flatMap({ Int($0) }), length > maxBytes {
                throw IMError(.responseTooLarge, "\(url) is \(length) bytes, more than maxBytes (\(maxBytes))")
            }
            var data = Data()
            for try await chunk in response.body {
                guard data.count + chunk.readableBytes <= maxBytes else {
                    throw IMError(.responseTooLarge, "\(url) passes maxBytes (\(maxBytes))")
                }
                data.append(contentsOf: chunk.readableBytesView)
            }
            return data
        }
    }

    /// Deletes a file this client uploaded (`DELETE /media/<id>`); others' files fail with 4607.
    public nonisolated func deleteMedia(id: String) async throws(IMError) {
        try await Self.mapErrors("delete \(id)") {
            let base = try self.requireBase()
            var request = HTTPClientRequest(url: base.absoluteString + "/media/" + Self.escaped(id))
            request.method = .DELETE
            request.headers.add(name: "X-LC-IM-Session-Token", value: try await self.requireToken())
            try self.secure(&request)
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
            _ = try await Self.checked(response, what: "delete \(id)")
        }
    }

    // MARK: Requests

    private nonisolated func requireBase() throws(IMError) -> URL {
        guard let base = mediaBaseURL else {
            throw IMError(.invalidArgument, "no HTTP address for media: set IMClientOptions.mediaBaseURL")
        }
        return base
    }

    /// The last login's session token; still good while the client is paused or resuming (the server keeps
    /// it), gone after `close()` or a kick.
    private func requireToken() throws(IMError) -> String {
        switch connectionState {
        case .opened, .paused, .resuming:
            if let sessionToken { return sessionToken }
        case .closed, .opening, .kicked:
            break
        }
        throw IMError(.clientNotOpen, "uploads need the session token of a login: open() the client first")
    }

    /// `POST /media?name=…` with `chunks` as the body, counting what is handed to the connection.
    private nonisolated func post<Chunks: AsyncSequence & Sendable>(
        _ chunks: Chunks, length: Int64?, name: String, mime: String?, progress: (@Sendable (IMTransferProgress) -> Void)?
    ) async throws -> IMMediaFile where Chunks.Element == ByteBuffer {
        let base = try requireBase()
        var request = HTTPClientRequest(url: base.absoluteString + "/media?name=" + Self.escaped(name))
        request.method = .POST
        request.headers.add(name: "X-LC-IM-Session-Token", value: try await requireToken())
        request.headers.add(name: "Content-Type", value: mime ?? "application/octet-stream")
        try secure(&request)
        let counted = CountingChunks(base: chunks, total: length, progress: progress)
        request.body = .stream(counted, length: length.map { .known($0) } ?? .unknown)
        let response = try await HTTPClient.shared.execute(request, deadline: .distantFuture)
        let json = try await Self.checked(response, what: "upload \(name)")
        guard let record = IMMediaFile(json: json, base: base) else {
            throw IMError(.unexpectedReply, "the upload's answer is not a media record: \(json.jsonString())")
        }
        return record
    }

    private nonisolated func get(_ url: String, range: IMByteRange?) async throws -> HTTPClientResponse {
        let absolute = absoluteMediaURL(url)
        guard let parsed = URL(string: absolute), parsed.scheme == "http" || parsed.scheme == "https" else {
            throw IMError(.invalidArgument, "\(url) is not an http(s) URL or a /media path")
        }
        var request = HTTPClientRequest(url: absolute)
        if let range { request.headers.add(name: "Range", value: range.headerValue) }
        try secure(&request)
        let response = try await HTTPClient.shared.execute(request, deadline: .distantFuture)
        guard response.status.code == 200 || response.status.code == 206 else {
            _ = try await Self.checked(response, what: "download \(url)")
            throw IMError(.unexpectedReply, "download \(url) answered HTTP \(response.status.code)")
        }
        return response
    }

    /// HTTPS trusts what the WebSocket trusts (`IMClientOptions.trustRoots`).
    private nonisolated func secure(_ request: inout HTTPClientRequest) throws(IMError) {
        if request.url.lowercased().hasPrefix("https:") {
            request.tlsConfiguration = try Link.tlsConfiguration(trusting: options.trustRoots)
        }
    }

    /// The JSON of a 2xx answer; any other status thrown as the server's `{code, reason, error}`.
    private static func checked(_ response: HTTPClientResponse, what: String) async throws -> JSONValue {
        let body = try await response.body.collect(upTo: 1 << 20)
        let json = JSONValue.parse(bytes: body.readableBytesView)
        let status = Int(response.status.code)
        if (200..<300).contains(status), let json { return json }
        if let object = json?.objectValue, let code = object["code"]?.intValue {
            let reason = object["reason"]?.stringValue ?? IMErrorCode(rawValue: code)?.reason ?? "ERROR"
            let message = object["error"]?.stringValue ?? reason
            throw IMError(code: code, reason: reason, detail: "HTTP \(status): \(message)")
        }
        let text = String(buffer: body).prefix(200)
        throw IMError(.unexpectedReply, "\(what) answered HTTP \(status): \(text)")
    }

    private static func summary(_ response: HTTPClientResponse, bytes: Int64) -> IMDownload {
        IMDownload(
            status: Int(response.status.code), byteCount: bytes, contentType: response.headers.first(name: "Content-Type"),
            contentRange: response.headers.first(name: "Content-Range"), etag: response.headers.first(name: "ETag"))
    }

    /// Runs `body`, turning what it throws into `IMError`s: transport failures are `CONNECTION_FAILED`,
    /// unreadable files `INVALID_ARGUMENT`, cancellation `CANCELLED`.
    private static func mapErrors<T>(_ what: String, _ body: () async throws -> T) async throws(IMError) -> T {
        do {
            return try await body()
        } catch let error as IMError {
            throw error
        } catch is CancellationError {
            throw IMError(.cancelled, "\(what) was cancelled")
        } catch let error as FileSystemError {
            throw IMError(.invalidArgument, "\(what): \(error.message)")
        } catch let error as HTTPClientError where error == .cancelled {
            throw IMError(.cancelled, "\(what) was cancelled")
        } catch {
            throw IMError(.connectionFailed, "\(what): \(error)")
        }
    }

    private static func escaped(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? text
    }

    private static func slices(of data: Data, size: Int) -> AsyncStream<ByteBuffer> {
        AsyncStream { continuation in
            var offset = data.startIndex
            while offset < data.endIndex {
                let end = min(offset + size, data.endIndex)
                continuation.yield(ByteBuffer(bytes: data[offset..<end]))
                offset = end
            }
            continuation.finish()
        }
    }
}

/// A body's chunks, reporting the bytes handed on so far.
private struct CountingChunks<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable where Base.Element == ByteBuffer {
    typealias Element = ByteBuffer
    let base: Base
    let total: Int64?
    let progress: (@Sendable (IMTransferProgress) -> Void)?

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: Base.AsyncIterator
        let total: Int64?
        let progress: (@Sendable (IMTransferProgress) -> Void)?
        var sent: Int64 = 0

        mutating func next() async throws -> ByteBuffer? {
            guard let chunk = try await base.next() else { return nil }
            sent += Int64(chunk.readableBytes)
            progress?(IMTransferProgress(completedBytes: sent, totalBytes: total))
            return chunk
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: base.makeAsyncIterator(), total: total, progress: progress) }
}
