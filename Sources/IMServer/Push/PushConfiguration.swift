import Foundation
import IMCore
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
    /// How long the server waits for the interceptor's `on_offline` answer (docs/PUSH.md, "on_offline"), in
    /// milliseconds; the message's pushes are queued first and held this long, so a crash or no answer sends
    /// the defaults after it.
    public var offlineHookDeadlineMillis: Int = 1000
    /// Per conversation id (`[push.conversations."<cid>"]`): overrides of `templates`, or no push at all. They
    /// win over the conversation's own `pushTemplates` attribute, key by key (docs/PUSH.md, "What it says").
    public var conversations: [String: PushConversationTemplates] = [:]

    public init() {}

    /// True when at least one provider is configured.
    public var isEnabled: Bool { !providers.isEmpty }

    /// The templates of a conversation: `templates`, then what its `pushTemplates` attribute overrides, then
    /// what `[push.conversations."<cid>"]` overrides (the operator's word wins); nil when the result is
    /// `enabled = false` (no push for this conversation, `pushData` or not).
    func templates(for cid: String, attributes: JSONValue) -> PushTemplates? {
        var result = templates
        var enabled = true
        let owners = attributes.objectValue?[PushConversationTemplates.attributeName].flatMap {
            try? PushConversationTemplates(object: $0, strict: false)
        }
        for override in [owners, conversations[cid]] {
            guard let override else { continue }
            override.apply(to: &result)
            if let value = override.enabled { enabled = value }
        }
        return enabled ? result : nil
    }
}

/// What one conversation changes in the templates (`[push.conversations."<cid>"]` in hookbot.toml, or the
/// conversation's attribute `pushTemplates` its members set with `conv update`): the same keys as
/// `[push.templates]` (`text`, `image`, `audio`, `video`, `location`, `file` or a type number, `plain`,
/// `other`, `title`, `sound`; an empty `title` or `sound` leaves it out) and `enabled` (false: no push for
/// this conversation).
public struct PushConversationTemplates: Sendable, Equatable {
    public var enabled: Bool?
    public var byType: [Int: String] = [:]
    public var plain: String?
    public var other: String?
    /// `.some(nil)`: no title.
    public var title: String??
    /// `.some(nil)`: no sound.
    public var sound: String??

    public init() {}

    /// The conversation attribute owners set (`attr.pushTemplates`).
    public static let attributeName = "pushTemplates"
    /// The message types named by word, as LeanCloud's `_lctype`.
    public static let typeNames: [String: Int] = ["text": -1, "image": -2, "audio": -3, "video": -4, "location": -5, "file": -6]

    /// Reads the overrides from a JSON object. `strict`: an unknown key or a value of the wrong type is an
    /// error (`IMError` 4903, naming the key); otherwise such keys are skipped (a conversation attribute is
    /// whatever its members wrote).
    public init(object value: JSONValue, strict: Bool = true) throws {
        guard let object = value.objectValue else {
            throw IMError(.invalidField, "push templates must be an object of template texts (and enabled)")
        }
        func wrong(_ key: String, _ what: String) throws {
            if strict { throw IMError(.invalidField, "push templates: '\(key)' \(what)") }
        }
        for (key, entry) in object {
            switch key {
            case "enabled":
                if let flag = entry.boolValue { enabled = flag } else { try wrong(key, "must be true or false") }
            case "title", "sound":
                guard let text = entry.stringValue else {
                    try wrong(key, "must be a string (\"\" leaves it out)")
                    continue
                }
                let value: String?? = .some(text.isEmpty ? nil : text)
                if key == "title" { title = value } else { sound = value }
            default:
                let type = Self.typeNames[key] ?? Int(key)
                guard key == "plain" || key == "other" || type != nil else {
                    let known = "text, image, audio, video, location, file, a type number, plain, other, title, sound, enabled"
                    try wrong(key, "is not a template name (\(known))")
                    continue
                }
                guard let text = entry.stringValue, !text.isEmpty else {
                    try wrong(key, "must be a template (a non-empty string)")
                    continue
                }
                if key == "plain" {
                    plain = text
                } else if key == "other" {
                    other = text
                } else if let type {
                    byType[type] = text
                }
            }
        }
    }

    /// `templates` with these overrides.
    func apply(to templates: inout PushTemplates) {
        templates.byType.merge(byType) { _, new in new }
        if let plain { templates.plain = plain }
        if let other { templates.other = other }
        if let title { templates.title = title }
        if let sound { templates.sound = sound }
    }
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
    /// `[push.<name>] rate`: notifications per second this provider sends at most (evenly spaced); nil: no limit.
    public var rate: Double?

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
    /// Pushes sent at once by this node (a push service answers in tens of milliseconds: a few in flight would
    /// cap a node at a few hundred a second).
    public var workers: Int = 128
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
