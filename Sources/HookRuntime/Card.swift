import Crypto
import Foundation
import IMCore

/// Cards: the standard custom message type **card** (`_lctype` 100) that plugins send with `ctx.card{…}`.
/// A card is `attrs.card = {id, plugin, title, text, image, fields, buttons, selects, inputs}`; every
/// button and select option carries a token, HMAC-SHA256 of the bot's card secret over what the click
/// may say (plugin, card id, conversation, action, value, who may click), so a member's click (a cmd
/// message `card.click` with `{plugin, card, action, value, token, form.<input>…}`) can be checked without
/// trusting anything the member sent. The host keeps each card (for updates and to refuse clicks on
/// buttons since removed or disabled) in the bot's state file, namespace `hookbot.card:<plugin>`.
public enum HookCards {
    /// The card's message type (`_lctype`), reserved: plugins cannot register it.
    public static let messageType = 100
    /// The cmd message action of a click.
    public static let clickAction = "card.click"
    /// The prefix of a click's input texts in its `ext` (cmd message values are strings, numbers or booleans).
    public static let formPrefix = "form."
    /// The state namespace of a plugin's cards.
    public static func namespace(_ plugin: String) -> String { "hookbot.card:\(plugin)" }
    /// Where the bot's card secret lives (the host's own state).
    static let secretKey = "card.secret"

    // Caps: everything a plugin (or a card update) can make the host keep and send is bounded.
    public static let maxTitle = 256
    public static let maxText = 4000
    public static let maxURL = 2048
    public static let maxFields = 25
    public static let maxFieldName = 256
    public static let maxFieldValue = 1024
    public static let maxButtons = 25
    public static let maxLabel = 80
    public static let maxValue = 256
    public static let maxSelects = 5
    public static let maxOptions = 25
    public static let maxInputs = 5
    public static let maxInputValue = 1000
    public static let defaultInputValue = 200
    public static let maxAllowed = 50
    public static let maxRoles = 8
    /// Live cards a plugin may keep (older ones expire with their `ttl`).
    public static let maxCards = 10_000
    public static let defaultTTL: Double = 30 * 86_400
    public static let maxTTL: Double = 365 * 86_400
    public static let styles: Set<String> = ["primary", "secondary", "success", "danger"]

    /// Why a card or a click is not accepted.
    public struct Problem: Error, CustomStringConvertible, Sendable, Equatable {
        public var description: String
        init(_ d: String) { description = d }
    }

