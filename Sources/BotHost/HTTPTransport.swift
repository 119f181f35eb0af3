import AsyncHTTPClient
import Foundation
import HookRuntime
import NIOCore
import NIOHTTP1

/// Performs plugins' `ctx.http` calls with async-http-client (its shared client), within each call's
/// timeout and response size limit. Every failure becomes an outcome with an `error` the plugin sees.
public struct AsyncHTTPTransport: HookHTTPTransport {
    public init() {}

    public func perform(_ call: HookHTTPCall) async -> HookHTTPOutcome {
        var request = HTTPClientRequest(url: call.url.absoluteString)
        request.method = HTTPMethod(rawValue: call.method)
        for (name, value) in call.headers { request.headers.add(name: name, value: value) }
        if let body = call.body { request.body = .bytes(ByteBuffer(string: body)) }
        let timeout = TimeAmount.nanoseconds(Int64(call.timeout * 1e9))
        do {
            let response = try await HTTPClient.shared.execute(request, timeout: timeout)
            let body: ByteBuffer
            do {
                body = try await response.body.collect(upTo: call.maxBytes)
            } catch is NIOTooManyBytesError {
                return HookHTTPOutcome(status: Int(response.status.code), error: "too large: the response is over \(call.maxBytes) bytes")
            }
            var headers: [String: String] = [:]
            for header in response.headers { headers[header.name.lowercased()] = header.value }
            return HookHTTPOutcome(status: Int(response.status.code), headers: headers, body: String(buffer: body))
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout || error == .connectTimeout {
            return HookHTTPOutcome(error: "timeout: no answer within \(call.timeout.formatted()) s")
        } catch {
            return HookHTTPOutcome(error: "failed: \(error)")
        }
    }
}
