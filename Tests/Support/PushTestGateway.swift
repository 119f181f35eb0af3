import Foundation
import IMCore
import NIOCore
import NIOPosix
import Synchronization

/// An operator's push gateway on loopback for the webhook provider, for test targets without NIOHTTP1: a
/// plain HTTP/1.1 server (keep-alive, `Content-Length` bodies) that records each request's body and
/// `X-Hookbot-Signature` and answers 204. The test checks the signature (`WebhookProvider.signature`).
public final class PushTestGateway: Sendable {
    /// One request received.
    public struct Request: Sendable {
        public var body: [UInt8]
        public var signature: String
        public var at: ContinuousClock.Instant
        public var json: JSONValue? { JSONValue.parse(String(decoding: body, as: UTF8.self)) }
        /// The device token the push was for.
        public var token: String? { json?["device"]?["token"]?.stringValue }
        /// The notification sent (`title`, `body`, `badge`, `sound`, `data`, …).
        public var notification: [String: JSONValue]? { json?["notification"]?.objectValue }
    }

    public let url: String
    private let channel: any Channel
    private let received: Mutex<[Request]>

    public init() async throws {
        let log = Recorder()
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in channel.pipeline.addHandler(GatewayConnection(log: log)) }
            .bind(host: "127.0.0.1", port: 0).get()
        url = "http://127.0.0.1:\(channel.localAddress?.port ?? 0)/push"
        received = Mutex([])
        log.gateway.withLock { $0 = self }
    }

    fileprivate func record(_ request: Request) { received.withLock { $0.append(request) } }

    public func requests() -> [Request] { received.withLock { $0 } }

    /// The requests once at least `count` came; throws `Timeout` when fewer came within `timeout`.
    public func waitFor(count: Int, timeout: Duration = .seconds(10)) async throws -> [Request] {
        try await waitUntil("\(count) requests at the push gateway (\(requests().count) came)", timeout: timeout, every: .milliseconds(10))
        {
            requests().count >= count
        }
        return requests()
    }

    /// The requests after a pause in which any extra would have come. (A pause, not a sentinel: pushes keep no
    /// order with each other or with messages.)
    public func settle(_ pause: Duration = .milliseconds(400)) async -> [Request] {
        try? await Task.sleep(for: pause)
        return requests()
    }

    public func shutdown() async { try? await channel.close() }
}

/// Hands requests to the gateway once it exists (the channel initializer is made before it).
private final class Recorder: Sendable {
    let gateway = Mutex<PushTestGateway?>(nil)
    func record(_ request: PushTestGateway.Request) { gateway.withLock { $0 }?.record(request) }
}

private final class GatewayConnection: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let log: Recorder
    var buffer = ByteBuffer()

    init(log: Recorder) { self.log = log }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var incoming = unwrapInboundIn(data)
        buffer.writeBuffer(&incoming)
        // Each complete request (headers, then Content-Length bytes of body) is recorded and answered.
        while let request = nextRequest() {
            log.record(request)
            context.write(
                wrapOutboundOut(ByteBuffer(string: "HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n")), promise: nil)
        }
        context.flush()
    }

    private func nextRequest() -> PushTestGateway.Request? {
        let bytes = buffer.readableBytesView
        guard let end = bytes.firstRange(of: Array("\r\n\r\n".utf8)) else { return nil }
        let head = String(decoding: bytes[bytes.startIndex..<end.lowerBound], as: UTF8.self)
        var length = 0
        var signature = ""
        for line in head.split(separator: "\r\n").dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2 else { continue }
            switch parts[0].lowercased() {
            case "content-length": length = Int(parts[1]) ?? 0
            case "x-hookbot-signature": signature = parts[1]
            default: break
            }
        }
        let headLength = end.upperBound - bytes.startIndex
        guard buffer.readableBytes >= headLength + length else { return nil }
        buffer.moveReaderIndex(forwardBy: headLength)
        let body = buffer.readBytes(length: length) ?? []
        buffer.discardReadBytes()
        return PushTestGateway.Request(body: body, signature: signature, at: .now)
    }
}
