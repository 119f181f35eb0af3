import BotRouting
import HookRuntime
import IMCore

/// The `click` step: a member clicks a button (or picks a select's option) of a card a bot sent in the
/// case, as a client would — a cmd message `card.click` with the card's signed token — so the runtime
/// checks it exactly as it checks a real click.
///
/// `{ click = { button = "Pizza" } }` clicks the button labelled "Pizza" of the last card sent or updated;
/// `card` names another card by id, `from` the member (Tom), `value`/`action` pick a button by value,
/// `select` (its action) and `option` (label or value) a select's option, `form` the inputs' texts, and
/// `token` replaces the signed token (a forged click).
enum ScenarioCards {
    static func click(_ o: [String: JSONValue], card: [String: JSONValue]) throws -> HookCommand {
        func str(_ key: String) throws -> String? {
            guard let v = o[key] else { return nil }
            guard let s = v.stringValue ?? v.intValue.map(String.init) else { throw ScenarioError("click: \(key) must be a string") }
            return s
        }
        let id = card["id"]?.stringValue ?? ""
        var control: [String: JSONValue]?
        var action: String?
        if let select = try str("select") {
            guard let s = card["selects"]?.arrayValue?.first(where: { $0["action"]?.stringValue == select }) else {
                throw ScenarioError("click: card \(id) has no select '\(select)'")
            }
            let option = try str("option") ?? ""
            control =
                s["options"]?.arrayValue?.first { $0["label"]?.stringValue == option || $0["value"]?.stringValue == option }?
                .objectValue
            action = select
            guard control != nil else { throw ScenarioError("click: select '\(select)' of card \(id) has no option '\(option)'") }
        } else {
            let label = try str("button")
            let value = try str("value")
            let wanted = try str("action")
            control =
                card["buttons"]?.arrayValue?.first { b in
                    (label == nil || b["label"]?.stringValue == label) && (value == nil || b["value"]?.stringValue == value)
                        && (wanted == nil || b["action"]?.stringValue == wanted)
                }?.objectValue
            action = control?["action"]?.stringValue
            guard control != nil else {
                throw ScenarioError("click: card \(id) has no button \(Render.lua(.object(o.filter { $0.key != "from" })))")
            }
        }
        var ext: [String: JSONValue] = [
            "plugin": card["plugin"] ?? .string(""), "card": .string(id), "action": .string(action ?? ""),
            "value": control?["value"] ?? .string(""),
            // A disabled button has no token: the click goes with an empty one (and is refused).
            "token": o["token"] ?? control?["token"] ?? .string(""),
        ]
        for (name, text) in o["form"]?.objectValue ?? [:] { ext[HookCards.formPrefix + name] = text }
        return HookCommand(
            action: HookCards.clickAction, ext: ext, cid: try str("cid") ?? card["cid"]?.stringValue ?? "c1",
            from: try str("from") ?? "Tom")
    }
}
