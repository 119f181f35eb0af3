import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import IMCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOWebSocket
import Synchronization

/// The server's connections: HTTP/1.1 served by Hummingbird, and `/ws` upgraded to a WebSocket that is served
/// by channel handlers on its event loop (`WebSocketSession`), with no task while it is idle.
///
/// Written here instead of using `HTTP1WebSocketUpgradeChannel` because Hummingbird keeps a task per WebSocket
/// for its whole life (its handler, its ping loop, and here a writer), and a task keeps the stack slabs its
/// deepest call needed: after a login that was about 90 KB per idle session. The HTTP half is Hummingbird's
/// (`handleHTTP`), set up as `HTTP1WebSocketUpgradeChannel` sets it up.
struct IMChannel: ServerChildChannel, HTTPChannelHandler {
    enum Upgrade: Sendable {
        case webSocket
        case notUpgraded(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>)
        case failedUpgrade(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>)
    }

    struct Value: ServerChildChannelValue {
        let upgrade: EventLoopFuture<Upgrade>
        let channel: any Channel
    }

    let responder: Responder
    let http1: HTTP1Channel.Configuration
    let maxFrameSize: Int
    /// On the event loop, for a request asking for a WebSocket: nil refuses it; else the response's extra
    /// headers, and what adds the session's handlers once the upgrade response is on its way.
    let accept: @Sendable (HTTPRequestHead, any Channel) -> (headers: HTTPHeaders, install: @Sendable (any Channel) throws -> Void)?

    init(
        responder: @escaping Responder, http1: HTTP1Channel.Configuration, maxFrameSize: Int,
        accept:
            @escaping @Sendable (HTTPRequestHead, any Channel) -> (headers: HTTPHeaders, install: @Sendable (any Channel) throws -> Void)?
    ) {
        self.http1 = http1
        self.maxFrameSize = maxFrameSize
        self.accept = accept
        self.responder = Self.redirectingUpgrades(responder)
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let attempted = NIOLoopBoundBox(false, eventLoop: channel.eventLoop)
            let accept = accept
            let upgrader = NIOTypedWebSocketServerUpgrader<Upgrade>(
                maxFrameSize: maxFrameSize,
                shouldUpgrade: { channel, head in
                    attempted.value = true
                    return channel.eventLoop.makeSucceededFuture(accept(head, channel)?.headers)
                },
                upgradePipelineHandler: { channel, head in
                    channel.eventLoop.makeCompletedFuture {
                        guard let accepted = accept(head, channel) else { throw NIOWebSocketUpgradeError.unsupportedWebSocketTarget }
                        try accepted.install(channel)
                        return .webSocket
                    }
                })
            let http1 = http1
            let upgrades = NIOTypedHTTPServerUpgradeConfiguration(
                upgraders: [upgrader],
                notUpgradingCompletionHandler: { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
                        try channel.pipeline.syncOperations.addHandlers(http1.additionalChannelHandlers())
                        try channel.pipeline.syncOperations.addHandler(
                            HTTPConnectionStateHandler(idleTimeout: http1.idleTimeout.map { .init($0) }, logger: logger))
                        let asyncChannel = try NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>(
                            wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
                        return attempted.value ? .failedUpgrade(asyncChannel) : .notUpgraded(asyncChannel)
                    }
                })
            var configuration = NIOUpgradableHTTPServerPipelineConfiguration<Upgrade>(upgradeConfiguration: upgrades)
            configuration.enablePipelining = false // HTTP is pipelined by NIOAsyncChannel
            configuration.enableErrorHandling = false // Hummingbird handles these
            configuration.enableResponseHeaderValidation = false // HTTP types validate them
            configuration.decoderConfiguration.maxHeaderFieldSize = http1.httpDecoder.maxHeaderFieldSize
            configuration.decoderConfiguration.maxHeaderListSize = http1.httpDecoder.maxHeaderListSize
            configuration.decoderConfiguration.maxHeaderFieldCount = http1.httpDecoder.maxHeaderFieldCount
            let upgrade = try channel.pipeline.syncOperations.configureUpgradableHTTPServerPipeline(configuration: configuration)
            return Value(upgrade: upgrade, channel: channel)
        }
    }

    /// Serves an HTTP connection; returns at once for a WebSocket, whose handlers serve it from now on.
    func handle(value: Value, logger: Logger) async {
        do {
            switch try await value.upgrade.get() {
            case .webSocket: return
            case .notUpgraded(let http): await handleHTTP(asyncChannel: http, logger: logger)
            case .failedUpgrade(let http):
                try await http.executeThenClose { _, outbound in
                    let head = HTTPResponse(status: .badRequest, headerFields: [.connection: "close", .contentLength: "0"])
                    try await outbound.write(contentsOf: [.head(head), .end(nil)])
                }
            }
        } catch {
            logger.debug("connection ended before its first request was served", metadata: ["error": "\(error)"])
        }
    }

    /// NIO upgrades only a connection's first request: a WebSocket upgrade asked for later on a connection
    /// gets a redirect to the same path and the connection is closed, so the client asks again on a new one
    /// (as Hummingbird's WebSocket channel does).
    private static func redirectingUpgrades(_ responder: @escaping Responder) -> Responder {
        struct RedirectedUpgrade: Error {}
        return { request, writer, channel in
            guard request.headers[.upgrade]?.lowercased() == "websocket" else {
                return try await responder(request, writer, channel)
            }
            var path = request.uri.path
            if let query = request.uri.query { path += "?\(query)" }
            try await writer.writeResponse(HTTPResponse(status: .temporaryRedirect, headerFields: [.connection: "close", .location: path]))
            throw RedirectedUpgrade()
        }
    }
}
