import Foundation
import IMCore

/// What the offline receivers' push notification says for one message: LeanCloud's `pushData`, sent with the
/// message (`IMSendOptions.pushData`; docs/PUSH.md, "What it says"). Without it the server's templates decide.
///
/// ```swift
/// let push = IMPushData(title: "Tom", body: "New order #42", badge: .number(1), payload: ["order": 42])
/// try await conversation.send(.text("order 42 is ready"), options: IMSendOptions(pushData: push))
/// ```
public struct IMPushData: Sendable, Equatable {
    /// The notification's badge.
    public enum Badge: Sendable, Equatable {
        /// This number.
        case number(Int)
        /// The receiver's unread count (LeanCloud's `"Increment"`; also what the server sends with no badge).
        case increment
    }

    /// The title (`alert.title`).
    public var title: String?
    /// The text (`alert.body`, or `alert` alone when there is no title). With neither title nor body the push
    /// is a background one: it wakes the app and shows nothing.
    public var body: String?
    public var badge: Badge?
    public var sound: String?
    /// Later notifications with the same id replace this one on the device (`collapse-id`).
    public var collapseId: String?
    /// The app's own keys, delivered in the notification's data (they cannot be named like the fields above).
    public var payload: [String: JSONValue]
    /// LeanCloud's keys the server reads; a payload key of these names is refused.
    public static let reservedKeys: Set<String> = [
        "alert", "title", "body", "badge", "sound", "collapse-id", "collapseId", "content-available", "category",
        "mutable-content", "_profile",
    ]
    /// The most `pushData` the server takes, in bytes of JSON (APNs' payload limit).
    public static let maxBytes = 4096

    private var raw: String?

    public init(
        title: String? = nil, body: String? = nil, badge: Badge? = nil, sound: String? = nil, collapseId: String? = nil,
        payload: [String: JSONValue] = [:]
    ) {
        self.title = title
        self.body = body
        self.badge = badge
        self.sound = sound
        self.collapseId = collapseId
        self.payload = payload
    }

    /// `pushData` written by hand, as LeanCloud's other SDKs take it: a JSON object such as
    /// `{"alert": {"title": "Tom", "body": "hi"}, "badge": "Increment", "sound": "default", "order": 42}`.
    /// Anything else throws `INVALID_ARGUMENT` (9007).
    public init(json: String) throws(IMError) {
        guard let object = JSONValue.parse(json)?.objectValue else {
            throw IMError(.invalidArgument, "pushData must be a JSON object, got \(json.prefix(40))")
        }
        self.init(
            title: object["title"]?.stringValue ?? object["alert"]?["title"]?.stringValue,
            body: object["body"]?.stringValue ?? object["alert"]?.stringValue ?? object["alert"]?["body"]?.stringValue,
            badge: object["badge"].map { $0.intValue.map { .number(Int($0)) } ?? .increment },
            sound: object["sound"]?.stringValue, collapseId: object["collapse-id"]?.stringValue,
            payload: object.filter { !Self.reservedKeys.contains($0.key) })
        raw = json
    }

    /// The `pushData` text the `direct` command carries: what `init(json:)` was given, or the fields as
    /// LeanCloud's JSON (`alert` as text, or `{title, body}` with a title).
    public var encoded: String {
        if let raw { return raw }
        var object = payload
        if let title {
            var alert: [String: JSONValue] = ["title": .string(title)]
            if let body { alert["body"] = .string(body) }
            object["alert"] = .object(alert)
        } else if let body {
            object["alert"] = .string(body)
        }
        switch badge {
        case .number(let n): object["badge"] = .int(n)
        case .increment: object["badge"] = .string("Increment")
        case nil: break
        }
        if let sound { object["sound"] = .string(sound) }
        if let collapseId { object["collapse-id"] = .string(collapseId) }
        return JSONValue.object(object).jsonString()
    }

    /// Throws `INVALID_ARGUMENT` (9007) for what the server would refuse: over `maxBytes`, or a payload key
    /// LeanCloud reserves.
    func validated() throws(IMError) -> String {
        if raw == nil, let key = payload.keys.sorted().first(where: Self.reservedKeys.contains) {
            throw IMError(.invalidArgument, "pushData payload key '\(key)' is reserved (use the field of that name)")
        }
        let text = encoded
        guard text.utf8.count <= Self.maxBytes else {
            throw IMError(.invalidArgument, "pushData is \(text.utf8.count) bytes; at most \(Self.maxBytes)")
        }
        return text
    }
}
