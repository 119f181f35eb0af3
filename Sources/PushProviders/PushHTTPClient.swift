import AsyncHTTPClient
import Foundation
import IMCore
import NIOCore
import NIOHTTP1
import NIOSSL

/// How the one HTTP client all providers share behaves.
public struct PushHTTPSettings: Sendable {
    /// Connecting (TCP and TLS) may take this long.
    public var connectTimeout: Duration = .seconds(5)
    /// A whole request, from asking for a connection to the last byte of the answer; a provider that hangs
    /// costs this much and the request answers `retryLater`.
    public var requestTimeout: Duration = .seconds(15)
    /// Answers longer than this are cut off (providers answer a few hundred bytes).
    public var maxResponseBytes: Int = 64 * 1024
    /// PEM file of certificate authorities trusted besides the system's (a private gateway's CA; tests).
    public var additionalTrustRootsFile: String?
    /// Idle connections are kept this long (APNs asks for long-lived HTTP/2 connections).
    public var idleTimeout: Duration = .seconds(300)
    /// HTTP/1.1 connections to one host (a push service without HTTP/2, a webhook gateway); HTTP/2 multiplexes
    /// all requests to a host on one connection.
    public var maxHTTP1ConnectionsPerHost: Int = 64

    public init(
        connectTimeout: Duration = .seconds(5), requestTimeout: Duration = .seconds(15), additionalTrustRootsFile: String? = nil
    ) {
        self.connectTimeout = connectTimeout
        self.requestTimeout = requestTimeout
        self.additionalTrustRootsFile = additionalTrustRootsFile
    }
}

/// The HTTP client the providers share: async-http-client, HTTP/2 over TLS where the server offers it (ALPN),
/// HTTP/1.1 otherwise, no redirects followed, a time limit per request. Call `shutdown()` when done.
public final class PushHTTPClient: Sendable {
    let client: HTTPClient
    let settings: PushHTTPSettings

    public init(settings: PushHTTPSettings = PushHTTPSettings()) throws {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let file = settings.additionalTrustRootsFile {
            guard FileManager.default.isReadableFile(atPath: file) else {
                throw PushError.invalidSettings("trust roots file \(file) cannot be read")
            }
            tls.additionalTrustRoots = [.file(file)]
        }
        var pool = HTTPClient.Configuration.ConnectionPool(
            idleTimeout: TimeAmount(settings.idleTimeout),
            concurrentHTTP1ConnectionsPerHostSoftLimit: max(1, settings.maxHTTP1ConnectionsPerHost))
        // A provider that refuses connections answers `retryLater` at once instead of holding the request (and a
        // slot of the provider's limit) until its time is up.
        pool.retryConnectionEstablishment = false
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls, redirectConfiguration: .disallow,
            timeout: .init(connect: TimeAmount(settings.connectTimeout), read: TimeAmount(settings.requestTimeout)),
            connectionPool: pool, decompression: .disabled)
        configuration.httpVersion = .automatic
        client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
        self.settings = settings
    }

    /// Closes the connections; pending requests fail.
    public func shutdown() async throws {
        try await client.shutdown()
    }

    /// What came back for one request.
    struct Response: Sendable {
        var status: Int
        var headers: HTTPHeaders
        var body: [UInt8]

        var text: String { String(decoding: body, as: UTF8.self) }
        /// The body as JSON, or nil when it is not JSON.
        var json: JSONValue? { try? JSONDecoder().decode(JSONValue.self, from: Data(body)) }
        /// `Retry-After` as a duration (delta-seconds or an HTTP date), nil when absent or unreadable.
        var retryAfter: Duration? { headers.first(name: "retry-after").flatMap { parseRetryAfter($0) } }
    }

    /// Sends one request. Answers the response whatever its status; throws when there was none (connection
    /// refused, TLS failure, time limit): the providers turn that into `retryLater`.
    func send(method: HTTPMethod, url: String, headers: HTTPHeaders, body: [UInt8]) async throws -> Response {
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers = headers
        if !body.isEmpty || method == .POST {
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        let response = try await client.execute(request, timeout: TimeAmount(settings.requestTimeout))
        var buffer = try await response.body.collect(upTo: settings.maxResponseBytes)
        return Response(
            status: Int(response.status.code), headers: response.headers,
            body: buffer.readBytes(length: buffer.readableBytes) ?? [])
    }
}

