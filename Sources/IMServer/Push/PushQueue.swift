import Foundation
import IMCore
import PushProviders

/// One pending push in `push_queue` (SQLite `v14-push-queue`): one notification for one device of one
/// receiver. The badge is not stored: it is the receiver's unread count when the push is sent.
struct PushQueueItem: Sendable, Equatable {
    var id: Int64
    var clientID: String
    /// The receiver's device it goes to.
    var device: PushDevice
    var messageID: String
    /// `PushContent.stored` JSON.
    var content: String
    var attempts: Int
    var createdAt: Int64
    var dueAt: Int64
    /// The hold the claim that returned this item set (0 when not claimed): an answer is recorded only while the
    /// row still carries it, so a stopping server's late answer cannot undo a later claim of the same push.
    var heldUntil: Int64 = 0

    var provider: String { device.provider }
    var token: String { device.token }
    var keys: PushSubscriptionKeys? { device.keys }
}

/// The persisted push queue of a store.
protocol PushQueueStore: Sendable {
    /// Adds pushes (their `id`s are ignored); they are due at their `dueAt`.
    func enqueuePushes(_ items: [PushQueueItem]) async throws
    /// Removes every pending push for this device (it is gone); answers how many.
    func removePushes(provider: String, token: String) async throws -> Int
    /// A push to try again at `dueAt`, after `attempts` attempts.
    func reschedulePush(id: Int64, attempts: Int, dueAt: Int64, heldUntil: Int64) async throws
    /// Releases the holds of a previous run of this process (one node: nothing is being sent at start).
    func releasePushHolds() async throws
    func pushQueueDepth() async throws -> Int
    /// Of `clientIDs`, those with a session on another node of a cluster (none for a single server).
    func connectedElsewhere(_ clientIDs: [String]) async throws -> Set<String>
    /// The workers' step (docs/PUSH.md, "The queue"): removes the pushes `finished` (sent or dropped), then
    /// claims, per provider, up to its limit of the due pushes, oldest first, each held until `holdUntil`;
    /// one transaction on SQLite, one statement per provider on PostgreSQL (`FOR UPDATE SKIP LOCKED`).
    func claimPushes(now: Int64, limits: [String: Int], holdUntil: Int64, removing finished: [Int64]) async throws
        -> [PushQueueItem]
    /// Removes pushes by id (sent or dropped), a few hundred a statement.
    func removePushes(ids: [Int64]) async throws
    /// The unread count (the badge, as `UNREAD_MESSAGES_COUNT_UPDATE` sums it) of each of `clientIDs` in one
    /// query; a client with none is absent.
    func unreadTotals(of clientIDs: [String]) async throws -> [String: Int]
}

extension PushQueueStore {
    /// `items` in chunks of `size`: rows queued a transaction at a time, so a 10,000-member group's message
    /// never holds the writer for one giant transaction.
    static func chunks<T>(_ items: [T], size: Int) -> [ArraySlice<T>] {
        stride(from: 0, to: items.count, by: size).map { items[$0..<min(items.count, $0 + size)] }
    }
}

/// What a notification says, decided when the push is queued: LeanCloud's `pushData` when the message
/// has one, else the configured template for its type.
struct PushContent: Sendable, Equatable {
    var title: String?
    var body: String?
    var sound: String?
    /// A badge `pushData` gave; nil means the receiver's unread count.
    var badge: Int?
    var data: [String: JSONValue] = [:]
    var collapseID: String?

    /// The notification for a receiver whose unread count is `unread`.
    func notification(unread: Int) -> PushNotification {
        PushNotification(title: title, body: body, badge: badge ?? unread, sound: sound, data: data, collapseID: collapseID)
    }

    /// How it is kept in `push_queue.content`.
    var stored: String {
        var object: [String: JSONValue] = [:]
        if let title { object["title"] = .string(title) }
        if let body { object["body"] = .string(body) }
        if let sound { object["sound"] = .string(sound) }
        if let badge { object["badge"] = .int(badge) }
        if !data.isEmpty { object["data"] = .object(data) }
        if let collapseID { object["collapseId"] = .string(collapseID) }
        return JSONValue.object(object).jsonString()
    }

