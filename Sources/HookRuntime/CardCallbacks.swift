import CLua
import Foundation
import IMCore
import LuaSandbox

// `ctx.card`, `ctx.card_update`, `ctx.card_get` (the prelude wraps them): Swift functions called from Lua
// through the C trampoline, with the rules of Callbacks.swift (never lua_error; push a message, return -1).

private func cardFail(_ L: LuaRef, _ msg: String) -> Int32 {
    luaPush(L, luaWhere(L) + msg)
    return -1
}

/// A card id the host makes: "c" and 16 random letters and digits.
private func newCardID() -> String {
    let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
    var rng = SystemRandomNumberGenerator()
    return "c" + String((0..<16).map { _ in alphabet[Int(rng.next(upperBound: UInt64(alphabet.count)))] })
}

private func tableArg(_ L: LuaRef, _ i: Int32, _ fname: String) throws -> [String: JSONValue] {
    guard lua_type(L, i) == LUA_TTABLE else {
        throw LuaConversionError("\(fname): expects a table {title = ..., text = ..., buttons = {...}}, got \(luaTypeName(L, i))")
    }
    switch try luaToJSON(L, i, path: "card") {
    case .object(let o): return o
    case .array(let a) where a.isEmpty: return [:]
    default: throw LuaConversionError("\(fname): the card must be a table with named fields, not a list")
    }
}

/// `hb.card_send(spec)`: validates the card, keeps it, and queues its message; returns its id and
/// conversation.
let cbCardSend: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    let fname = "ctx.card"
    guard plugin.pending.count < maxActionsPerCall else {
        return cardFail(L, "\(fname): too many actions in one call (\(maxActionsPerCall))")
    }
    var spec: [String: JSONValue]
    do { spec = try tableArg(L, 1, fname) } catch { return cardFail(L, "\(error)") }
    let cidValue = spec.removeValue(forKey: "cid")
    let idValue = spec.removeValue(forKey: "id")
    let ttlValue = spec.removeValue(forKey: "ttl")
    let cid: String
    switch cidValue {
    case nil, .null?:
        guard let current = plugin.currentCid else { return cardFail(L, "\(fname): no current conversation (give cid = …)") }
        cid = current
    case .string(let c)?: cid = c
    default: return cardFail(L, "\(fname): cid must be a conversation id (a string)")
    }
    if let reach = plugin.env.reach, cid != plugin.currentCid, !reach.contains(cid) {
        return cardFail(L, "\(fname): the bot is not a member of conversation \(cid)")
    }
    let id: String
    switch idValue {
    case nil, .null?: id = newCardID()
    case .string(let s)? where HookCards.isName(s): id = s
    default: return cardFail(L, "\(fname): id must be 1 to 64 letters, digits, _ - . :")
    }
    var ttl = HookCards.defaultTTL
    if let t = ttlValue, t != .null {
        guard let d = t.doubleValue, d >= 1, d <= HookCards.maxTTL else {
            return cardFail(L, "\(fname): ttl must be 1 to \(Int(HookCards.maxTTL)) seconds")
        }
        ttl = d
    }
    let card: [String: JSONValue]
    do { card = try HookCards.normalise(spec) } catch { return cardFail(L, "\(fname): \(error)") }
    let env = plugin.env
    let now = env.clock.now()
    let message: HookMessage
    do {
        if try HookCards.Record.load(env.store, plugin: plugin.name, id: id, now: now) != nil {
            return cardFail(L, "\(fname): there is a card '\(id)' already (change it with ctx.card_update)")
        }
        // Two keys per card (the card, and its message once sent).
        if try env.store.usage(plugin: HookCards.namespace(plugin.name)).keys >= 2 * HookCards.maxCards {
            return cardFail(
                L, "\(fname): the plugin keeps \(HookCards.maxCards) cards already; give cards a shorter ttl")
        }
        let key = try HookCards.secret(env.store, now: now)
        try HookCards.Record(cid: cid, card: card, expires: now + ttl).save(env.store, plugin: plugin.name, id: id, now: now)
        message = HookCards.message(HookCards.signed(card, key: key, plugin: plugin.name, id: id, cid: cid), cid: cid)
    } catch {
        return cardFail(L, "\(fname): \(error)")
    }
    plugin.pending.append(HookAction(plugin: plugin.name, kind: .send(cid: cid, message: message, replyTo: nil)))
    luaPush(L, id)
    luaPush(L, cid)
    return 2
}

/// `hb.card_update(id, patch)`: changes a sent card (fields in `patch` replace the card's, `false` removes
/// one, `disabled = true/false` disables or enables every button and select) and queues the edit of its
/// message.
let cbCardUpdate: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    let fname = "ctx.card_update"
    guard plugin.pending.count < maxActionsPerCall else {
        return cardFail(L, "\(fname): too many actions in one call (\(maxActionsPerCall))")
    }
    guard let id = luaString(L, 1), HookCards.isName(id) else { return cardFail(L, "\(fname): card id (a string) expected") }
    var patch: [String: JSONValue]
    do { patch = try tableArg(L, 2, fname) } catch { return cardFail(L, "\(error)") }
    let env = plugin.env
    let now = env.clock.now()
    do {
        guard var record = try HookCards.Record.load(env.store, plugin: plugin.name, id: id, now: now) else {
            return cardFail(L, "\(fname): no card '\(id)' (never sent by this plugin, or expired)")
        }
        guard let messageID = record.messageID, let timestamp = record.timestamp else {
            return cardFail(L, "\(fname): card '\(id)' has not been sent yet (its message id comes once the server stored it)")
        }
        let enable = patch["disabled"] == .bool(false)
        if enable { patch.removeValue(forKey: "disabled") }
        var merged = record.card
        for (key, value) in patch {
            if value == .bool(false) && key != "disabled" { merged.removeValue(forKey: key) } else { merged[key] = value }
        }
        if enable {
            for key in ["buttons", "selects"] {
                guard let items = merged[key]?.arrayValue else { continue }
                merged[key] = .array(items.map { item in .object((item.objectValue ?? [:]).filter { $0.key != "disabled" }) })
            }
        }
        let card: [String: JSONValue]
        do { card = try HookCards.normalise(merged) } catch { return cardFail(L, "\(fname): \(error)") }
        record.card = card
        try record.save(env.store, plugin: plugin.name, id: id, now: now)
        let key = try HookCards.secret(env.store, now: now)
        let message = HookCards.message(
            HookCards.signed(card, key: key, plugin: plugin.name, id: id, cid: record.cid), cid: record.cid)
        plugin.pending.append(
            HookAction(plugin: plugin.name, kind: .edit(cid: record.cid, messageID: messageID, timestamp: timestamp, message: message)))
    } catch {
        return cardFail(L, "\(fname): \(error)")
    }
    lua_pushboolean(L, 1)
    return 1
}

/// `hb.card_get(id)`: the card as kept (`{id, cid, message_id, title, …}`), or nil.
let cbCardGet: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    guard let id = luaString(L, 1), HookCards.isName(id) else { return cardFail(L, "ctx.card_get: card id (a string) expected") }
    let record: HookCards.Record?
    do { record = try HookCards.Record.load(plugin.env.store, plugin: plugin.name, id: id, now: plugin.env.clock.now()) } catch {
        return cardFail(L, "ctx.card_get: \(error)")
    }
    guard let record else {
        lua_pushnil(L)
        return 1
    }
    if !luaPush(L, json: record.table(id: id)) { lua_pushnil(L) }
    return 1
}
