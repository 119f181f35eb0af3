import IMCore

/// An interceptor's answer to a hook request.
enum Verdict: Sendable, Equatable {
    case allow
    /// Refuse: the sender gets `error` unless `silent`, in which case it gets a normal-looking ack.
    case drop(IMError, silent: Bool)
    /// Replace the content and optionally restrict the recipients.
    case modify(body: String?, recipients: [String]?)

    /// Reads a `hook verdict` command; nil when it is not a valid verdict (or `none`: the interceptor
    /// declines to decide, see `InterceptorHub`).
    init?(_ command: Command) {
        switch command.verdict {
        case "allow":
            self = .allow
        case "drop":
            let error = IMError(
                code: IMErrorCode.messageRejectedByApp.rawValue, reason: IMErrorCode.messageRejectedByApp.reason,
                detail: command.reason ?? command.detail ?? "rejected by interceptor", appCode: command.appCode)
            self = .drop(error, silent: command.silent == true)
        case "modify":
            guard command.msg != nil || command.m != nil else { return nil }
            self = .modify(body: command.msg, recipients: command.m)
        default:
            return nil
        }
    }
}
