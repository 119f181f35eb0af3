import Foundation
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL

/// One request as a test server received it.
struct ReceivedRequest: Sendable {
    var method: String
    var path: String
    /// 2 when it came over HTTP/2, 1 for HTTP/1.x.
    var httpMajorVersion: Int
    var headers: HTTPHeaders
    var body: [UInt8]

    func header(_ name: String) -> String? { headers.first(name: name) }
    var text: String { String(decoding: body, as: UTF8.self) }
}

/// What the test's handler answers.
struct CannedResponse: Sendable {
    var status: Int
    var headers: [(String, String)] = []
    var body: [UInt8] = []

    init(status: Int, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    init(status: Int, headers: [(String, String)] = [], json: String) {
        self.init(status: status, headers: headers + [("content-type", "application/json")], body: Array(json.utf8))
    }
}

/// A loopback HTTP server for the provider tests (SwiftNIO): plain HTTP/1.1, or HTTP/2 only over TLS (ALPN
/// `h2`, as APNs). Each request is answered by the test's async handler; the server keeps every request.
final class TestPushServer: Sendable {
    typealias Handler = @Sendable (ReceivedRequest) async -> CannedResponse

    let port: Int
    private let channel: any Channel
    private let log = RequestLog()

    /// The http(s) root, `https://127.0.0.1:<port>` for TLS (the test certificate names 127.0.0.1).
    let baseURL: String

    /// `tls` is (certificate chain PEM file, key PEM file); with it the server speaks HTTP/2 only.
    init(tls: (certificate: String, key: String)? = nil, handler: @escaping Handler) async throws {
        let context: NIOSSLContext?
        if let tls {
            var configuration = TLSConfiguration.makeServerConfiguration(
                certificateChain: try NIOSSLCertificate.fromPEMFile(tls.certificate).map { .certificate($0) },
                privateKey: .privateKey(try NIOSSLPrivateKey(file: tls.key, format: .pem)))
            configuration.applicationProtocols = ["h2"]
            context = try NIOSSLContext(configuration: configuration)
        } else {
            context = nil
        }
        let log = self.log
        let collect: Handler = { request in
            await log.append(request)
            return await handler(request)
        }
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                if let context {
                    return channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    }.flatMap {
                        channel.configureHTTP2Pipeline(mode: .server) { stream in
                            stream.eventLoop.makeCompletedFuture {
                                try stream.pipeline.syncOperations.addHandlers([
                                    HTTP2FramePayloadToHTTP1ServerCodec(), RequestHandler(handler: collect, http2: true),
                                ])
                            }
                        }.map { _ in }
                    }
                }
                return channel.pipeline.configureHTTPServerPipeline().flatMap {
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(RequestHandler(handler: collect, http2: false))
                    }
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        port = channel.localAddress!.port!
        baseURL = "\(tls == nil ? "http" : "https")://127.0.0.1:\(port)"
    }

    /// Every request received so far, oldest first.
    func requests() async -> [ReceivedRequest] { await log.all }

    func shutdown() async {
        try? await channel.close()
    }
}

private actor RequestLog {
    var all: [ReceivedRequest] = []
    func append(_ request: ReceivedRequest) { all.append(request) }
}

/// Collects a request's head and body, then writes what the handler answers.
private final class RequestHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let handler: TestPushServer.Handler
    let http2: Bool
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []

    init(handler: @escaping TestPushServer.Handler, http2: Bool) {
        self.handler = handler
        self.http2 = http2
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = []
        case .body(var buffer):
            body += buffer.readBytes(length: buffer.readableBytes) ?? []
        case .end:
            guard let head else { return }
            let request = ReceivedRequest(
                method: head.method.rawValue, path: head.uri, httpMajorVersion: http2 ? 2 : head.version.major,
                headers: head.headers, body: body)
            let keepAlive = head.isKeepAlive
            let promise = context.eventLoop.makePromise(of: CannedResponse.self)
            let handler = self.handler
            promise.completeWithTask { await handler(request) }
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            promise.futureResult.whenSuccess { response in
                let (this, context) = bound.value
                // A client that gave up (its time limit) has closed the connection: nothing to answer.
                guard context.channel.isActive else { return }
                this.write(response, keepAlive: keepAlive, context: context)
            }
        }
    }

    private func write(_ response: CannedResponse, keepAlive: Bool, context: ChannelHandlerContext) {
        var headers = HTTPHeaders(response.headers)
        headers.replaceOrAdd(name: "content-length", value: String(response.body.count))
        let version: HTTPVersion = http2 ? .init(major: 2, minor: 0) : .http1_1
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: version, status: .init(statusCode: response.status), headers: headers))),
            promise: nil)
        if !response.body.isEmpty {
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: response.body)))), promise: nil)
        }
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive && !http2 {
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            done.whenComplete { _ in bound.value.close(promise: nil) }
        }
    }
}