    static func isName(_ s: String, max: Int = 64) -> Bool {
        !s.isEmpty && s.utf8.count <= max
            && s.utf8.allSatisfy { c in
                (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x5F || c == 0x2D
                    || c == 0x2E || c == 0x3A
            }
    }

    // MARK: validation

    /// Checks a card table (what `ctx.card{…}` got, without `cid`, `id` and `ttl`) and returns it in its
    /// normalised form (defaults filled in, only known keys), or the first problem, naming the field.
    public static func normalise(_ spec: [String: JSONValue]) throws(Problem) -> [String: JSONValue] {
        let known: Set<String> = ["title", "text", "image", "fields", "buttons", "selects", "inputs", "disabled"]
        for key in spec.keys.sorted() where !known.contains(key) {
            throw Problem(
                "unknown field '\(key)' (a card has title, text, image, fields, buttons, selects, inputs, disabled)")
        }
        var card: [String: JSONValue] = [:]
        if let title = try string(spec["title"], "title", max: maxTitle) { card["title"] = .string(title) }
        if let text = try string(spec["text"], "text", max: maxText) { card["text"] = .string(text) }
        guard card["title"] != nil || card["text"] != nil else { throw Problem("a card needs a title or a text") }
        if let image = spec["image"], image != .null {
            card["image"] = try normaliseImage(image)
        }
        if let fields = try list(spec["fields"], "fields", max: maxFields) {
            card["fields"] = .array(
                try fields.enumerated().map { i, v throws(Problem) in
                    let f = try object(v, "fields[\(i + 1)]", keys: ["name", "value", "inline"])
                    var o: [String: JSONValue] = [
                        "name": .string(try required(f["name"], "fields[\(i + 1)].name", max: maxFieldName)),
                        "value": .string(try required(f["value"], "fields[\(i + 1)].value", max: maxFieldValue, numbers: true)),
                    ]
                    if try bool(f["inline"], "fields[\(i + 1)].inline") { o["inline"] = .bool(true) }
                    return .object(o)
                })
        }
        var controls = Set<String>()
        func claim(_ action: String, _ value: String, _ what: String) throws(Problem) {
            guard controls.insert(action + "\u{0}" + value).inserted else {
                throw Problem("\(what): another control already has action '\(action)' and value '\(value)'")
            }
        }
        if let buttons = try list(spec["buttons"], "buttons", max: maxButtons) {
            card["buttons"] = .array(
                try buttons.enumerated().map { i, v throws(Problem) in
                    let what = "buttons[\(i + 1)]"
                    let b = try object(v, what, keys: ["label", "action", "value", "style", "disabled", "only", "roles"])
                    let label = try required(b["label"], "\(what).label", max: maxLabel)
                    var o = try control(b, what, defaultAction: "click")
                    o["label"] = .string(label)
                    let value = try string(b["value"], "\(what).value", max: maxValue, numbers: true) ?? label
                    o["value"] = .string(value)
                    if let style = try string(b["style"], "\(what).style", max: 16) {
                        guard styles.contains(style) else {
                            throw Problem("\(what).style: '\(style)' is not one of primary, secondary, success, danger")
                        }
                        o["style"] = .string(style)
                    }
                    try claim(o["action"]!.stringValue!, value, what)
                    return .object(o)
                })
        }
        if let selects = try list(spec["selects"], "selects", max: maxSelects) {
            card["selects"] = .array(
                try selects.enumerated().map { i, v throws(Problem) in
                    let what = "selects[\(i + 1)]"
                    let s = try object(v, what, keys: ["action", "placeholder", "options", "disabled", "only", "roles"])
                    var o = try control(s, what, defaultAction: "select")
                    if let p = try string(s["placeholder"], "\(what).placeholder", max: maxLabel) { o["placeholder"] = .string(p) }
                    guard let options = try list(s["options"], "\(what).options", max: maxOptions), !options.isEmpty else {
                        throw Problem("\(what).options: a select needs 1 to \(maxOptions) options")
                    }
                    o["options"] = .array(
                        try options.enumerated().map { j, ov throws(Problem) in
                            let owhat = "\(what).options[\(j + 1)]"
                            if case .string(let label) = ov {
                                _ = try required(.string(label), "\(owhat)", max: maxLabel)
                                try claim(o["action"]!.stringValue!, label, owhat)
                                return .object(["label": .string(label), "value": .string(label)])
                            }
                            let opt = try object(ov, owhat, keys: ["label", "value"])
                            let label = try required(opt["label"], "\(owhat).label", max: maxLabel)
                            let value = try string(opt["value"], "\(owhat).value", max: maxValue, numbers: true) ?? label
                            try claim(o["action"]!.stringValue!, value, owhat)
                            return .object(["label": .string(label), "value": .string(value)])
                        })
                    return .object(o)
                })
        }
        if let inputs = try list(spec["inputs"], "inputs", max: maxInputs) {
            var names = Set<String>()
            card["inputs"] = .array(
                try inputs.enumerated().map { i, v throws(Problem) in
                    let what = "inputs[\(i + 1)]"
                    let f = try object(v, what, keys: ["name", "label", "placeholder", "max"])
                    let name = try required(f["name"], "\(what).name", max: 64)
                    guard isName(name), names.insert(name).inserted else {
                        throw Problem("\(what).name: '\(name)' must be unique, of letters, digits, _ - . :")
                    }
                    var o: [String: JSONValue] = ["name": .string(name)]
                    if let l = try string(f["label"], "\(what).label", max: maxLabel) { o["label"] = .string(l) }
                    if let p = try string(f["placeholder"], "\(what).placeholder", max: maxLabel) { o["placeholder"] = .string(p) }
                    var maxLength = defaultInputValue
                    if let m = f["max"], m != .null {
                        guard let n = m.intValue, n >= 1, n <= maxInputValue else {
                            throw Problem("\(what).max: a whole number from 1 to \(maxInputValue)")
                        }
                        maxLength = n
                    }
                    o["max"] = .int(maxLength)
                    return .object(o)
                })
            if !(card["inputs"]?.arrayValue?.isEmpty ?? true), card["buttons"] == nil {
                throw Problem("inputs: a card with inputs needs a button to submit them")
            }
        }
        if try bool(spec["disabled"], "disabled") { card = disablingAll(card) }
        return card
    }

    /// The card with every button and select disabled.
    public static func disablingAll(_ card: [String: JSONValue]) -> [String: JSONValue] {
        var c = card
        for key in ["buttons", "selects"] {
            guard let items = c[key]?.arrayValue else { continue }
            c[key] = .array(
                items.map { item in
                    guard var o = item.objectValue else { return item }
                    o["disabled"] = .bool(true)
                    return .object(o)
                })
        }
        return c
    }

    private static func normaliseImage(_ v: JSONValue) throws(Problem) -> JSONValue {
        switch v {
        case .string(let url):
            return .object(["url": .string(try checkedURL(url, "image"))])
        case .object(let o):
            // A message's file (msg.file) or {url = …, id = …}.
            let file = o["file"]?.objectValue ?? o
            guard let url = file["url"]?.stringValue else { throw Problem("image: a URL or a file with a url") }
            var out: [String: JSONValue] = ["url": .string(try checkedURL(url, "image"))]
            if let id = file["id"]?.stringValue, id.utf8.count <= 128 { out["id"] = .string(id) }
            return .object(out)
        default:
            throw Problem("image: a URL or a file with a url, not \(kind(v))")
        }
    }

    private static func checkedURL(_ url: String, _ what: String) throws(Problem) -> String {
        guard url.utf8.count <= maxURL, let u = URL(string: url), let scheme = u.scheme?.lowercased(),
            scheme == "http" || scheme == "https"
        else { throw Problem("\(what): an http(s) URL of at most \(maxURL) bytes") }
        return url
    }

    /// `action`, `disabled`, `only`, `roles` of a button or select.
    private static func control(_ o: [String: JSONValue], _ what: String, defaultAction: String) throws(Problem) -> [String: JSONValue] {
        var out: [String: JSONValue] = [:]
        let action = try string(o["action"], "\(what).action", max: 64) ?? defaultAction
        guard isName(action) else { throw Problem("\(what).action: '\(action)' must be letters, digits, _ - . : only") }
        out["action"] = .string(action)
        if try bool(o["disabled"], "\(what).disabled") { out["disabled"] = .bool(true) }
        if let only = try names(o["only"], "\(what).only", max: maxAllowed) { out["only"] = .array(only.map(JSONValue.string)) }
        if let roles = try names(o["roles"], "\(what).roles", max: maxRoles) { out["roles"] = .array(roles.map(JSONValue.string)) }
        return out
    }

    private static func names(_ v: JSONValue?, _ what: String, max: Int) throws(Problem) -> [String]? {
        guard let v, v != .null else { return nil }
        if case .string(let s) = v { return [try required(.string(s), what, max: 128)] }
        guard let items = try list(v, what, max: max) else { return nil }
        if items.isEmpty { return nil }
        return try items.enumerated().map { i, item throws(Problem) in try required(item, "\(what)[\(i + 1)]", max: 128) }
    }

    private static func kind(_ v: JSONValue) -> String {
        switch v {
        case .null: "nil"
        case .bool: "a boolean"
        case .int, .double: "a number"
        case .string: "a string"
        case .array: "a list"
        case .object: "a table"
        }
    }

    private static func string(_ v: JSONValue?, _ what: String, max: Int, numbers: Bool = false) throws(Problem) -> String? {
        guard let v, v != .null else { return nil }
        let s: String
        switch v {
        case .string(let x): s = x
        case .int(let i) where numbers: s = String(i)
        case .double(let d) where numbers: s = String(d)
        default: throw Problem("\(what): a string expected, not \(kind(v))")
        }
        guard s.count <= max else { throw Problem("\(what): at most \(max) characters (\(s.count) given)") }
        return s
    }

    private static func required(_ v: JSONValue?, _ what: String, max: Int, numbers: Bool = false) throws(Problem) -> String {
        guard let s = try string(v, what, max: max, numbers: numbers), !s.isEmpty else { throw Problem("\(what): missing") }
        return s
    }

    private static func bool(_ v: JSONValue?, _ what: String) throws(Problem) -> Bool {
        guard let v, v != .null else { return false }
        guard case .bool(let b) = v else { throw Problem("\(what): true or false expected, not \(kind(v))") }
        return b
    }

    private static func list(_ v: JSONValue?, _ what: String, max: Int) throws(Problem) -> [JSONValue]? {
        guard let v, v != .null else { return nil }
        let items: [JSONValue]
        switch v {
        case .array(let a): items = a
        case .object(let o) where o.isEmpty: items = []
        default: throw Problem("\(what): a list expected, not \(kind(v))")
        }
        guard items.count <= max else { throw Problem("\(what): at most \(max) (\(items.count) given)") }
        return items
    }

    private static func object(_ v: JSONValue, _ what: String, keys: Set<String>) throws(Problem) -> [String: JSONValue] {
        guard case .object(let o) = v else { throw Problem("\(what): a table expected, not \(kind(v))") }
        for key in o.keys.sorted() where !keys.contains(key) {
            throw Problem("\(what): unknown field '\(key)' (\(keys.sorted().joined(separator: ", ")))")
        }
        return o
    }

    // MARK: signing

    /// The bot's card secret: 32 random bytes, made once and kept in the host's state.
    static func secret(_ store: HookStateStore, now: Double) throws -> SymmetricKey {
        if let hex = try store.get(plugin: hostStatePlugin, key: secretKey, now: now)?.stringValue, let data = Data(hex: hex) {
            return SymmetricKey(data: data)
        }
        let key = SymmetricKey(size: .bits256)
        let hex = key.withUnsafeBytes { $0.map { String(format: "%02x", $0) }.joined() }
        try store.set(plugin: hostStatePlugin, key: secretKey, value: .string(hex), now: now)
        return key
    }

    /// The token of one clickable (action, value) of a card: base64url of the first 16 bytes of
    /// HMAC-SHA256 over the plugin, card id, conversation, action, value and who may click.
    public static func token(
        key: SymmetricKey, plugin: String, card: String, cid: String, action: String, value: String, only: [String],
        roles: [String]
    ) -> String {
        let text = ["v1", plugin, card, cid, action, value, only.sorted().joined(separator: ","), roles.sorted().joined(separator: ",")]
            .joined(separator: "\n")
        let mac = HMAC<SHA256>.authenticationCode(for: Data(text.utf8), using: key)
        return Data(mac.prefix(16)).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    /// The card as it goes out: with its id, plugin and a token on every enabled button and option.
    static func signed(_ card: [String: JSONValue], key: SymmetricKey, plugin: String, id: String, cid: String) -> [String: JSONValue] {
        var c = card
        c["id"] = .string(id)
        c["plugin"] = .string(plugin)
        func sign(_ control: [String: JSONValue], value: String) -> String {
            token(
                key: key, plugin: plugin, card: id, cid: cid, action: control["action"]?.stringValue ?? "", value: value,
                only: control["only"]?.arrayValue?.compactMap(\.stringValue) ?? [],
                roles: control["roles"]?.arrayValue?.compactMap(\.stringValue) ?? [])
        }
        if let buttons = c["buttons"]?.arrayValue {
            c["buttons"] = .array(
                buttons.map { b in
                    guard var o = b.objectValue, o["disabled"] != .bool(true) else { return b }
                    o["token"] = .string(sign(o, value: o["value"]?.stringValue ?? ""))
                    return .object(o)
                })
        }
        if let selects = c["selects"]?.arrayValue {
            c["selects"] = .array(
                selects.map { s in
                    guard var o = s.objectValue, o["disabled"] != .bool(true) else { return s }
                    o["options"] = .array(
                        (o["options"]?.arrayValue ?? []).map { opt in
                            guard var p = opt.objectValue else { return opt }
                            p["token"] = .string(sign(o, value: p["value"]?.stringValue ?? ""))
                            return .object(p)
                        })
                    return .object(o)
                })
        }
        return c
    }

    /// The card's message: `_lctype` 100, the card in `attrs.card`, and a text for clients that do not
    /// render cards (title, text, fields, and the buttons' labels in brackets).
    static func message(_ card: [String: JSONValue], cid: String) -> HookMessage {
        var lines: [String] = []
        if let t = card["title"]?.stringValue { lines.append(t) }
        if let t = card["text"]?.stringValue { lines.append(t) }
        for f in card["fields"]?.arrayValue ?? [] {
            lines.append("\(f["name"]?.stringValue ?? ""): \(f["value"]?.stringValue ?? "")")
        }
        let labels = (card["buttons"]?.arrayValue ?? []).compactMap { $0["label"]?.stringValue }.map { "[\($0)]" }
        if !labels.isEmpty { lines.append(labels.joined(separator: " ")) }
        return HookMessage(cid: cid, type: messageType, text: lines.joined(separator: "\n"), attrs: ["card": .object(card)])
    }

    // MARK: records

    /// Records that the card message `message` (one the bot sent) got the id and timestamp the server
    /// gave it: what `ctx.card_update` edits. Hosts call it once the send is acknowledged.
    public static func recordSent(_ message: HookMessage, id messageID: String, timestamp: Int64, store: HookStateStore, now: Double) {
        guard message.type == messageType, let card = message.attrs["card"], let cardID = card["id"]?.stringValue,
            let plugin = card["plugin"]?.stringValue
        else { return }
        let ns = namespace(plugin)
        guard let record = try? store.get(plugin: ns, key: cardID, now: now), record["cid"]?.stringValue == message.cid else { return }
        let ttl = record["expires"]?.doubleValue.map { max(1, $0 - now) }
        try? store.set(
            plugin: ns, key: cardID + sentSuffix,
            value: .object(["mid": .string(messageID), "ts": .int(Int(timestamp))]), ttl: ttl, now: now)
    }

    static let sentSuffix = "\u{1}sent"

    /// A card the host keeps: `{cid, card, expires}` and, once sent, the message's id and timestamp.
    struct Record {
        var cid: String
        var card: [String: JSONValue]
        var expires: Double
        var messageID: String?
        var timestamp: Int64?

        static func load(_ store: HookStateStore, plugin: String, id: String, now: Double) throws -> Record? {
            let ns = namespace(plugin)
            guard let v = try store.get(plugin: ns, key: id, now: now), let cid = v["cid"]?.stringValue,
                let card = v["card"]?.objectValue
            else { return nil }
            let sent = try store.get(plugin: ns, key: id + sentSuffix, now: now)
            return Record(
                cid: cid, card: card, expires: v["expires"]?.doubleValue ?? now + defaultTTL,
                messageID: sent?["mid"]?.stringValue, timestamp: sent?["ts"]?.intValue.map(Int64.init))
        }

        func save(_ store: HookStateStore, plugin: String, id: String, now: Double) throws {
            try store.set(
                plugin: namespace(plugin), key: id,
                value: .object(["cid": .string(cid), "card": .object(card), "expires": .double(expires)]),
                ttl: max(1, expires - now), now: now)
        }

        /// The card table plugins see: the card with its id, conversation and message id.
        func table(id: String) -> JSONValue {
            var t = card
            t["id"] = .string(id)
            t["cid"] = .string(cid)
            if let messageID { t["message_id"] = .string(messageID) }
            return .object(t)
        }
    }
}

extension Data {
    /// Bytes from lowercase or uppercase hex (nil for anything else).
    fileprivate init?(hex: String) {
        guard hex.utf8.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(hex.utf8.count / 2)
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            guard let b = UInt8(hex[index..<next], radix: 16) else { return nil }
            bytes.append(b)
            index = next
        }
        self.init(bytes)
    }
}
