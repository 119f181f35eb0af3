import IMCore

/// What the server does with a reviewed message, edit or membership change once the interceptors (or the
/// failure policy) have decided.
enum Verdict: Sendable, Equatable {
    case allow
    /// Refuse: the sender gets `error` unless `silent`, in which case it gets a normal-looking ack.
    case drop(IMError, silent: Bool)
    /// Replace the content and optionally restrict the recipients.
    case modify(body: String?, recipients: [String]?)

    /// What an interceptor's answer to a review decides; nil when it decides nothing (`declined`: the
    /// failure policy decides, see `InterceptorHub`; `pushes` and `unhooked` answer only `offline` requests).
    init?(_ answer: HookVerdict) {
        switch answer {
        case .allow:
            self = .allow
        case .drop(let reason, let appCode, let silent):
            let error = IMError(
                code: IMErrorCode.messageRejectedByApp.rawValue, reason: IMErrorCode.messageRejectedByApp.reason,
                detail: reason ?? "rejected by interceptor", appCode: appCode)
            self = .drop(error, silent: silent)
        case .modify(let body, let recipients):
            self = .modify(body: body, recipients: recipients)
        case .pushes, .declined, .unhooked:
            return nil
        }
    }
}
