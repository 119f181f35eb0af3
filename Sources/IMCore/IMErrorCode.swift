/// Numeric error codes sent by the server. Codes below 4900 follow LeanCloud's realtime error table;
/// 49xx codes are Hookbot's own, for protocol errors that table has no code for.
public enum IMErrorCode: Int, Sendable, CaseIterable, Codable {
    case internalError = 4200
    case signatureFailed = 4102
    case invalidLogin = 4103
    case sessionRequired = 4105
    case frameTooLong = 4109
    case sessionConflict = 4111
    case sessionTokenExpired = 4112
    case rateLimited = 4116
    case conversationSignatureFailed = 4302
    case conversationRejectedByApp = 4305
    case conversationNotAllowed = 4308
    case conversationUpdateRejected = 4309
    case conversationQueryFailed = 4310
    case conversationLogRejected = 4312
    case conversationBlacklisted = 4315
    case transientConversationRequired = 4316
    case conversationMembershipRequired = 4317
    case invalidMessagingTarget = 4401
    case messageRejectedByApp = 4402
    case messageOwnershipRequired = 4403
    case messageNotFound = 4404
    /// An edit the interceptor refused (LeanCloud's MESSAGE_UPDATE_REJECTED_BY_APP).
    case messageUpdateRejectedByApp = 4405
    /// The edit window has passed (LeanCloud's MESSAGE_EDIT_DISABLED).
    case messageEditDisabled = 4406
    case messageRecallDisabled = 4407
    case malformedCommand = 4901
    case unknownCommand = 4902
    case invalidField = 4903
    case notInterceptor = 4904
    /// The sender is muted in the conversation (LeanCloud's SDKs name no code for it).
    case memberMuted = 4905

    /// The symbolic reason string sent with the code.
    public var reason: String {
        switch self {
        case .internalError: "INTERNAL_ERROR"
        case .signatureFailed: "SIGNATURE_FAILED"
        case .invalidLogin: "INVALID_LOGIN"
        case .sessionRequired: "SESSION_REQUIRED"
        case .frameTooLong: "FRAME_TOO_LONG"
        case .sessionConflict: "SESSION_CONFLICT"
        case .sessionTokenExpired: "SESSION_TOKEN_EXPIRED"
        case .rateLimited: "MESSAGE_SENT_QUOTA_EXCEEDED"
        case .conversationSignatureFailed: "CONVERSATION_SIGNATURE_FAILED"
        case .conversationRejectedByApp: "CONVERSATION_REJECTED_BY_APP"
        case .conversationNotAllowed: "CONVERSATION_NOT_ALLOWED"
        case .conversationUpdateRejected: "CONVERSATION_UPDATE_REJECTED"
        case .conversationQueryFailed: "CONVERSATION_QUERY_FAILED"
        case .conversationLogRejected: "CONVERSATION_LOG_REJECTED"
        case .conversationBlacklisted: "CONVERSATION_BLACKLISTED"
        case .transientConversationRequired: "TRANSIENT_CONVERSATION_REQUIRED"
        case .conversationMembershipRequired: "CONVERSATION_MEMBERSHIP_REQUIRED"
        case .invalidMessagingTarget: "INVALID_MESSAGING_TARGET"
        case .messageRejectedByApp: "MESSAGE_REJECTED_BY_APP"
        case .messageOwnershipRequired: "MESSAGE_OWNERSHIP_REQUIRED"
        case .messageNotFound: "MESSAGE_NOT_FOUND"
        case .messageUpdateRejectedByApp: "MESSAGE_UPDATE_REJECTED_BY_APP"
        case .messageEditDisabled: "MESSAGE_EDIT_DISABLED"
        case .messageRecallDisabled: "MESSAGE_RECALL_DISABLED"
        case .malformedCommand: "MALFORMED_COMMAND"
        case .unknownCommand: "UNKNOWN_COMMAND"
        case .invalidField: "INVALID_FIELD"
        case .notInterceptor: "NOT_AN_INTERCEPTOR"
        case .memberMuted: "MEMBER_MUTED"
        }
    }
}

/// An error with the server's numeric code, its reason and an optional human-readable detail.
public struct IMError: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: Int
    public var reason: String
    public var detail: String?
    /// Application-defined code (for example from a moderation hook), when there is one.
    public var appCode: Int?

    public init(code: Int, reason: String, detail: String? = nil, appCode: Int? = nil) {
        self.code = code
        self.reason = reason
        self.detail = detail
        self.appCode = appCode
    }

    public init(_ code: IMErrorCode, _ detail: String? = nil, appCode: Int? = nil) {
        self.init(code: code.rawValue, reason: code.reason, detail: detail, appCode: appCode)
    }

    public var knownCode: IMErrorCode? { IMErrorCode(rawValue: code) }

    public var description: String {
        var text = "\(code) \(reason)"
        if let detail { text += ": \(detail)" }
        if let appCode { text += " (appCode \(appCode))" }
        return text
    }
}
