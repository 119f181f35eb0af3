import AsyncHTTPClient
import Crypto
import Foundation
import HookRuntime
import IMCore
import NIOCore
import NIOHTTP1

/// What a bot on another machine sees of the files stored on its server (`msg.file`'s record,
/// `ctx.media`), through the server's HTTP API on the port of its WebSocket: the record from
/// `GET /1.1/files/<id>` (LeanCloud's `_File`, whose `metaData` carries the server's `sha256` and
/// `mime_type`), the first bytes from a ranged `GET` of the URL that record gives. The runtime bounds each
/// call by the hook's time and caches records (`HookMedia`).
///
/// A server with signed URLs (`signed_urls`) answers `/1.1/files` only to a caller it knows: with the
/// master key (`[bot] master_key`) the source signs its requests with it (`X-LC-Sign:
/// md5(timestamp + key),timestamp,master`, so the key itself never crosses the network); without it such a
/// server's records cannot be read and files show `stored = false` with the server's answer in `error`.
public struct ServerMediaSource: HookMediaSource {
    /// `http(s)://host:port` of the server.
    public let base: String
    /// The server's master key, when the bot has it.
    public let masterKey: String?

    /// The source for the server whose WebSocket is `webSocketURL` (`ws://` → `http://`, `wss://` →
    /// `https://`, same host and port); nil when that is not a WebSocket URL.
    public init?(webSocketURL: String, masterKey: String? = nil) {
        self.masterKey = masterKey
        guard var components = URLComponents(string: webSocketURL), let scheme = components.scheme?.lowercased(),
            scheme == "ws" || scheme == "wss", components.host?.isEmpty == false
        else { return nil }
        components.scheme = scheme == "ws" ? "http" : "https"
        components.percentEncodedPath = ""
        components.query = nil
        components.fragment = nil
        guard let base = components.string else { return nil }
        self.base = base
    }

    private static let client: HTTPClient = {
        var configuration = HTTPClient.Configuration.singletonConfiguration
        configuration.redirectConfiguration = .disallow
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    /// Longest a request may take if the runtime's wait ends without cancelling it.
    private static let timeout = TimeAmount.seconds(10)

    public func record(id: String) async throws -> HookMediaRecord? {
        guard HookMedia.isValidID(id) else { return nil }
        var request = HTTPClientRequest(url: "\(base)/1.1/files/\(id)")
        if let masterKey {
            let millis = String(Int64(Date().timeIntervalSince1970 * 1000))
            let digest = Insecure.MD5.hash(data: Data((millis + masterKey).utf8)).map { String(format: "%02x", $0) }.joined()
            request.headers.add(name: "X-LC-Sign", value: "\(digest),\(millis),master")
        }
        let response = try await Self.client.execute(request, timeout: Self.timeout)
        let body = try await response.body.collect(upTo: 64 << 10)
        if response.status == .notFound { return nil }
        guard response.status == .ok else {
            throw HookMediaError("the server answered \(response.status.code) for file \(id)")
        }
        guard case .object(let file)? = JSONValue.parse(String(buffer: body)) else {
            throw HookMediaError("the server's answer for file \(id) is not a JSON object")
        }
        return Self.record(id: id, file)
    }

    /// A record from LeanCloud's `_File` JSON; nil for a record without content (no SHA-256: a file kept
    /// elsewhere, known by its URL only).
    static func record(id: String, _ file: [String: JSONValue]) -> HookMediaRecord? {
        let meta = file["metaData"]?.objectValue ?? [:]
        guard let sha = meta["sha256"]?.stringValue, sha.count == 64, let size = meta["size"]?.intValue else { return nil }
        let metadata = MediaMetadata(
            size: Int64(size), sha256: sha,
            mime: meta["mime_type"]?.stringValue ?? file["mime_type"]?.stringValue ?? "application/octet-stream",
            format: meta["format"]?.stringValue, width: meta["width"]?.intValue, height: meta["height"]?.intValue,
            duration: meta["duration"]?.doubleValue)
        return HookMediaRecord(id: id, url: file["url"]?.stringValue, name: file["name"]?.stringValue, metadata: metadata)
    }

    public func read(id: String, maxBytes: Int) async throws -> [UInt8] {
        guard let record = try await record(id: id) else { throw HookMediaError("no stored file \(id)") }
        let wanted = Int(min(Int64(maxBytes), record.metadata.size))
        guard wanted > 0 else { return [] }
        // The record's URL names the server as the client that asked saw it (or its public address): the
        // bot asks its own way in, with the URL's path and query (a signed URL keeps its signature).
        guard let url = record.url, let components = URLComponents(string: url), !components.percentEncodedPath.isEmpty else {
            throw HookMediaError("the server gave no URL for file \(id)")
        }
        var target = base + components.percentEncodedPath
        if let query = components.percentEncodedQuery { target += "?" + query }
        var request = HTTPClientRequest(url: target)
        request.headers.add(name: "Range", value: "bytes=0-\(wanted - 1)")
        let response = try await Self.client.execute(request, timeout: Self.timeout)
        guard response.status == .ok || response.status == .partialContent else {
            throw HookMediaError("the server answered \(response.status.code) for the bytes of file \(id)")
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(wanted)
        // A server that ignores Range sends everything: stop reading once there is enough.
        for try await chunk in response.body {
            bytes += chunk.readableBytesView.prefix(wanted - bytes.count)
            if bytes.count >= wanted { break }
        }
        return bytes
    }
}

extension BotHost {
    /// This bot with its plugins' looks at stored files going to the server at `serverURL` (its WebSocket
    /// URL): see `ServerMediaSource`.
    nonisolated func lookingAtFiles(on serverURL: String) -> BotHost {
        runtime.setMedia(ServerMediaSource(webSocketURL: serverURL, masterKey: configuration.masterKey))
        return self
    }
}
