/// How a bot routes what it receives and limits what it sends; the same for a running bot and for
/// `hookbot test`.
public struct RoutingSettings: Sendable {
    /// The bot's client id: its own messages are never routed back to its plugins.
    public var botID: String
    /// The bot is the server's interceptor: moderation and `before_send` ran in the review before
    /// delivery (`MessageRouter.review`), so delivered messages go straight to translation and `on_receive`.
    public var intercepting: Bool
    /// Messages that carry this many bot hops or more are not answered.
    public var maxHops: Int
    /// At most this many bot messages per conversation per `replyWindow` seconds.
    public var replyLimit: Int
    /// At most this many bot messages in all conversations together per `replyWindow` seconds.
    public var globalReplyLimit: Int
    public var replyWindow: Double
    /// At most this many sends answer one event.
    public var sendsPerEvent: Int
    /// Conversation id → language its messages are translated into before `on_receive`.
    public var translateTo: [String: String]
    /// The server enforces mutes (a running bot: the outlet mutes on the server, which refuses a muted
    /// sender's messages itself); the routing core then only mirrors them for `ctx.conv(cid).muted()`.
    /// `hookbot test` has no server: the core enforces them in its reviews.
    public var mutesOnServer = false

    public init(
        botID: String, intercepting: Bool, maxHops: Int = 3, replyLimit: Int = 30,
        globalReplyLimit: Int = 3000, replyWindow: Double = 10, sendsPerEvent: Int = 10,
        translateTo: [String: String] = [:]
    ) {
        self.botID = botID
        self.intercepting = intercepting
        self.maxHops = maxHops
        self.replyLimit = replyLimit
        self.globalReplyLimit = globalReplyLimit
        self.replyWindow = replyWindow
        self.sendsPerEvent = sendsPerEvent
        self.translateTo = translateTo
    }
}
