import IMCore

/// Codes of errors the SDK raises itself (the server's codes are in `IMErrorCode`). They share the
/// `IMError` type with server errors, in a range the server never uses.
public enum IMClientErrorCode: Int, Sendable, CaseIterable {
    /// The client is not open (call `open()` first), or was closed or kicked.
    case clientNotOpen = 9001
    /// A request waited for a connection longer than `IMClientOptions.sendTimeout` and was never sent.
    case sendTimeout = 9002
    /// A sent request got no reply within `IMClientOptions.requestTimeout`; its outcome is unknown.
    case requestTimeout = 9003
    /// The connection ended after the request was sent and the request could not safely be resent.
    case connectionLost = 9004
    /// `close()` was called while the request was waiting.
    case clientClosed = 9005
    /// The WebSocket could not be established.
    case connectionFailed = 9006
    /// An argument was rejected before anything was sent.
    case invalidArgument = 9007
    /// The server answered with a reply the SDK did not expect.
    case unexpectedReply = 9008
    /// The task waiting for the reply was cancelled (the request may still take effect).
    case cancelled = 9009
    /// The signature provider failed to produce a signature.
    case signatureUnavailable = 9010
    /// A media download into memory passed its `maxBytes` (`IMClient.data(at:)`).
    case responseTooLarge = 9011

    public var reason: String {
        switch self {
        case .clientNotOpen: "CLIENT_NOT_OPEN"
        case .sendTimeout: "SEND_TIMEOUT"
        case .requestTimeout: "REQUEST_TIMEOUT"
        case .connectionLost: "CONNECTION_LOST"
        case .clientClosed: "CLIENT_CLOSED"
        case .connectionFailed: "CONNECTION_FAILED"
        case .invalidArgument: "INVALID_ARGUMENT"
        case .unexpectedReply: "UNEXPECTED_REPLY"
        case .cancelled: "CANCELLED"
        case .signatureUnavailable: "SIGNATURE_UNAVAILABLE"
        case .responseTooLarge: "RESPONSE_TOO_LARGE"
        }
    }
}

extension IMError {
    /// An SDK-side error.
    public init(_ code: IMClientErrorCode, _ detail: String? = nil) {
        self.init(code: code.rawValue, reason: code.reason, detail: detail)
    }

    /// The SDK-side code, when this error was raised by the SDK.
    public var clientCode: IMClientErrorCode? { IMClientErrorCode(rawValue: code) }

    /// The error a reply carries (`error`, an `ack` or `session closed` with a `code`), if any.
    init?(reply: Command) {
        guard let code = reply.code else {
            if reply.cmd == .error {
                self.init(.unexpectedReply, "error reply without a code")
                return
            }
            return nil
        }
        self.init(
            code: code, reason: reply.reason ?? IMErrorCode(rawValue: code)?.reason ?? "ERROR",
            detail: reply.detail, appCode: reply.appCode)
    }
}
