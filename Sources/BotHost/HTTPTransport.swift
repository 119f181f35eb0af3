import AsyncHTTPClient
import Foundation
import HookRuntime
import NIOCore
import NIOHTTP1

/// Performs plugins' `ctx.http` calls with async-http-client, within each call's timeout and response size
/// limit. Every failure becomes an outcome with an `error` the plugin sees. The client follows no redirect
/// itself: `HookHTTPTransport.perform` follows those the plugin's allowed hosts permit, one exchange at a
/// time.
public struct AsyncHTTPTransport: HookHTTPTransport {
    public init() {}

    /// The shared client's configuration (async-http-client's `singletonConfiguration`), without redirects.
    private static let client: HTTPClient = {
        var configuration = HTTPClient.Configuration.singletonConfiguration
        configuration.redirectConfiguration = .disallow
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    public func exchange(_ call: HookHTTPCall) async -> HookHTTPOutcome {
        var request = HTTPClientRequest(url: call.url.absoluteString)
        request.method = HTTPMethod(rawValue: call.method)
        for (name, value) in call.headers { request.headers.add(name: name, value: value) }
        if let body = call.body { request.body = .bytes(ByteBuffer(string: body)) }
        let timeout = TimeAmount.nanoseconds(Int64(call.timeout * 1e9))
        do {
            let response = try await Self.client.execute(request, timeout: timeout)
            let body: ByteBuffer
            do {
                body = try await response.body.collect(upTo: call.maxBytes)
            } catch is NIOTooManyBytesError {
                return HookHTTPOutcome(status: Int(response.status.code), error: "too large: the response is over \(call.maxBytes) bytes")
            }
            // At most `maxHeaderCount` headers of at most `maxHeaderBytes` in all reach the plugin.
            var headers: [String: String] = [:]
            var bytes = 0
            for header in response.headers where headers.count < StoredText.maxHeaderCount {
                let name = header.name.lowercased()
                bytes += name.utf8.count + header.value.utf8.count
                guard bytes <= StoredText.maxHeaderBytes else { break }
                headers[name] = header.value
            }
            return HookHTTPOutcome(status: Int(response.status.code), headers: headers, body: String(buffer: body))
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout || error == .connectTimeout {
            return HookHTTPOutcome(error: "timeout: no answer within \(call.timeout.formatted()) s")
        } catch {
            return HookHTTPOutcome(error: "failed: \(error)")
        }
    }
}
