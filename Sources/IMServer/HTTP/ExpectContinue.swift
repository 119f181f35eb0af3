import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Answers `Expect: 100-continue` (RFC 9110 §10.1.1), which neither Hummingbird nor SwiftNIO's HTTP/1 pipeline
/// does: curl sends it with every body over 1 MB and then waits a second before sending the body anyway, so
/// without this each large upload starts a second late. A request whose `Content-Length` passes the upload limit
/// gets no `100 Continue`: the route then answers 413 before the client has sent a byte of the body.
final class ExpectContinue: ChannelDuplexHandler, RemovableChannelHandler, Sendable {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let maxBodyBytes: Int64

    init(maxBodyBytes: Int64) { self.maxBodyBytes = maxBodyBytes }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let request) = unwrapInboundIn(data), let expect = request.headerFields[.expect],
            expect.lowercased() == "100-continue"
        {
            let length = request.headerFields[.contentLength].flatMap { Int64($0) } ?? 0
            if length <= maxBodyBytes {
                context.writeAndFlush(wrapOutboundOut(.head(HTTPResponse(status: .continue))), promise: nil)
            }
        }
        context.fireChannelRead(data)
    }
}
