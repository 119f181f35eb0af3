import CoreMetrics
import Crypto
import Foundation
import IMCore

/// A member's click on a card, checked: the plugin it goes to and the `action` table `on_action` gets.
struct VerifiedCardClick {
    var plugin: LuaPlugin
    var messageID: String?
    var action: JSONValue
}

extension PluginEngine {
    /// A click (cmd message `card.click`): checked, then `on_action(action, ctx)` of the plugin that sent
    /// the card. A refused click never reaches a plugin: it is logged (and listed as a `log` action of
    /// `hookbot.card`) and counted in `hookbot_card_clicks_total{result="refused"}`.
    func cardClick(_ cmd: HookCommand) -> HookResult {
        switch verifyCardClick(cmd) {
        case .failure(let problem):
            Counter(label: "hookbot_card_clicks_total", dimensions: [("result", "refused")], factory: metrics).increment()
            let text = "card click refused: \(cmd.from) in \(cmd.cid): \(problem.description)"
            logger.warning("\(text)", metadata: ["cid": "\(cmd.cid)", "from": "\(cmd.from)"])
            return HookResult(actions: [HookAction(plugin: "hookbot.card", kind: .log(level: .warning, message: text))])
        case .success(let click):
            Counter(label: "hookbot_card_clicks_total", dimensions: [("result", "accepted")], factory: metrics).increment()
            return call(click.plugin, cid: cmd.cid, messageID: click.messageID) { plugin in
                plugin.invoke(.onAction, pushJSON(click.action))
            }
        }
    }

    func verifyCardClick(_ cmd: HookCommand) -> Result<VerifiedCardClick, HookCards.Problem> {
        func field(_ key: String, max: Int) -> String? {
            guard let s = cmd.ext[key]?.stringValue, !s.isEmpty, s.utf8.count <= max else { return nil }
            return s
        }
        guard let pluginName = field("plugin", max: 64), let cardID = field("card", max: 64), let actionName = field("action", max: 64),
            let token = field("token", max: 64)
        else { return .failure(.init("a click needs plugin, card, action and token (strings)")) }
        guard let value = cmd.ext["value"]?.stringValue, value.count <= HookCards.maxValue else {
            return .failure(.init("a click needs a value (a string)"))
        }
        guard let plugin = ordered.first(where: { $0.name == pluginName }), !plugin.disabled, plugin.has(.onAction) else {
            return .failure(.init("no plugin '\(pluginName)' takes card clicks"))
        }
        let now = clock.now()
        let record: HookCards.Record
        let key: SymmetricKey
        do {
            guard let r = try HookCards.Record.load(store, plugin: pluginName, id: cardID, now: now) else {
                return .failure(.init("no card '\(cardID)' of \(pluginName) (unknown or expired)"))
            }
            record = r
            key = try HookCards.secret(store, now: now)
        } catch {
            return .failure(.init("cannot read the card: \(error)"))
        }
        guard record.cid == cmd.cid else { return .failure(.init("card '\(cardID)' is in another conversation")) }
        // The control the click names, in the card as it is now (an update may have removed or disabled it).
        var control: [String: JSONValue]?
        var label: String?
        for b in record.card["buttons"]?.arrayValue ?? [] {
            if b["action"]?.stringValue == actionName, b["value"]?.stringValue == value {
                control = b.objectValue
                label = b["label"]?.stringValue
            }
        }
        for s in record.card["selects"]?.arrayValue ?? [] where s["action"]?.stringValue == actionName {
            for o in s["options"]?.arrayValue ?? [] where o["value"]?.stringValue == value {
                control = s.objectValue
                label = o["label"]?.stringValue
            }
        }
        guard let control else {
            return .failure(.init("card '\(cardID)' has no control '\(actionName)' with that value (now)"))
        }
        let only = control["only"]?.arrayValue?.compactMap(\.stringValue) ?? []
        let roles = control["roles"]?.arrayValue?.compactMap(\.stringValue) ?? []
        let expected = HookCards.token(
            key: key, plugin: pluginName, card: cardID, cid: cmd.cid, action: actionName, value: value, only: only, roles: roles)
        guard constantTimeEqual(expected, token) else { return .failure(.init("the token does not match (forged or altered click)")) }
        guard control["disabled"] != .bool(true) else { return .failure(.init("'\(label ?? value)' is disabled")) }
        if !only.isEmpty || !roles.isEmpty {
            let allowed = only.contains(cmd.from) || roles.contains { hasRole(env, user: cmd.from, role: $0, cid: cmd.cid) }
            guard allowed else { return .failure(.init("'\(label ?? value)' is not for \(cmd.from)")) }
        }
        var form: [String: JSONValue] = [:]
        let inputs = record.card["inputs"]?.arrayValue ?? []
        // Inputs travel as "form.<name>" = text (cmd message values are flat).
        for (key, v) in cmd.ext where key.hasPrefix(HookCards.formPrefix) {
            let name = String(key.dropFirst(HookCards.formPrefix.count))
            guard let input = inputs.first(where: { $0["name"]?.stringValue == name }) else {
                return .failure(.init("the card has no input '\(name)'"))
            }
            guard let text = v.stringValue else { return .failure(.init("input '\(name)' must be a string")) }
            let max = input["max"]?.intValue ?? HookCards.defaultInputValue
            guard text.count <= max else { return .failure(.init("input '\(name)' is longer than \(max) characters")) }
            form[name] = .string(text)
        }
        for input in inputs {
            if let name = input["name"]?.stringValue, form[name] == nil { form[name] = .string("") }
        }
        var action: [String: JSONValue] = [
            "name": .string(actionName), "value": .string(value), "member": .string(cmd.from), "cid": .string(cmd.cid),
            "card": record.table(id: cardID), "form": .object(form),
        ]
        if let label { action["label"] = .string(label) }
        if let mid = record.messageID { action["message_id"] = .string(mid) }
        return .success(VerifiedCardClick(plugin: plugin, messageID: record.messageID, action: .object(action)))
    }
}

private func constantTimeEqual(_ a: String, _ b: String) -> Bool {
    let x = Array(a.utf8)
    let y = Array(b.utf8)
    guard x.count == y.count else { return false }
    var diff: UInt8 = 0
    for i in 0..<x.count { diff |= x[i] ^ y[i] }
    return diff == 0
}