extension PushHTTPClient {
    /// POSTs `body` with `authorization: <scheme> <token>`, the token from `tokens` (APNs' provider JWT, FCM's
    /// access token). When the provider answers that the token was refused (`refused`), the token is dropped and
    /// the request is sent once more with a new one. A token that cannot be had answers `tokenFailure`, a
    /// request without an answer `transportOutcome`, and any answer `outcome`.
    func postAuthorized(
        url: String, headers: HTTPHeaders, body: [UInt8], scheme: String, tokens: TokenCache,
        tokenFailure: (any Error) -> PushOutcome, refused: (Response) -> Bool, outcome: (Response) -> PushOutcome
    ) async -> PushOutcome {
        var retried = false
        while true {
            let token: String
            do { token = try await tokens.token() } catch { return tokenFailure(error) }
            var request = headers
            request.add(name: "authorization", value: "\(scheme) \(token)")
            let response: Response
            do {
                response = try await send(method: .POST, url: url, headers: request, body: body)
            } catch {
                return transportOutcome(error)
            }
            if !retried, refused(response) {
                retried = true
                await tokens.invalidate(token)
                continue
            }
            return outcome(response)
        }
    }
}

/// `Retry-After` (RFC 9110 §10.2.3): delta-seconds or an HTTP date; a date in the past is zero.
func parseRetryAfter(_ value: String, now: Date = Date()) -> Duration? {
    let trimmed = value.trimmingCharacters(in: .whitespaces)
    if let seconds = Int(trimmed), seconds >= 0 { return .seconds(seconds) }
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "GMT")
    formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
    guard let date = formatter.date(from: trimmed) else { return nil }
    return .seconds(max(0, Int(date.timeIntervalSince(now).rounded(.up))))
}

/// At most `limit` sends of one provider in flight; the others wait their turn in order.
actor ConcurrencyLimit {
    private let limit: Int
    private var inFlight = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(_ limit: Int) { self.limit = max(1, limit) }

    /// Runs `body` once a slot is free.
    nonisolated func run<T: Sendable>(_ body: @Sendable () async throws -> T) async rethrows -> T {
        await acquire()
        do {
            let value = try await body()
            await release()
            return value
        } catch {
            await release()
            throw error
        }
    }

    private func acquire() async {
        if inFlight < limit {
            inFlight += 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    private func release() {
        if waiting.isEmpty {
            inFlight -= 1
        } else {
            waiting.removeFirst().resume() // the slot passes to the next waiter
        }
    }
}

/// The outcome shared by the providers for statuses they do not treat specially: 2xx delivered, 404/410 gone,
/// 429 and 5xx retry (with Retry-After), anything else (3xx not followed, other 4xx) rejected.
func genericOutcome(_ response: PushHTTPClient.Response, deliveredID: String?, reason: String) -> PushOutcome {
    switch response.status {
    case 200..<300: return .delivered(id: deliveredID)
    case 404, 410: return .deviceGone(reason: "\(response.status) \(reason)")
    case 429, 500..<600: return .retryLater(after: response.retryAfter, reason: "\(response.status) \(reason)")
    default: return .rejected(status: response.status, reason: reason)
    }
}

/// Checks an http(s) URL given in settings or as a device endpoint; answers it without a trailing slash.
func checkedHTTPURL(_ text: String, what: String, error: (String) -> PushError) throws -> URL {
    guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "https" || scheme == "http",
        let host = url.host, !host.isEmpty
    else { throw error("\(what) '\(text.prefix(200))' is not an http(s) URL") }
    return url
}

/// A failure to get an answer, as the outcome the caller retries.
func transportOutcome(_ error: any Error) -> PushOutcome {
    .retryLater(after: nil, reason: "no answer: \(String(describing: error).prefix(200))")
}