    init(
        title: String? = nil, body: String? = nil, sound: String? = nil, badge: Int? = nil, data: [String: JSONValue] = [:],
        collapseID: String? = nil
    ) {
        self.title = title
        self.body = body
        self.sound = sound
        self.badge = badge
        self.data = data
        self.collapseID = collapseID
    }

    init?(stored text: String) {
        guard let object = JSONValue.parse(text)?.objectValue else { return nil }
        self.init(
            title: object["title"]?.stringValue, body: object["body"]?.stringValue, sound: object["sound"]?.stringValue,
            badge: object["badge"]?.intValue, data: object["data"]?.objectValue ?? [:], collapseID: object["collapseId"]?.stringValue)
    }

    /// The content for `record`: its `pushData` (a JSON object in LeanCloud's shape, or plain text for the
    /// alert) wins, else the template of its type. `data` always names the conversation, message and sender.
    static func make(
        for record: MessageRecord, pushData: String?, conversationName: String?, templates: PushTemplates
    ) -> PushContent {
        let base: [String: JSONValue] = ["cid": .string(record.cid), "id": .string(record.id), "from": .string(record.from)]
        if let pushData, !pushData.isEmpty {
            return fromPushData(pushData, base: base, maxCharacters: templates.maxBodyCharacters)
        }
        var type: Int?
        var text = ""
        if record.binary {
            type = 0
        } else if let object = JSONValue.parse(record.data)?.objectValue, let lctype = object["_lctype"]?.intValue {
            type = lctype
            text = object["_lctext"]?.stringValue ?? ""
        } else {
            text = record.data
        }
        let template = type.map { templates.byType[$0] ?? templates.other } ?? templates.plain
        let conversation = conversationName.flatMap { $0.isEmpty ? nil : $0 } ?? record.cid
        func fill(_ template: String) -> String {
            template.replacingOccurrences(of: "{from}", with: record.from)
                .replacingOccurrences(of: "{conversation}", with: conversation)
                .replacingOccurrences(of: "{text}", with: text)
        }
        return PushContent(
            title: templates.title.map { truncated(fill($0), to: templates.maxBodyCharacters) },
            body: truncated(fill(template), to: templates.maxBodyCharacters), sound: templates.sound, data: base)
    }

    /// LeanCloud's `pushData`: `alert` (text, or `{title, body}`), `title`, `body`, `badge` (a number; any
    /// other value means the unread count), `sound`, `content-available` (1 with no alert: a background
    /// push), `collapse-id`; other keys go to the notification's `data`. Text that is not a JSON object is
    /// the alert.
    static func fromPushData(_ text: String, base: [String: JSONValue], maxCharacters: Int) -> PushContent {
        guard let object = JSONValue.parse(text)?.objectValue else {
            return PushContent(body: truncated(text, to: maxCharacters), sound: "default", data: base)
        }
        var content = PushContent(data: base)
        for (key, value) in object {
            switch key {
            case "alert":
                if let alert = value.stringValue {
                    content.body = alert
                } else if let alert = value.objectValue {
                    content.title = alert["title"]?.stringValue ?? content.title
                    content.body = alert["body"]?.stringValue ?? content.body
                }
            case "title": content.title = value.stringValue
            case "body": content.body = value.stringValue
            case "badge": content.badge = value.intValue
            case "sound": content.sound = value.stringValue
            case "collapse-id", "collapseId": content.collapseID = value.stringValue
            case "content-available", "_profile", "category", "mutable-content": continue
            default: content.data[key] = value
            }
        }
        content.title = content.title.map { truncated($0, to: maxCharacters) }
        content.body = content.body.map { truncated($0, to: maxCharacters) }
        return content
    }

    /// `text` cut to at most `limit` characters (grapheme clusters: an emoji or a letter with its accents is
    /// never split), the last one "…" when it was cut.
    static func truncated(_ text: String, to limit: Int) -> String {
        guard limit > 0, text.count > limit else { return text }
        return String(text.prefix(limit - 1)) + "…"
    }
}
