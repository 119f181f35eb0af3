import Foundation
import PushProviders

/// Offline push on the server (docs/PUSH.md): which providers to build, what notifications say when the
/// message has no `pushData`, and how the persisted queue sends them. No providers (the default) means no
/// pushes are queued at all.
public struct PushConfiguration: Sendable {
    /// The providers to build, each serving the devices registered with its `name`.
    public var providers: [PushProviderConfiguration] = []
    /// The HTTP client all providers share (timeouts, extra trust roots).
    public var http = PushHTTPSettings()
    /// What a notification says when the message carries no `pushData`.
    public var templates = PushTemplates()
    /// How queued pushes are sent and retried.
    public var queue = PushQueueSettings()

    public init() {}

    /// True when at least one provider is configured.
    public var isEnabled: Bool { !providers.isEmpty }
}

/// One `[push.<name>]` section: a provider's name (the `provider` of the devices it serves) and its settings.
public struct PushProviderConfiguration: Sendable {
    public enum Kind: Sendable {
        case apns(APNsSettings)
        case fcm(FCMSettings)
        case webPush(WebPushSettings)
        case unifiedPush(UnifiedPushSettings)
        case webhook(WebhookSettings)
    }

    /// `apns`, `fcm`, `webpush`, `unifiedpush` or `webhook`: the provider name devices are registered with.
    public var name: String
    public var kind: Kind

    public init(name: String, kind: Kind) {
        self.name = name
        self.kind = kind
    }

    /// The provider's usual name (`apns`, `fcm`, `webpush`, `unifiedpush`, `webhook`).
    public init(_ kind: Kind) {
        switch kind {
        case .apns: self.init(name: "apns", kind: kind)
        case .fcm: self.init(name: "fcm", kind: kind)
        case .webPush: self.init(name: "webpush", kind: kind)
        case .unifiedPush: self.init(name: "unifiedpush", kind: kind)
        case .webhook: self.init(name: "webhook", kind: kind)
        }
    }
}

/// The text of a notification for a message without `pushData`, per LeanCloud message type (`_lctype`).
/// Placeholders: `{from}` (the sender's client id), `{text}` (the message's text: `_lctext` of a typed
/// message, the body of a plain one), `{conversation}` (the conversation's name, or its id).
public struct PushTemplates: Sendable {
    /// By `_lctype`: -1 text, -2 image, -3 audio, -4 video, -5 location, -6 file; other types use `other`.
    public var byType: [Int: String] = [
        -1: "{from}: {text}",
        -2: "{from} sent a photo",
        -3: "{from} sent a voice message",
        -4: "{from} sent a video",
        -5: "{from} shared a location",
        -6: "{from} sent a file",
    ]
    /// A plain (untyped) message: its body is the text.
    public var plain: String = "{from}: {text}"
    /// A typed message of a type not in `byType`.
    public var other: String = "{from} sent a message"
    /// The notification's title; `nil` leaves it out.
    public var title: String? = "{conversation}"
    /// Longest body, in characters (grapheme clusters); a longer one is cut at a character boundary and ends
    /// with "…".
    public var maxBodyCharacters: Int = 200
    /// The sound of a notification built from a template; `nil` leaves it out.
    public var sound: String? = "default"

    public init() {}
}

/// The persisted queue (`push_queue`): workers, retries, how long a push may wait.
public struct PushQueueSettings: Sendable {
    /// Pushes sent at once by this node.
    public var workers: Int = 16
    /// The first retry's delay; each retry doubles it (with jitter) up to `maxRetryDelay`.
    public var retryDelay: Duration = .seconds(2)
    public var maxRetryDelay: Duration = .seconds(300)
    /// A push not sent this long after it was queued is dropped.
    public var maxAge: Duration = .seconds(24 * 3600)
    /// How often an idle worker looks for due pushes (new pushes wake it at once).
    public var pollInterval: Duration = .seconds(1)
    /// How long a claimed push is held by the node that claimed it before another node may take it (a node
    /// that died mid-send).
    public var claimTimeout: Duration = .seconds(60)

    public init() {}
}
