import CLua
import Foundation
import IMCore
import Logging
import LuaSandbox

// `ctx.state`: the Swift side of the plugin's persisted key-value store (rules as in Callbacks.swift).

/// The key argument of a `ctx.state` call, or nil when it is not a string of at most 1024 bytes without
/// NUL (a NUL byte would make distinct keys compare equal in SQLite).
private func stateKey(_ L: LuaRef) -> String? {
    guard let k = luaString(L, 1), k.utf8.count <= maxStateKeyBytes, !k.utf8.contains(0) else { return nil }
    return k
}

private func invalidStateKey(_ L: LuaRef, _ what: String) -> Int32 {
    fail(L, "state.\(what): invalid key (a string of at most \(maxStateKeyBytes) bytes without NUL)")
}

let cbStateGet: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    guard let key = stateKey(L) else { return invalidStateKey(L, "get") }
    let v: JSONValue?
    do { v = try plugin.env.store.get(plugin: plugin.name, key: key, now: plugin.env.clock.now()) } catch {
        return fail(L, "state.get: \(error)")
    }
    guard let v else {
        lua_pushnil(L)
        return 1
    }
    if !luaPush(L, json: v) { return fail(L, "state.get: value too deep") }
    return 1
}

let cbStateSet: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    guard let key = stateKey(L) else { return invalidStateKey(L, "set") }
    let value: JSONValue
    do { value = try luaToJSON(L, 2) } catch { return fail(L, "state.set(\(key)): \(error)") }
    var ttl: Double? = nil
    if lua_type(L, 3) != LUA_TNIL && lua_type(L, 3) != LUA_TNONE {
        guard let t = argNumber(L, 3), t > 0, t.isFinite else { return fail(L, "state.set: ttl must be a positive number of seconds") }
        ttl = t
    }
    do { try plugin.env.store.set(plugin: plugin.name, key: key, value: value, ttl: ttl, now: plugin.env.clock.now()) } catch {
        return fail(L, "state.set: \(error)")
    }
    return 0
}

let cbStateIncr: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    guard let key = stateKey(L) else { return invalidStateKey(L, "incr") }
    var by: JSONValue = .int(1)
    if lua_type(L, 2) != LUA_TNIL && lua_type(L, 2) != LUA_TNONE {
        guard lua_type(L, 2) == LUA_TNUMBER, let v = try? luaToJSON(L, 2) else {
            return fail(L, "state.incr: increment must be a number")
        }
        by = v
    }
    var ttl: Double? = nil
    if lua_type(L, 3) != LUA_TNIL && lua_type(L, 3) != LUA_TNONE {
        guard let t = argNumber(L, 3), t > 0, t.isFinite else { return fail(L, "state.incr: ttl must be a positive number of seconds") }
        ttl = t
    }
    var expiry = HookStateStore.Expiry.fixed
    if lua_type(L, 4) != LUA_TNIL && lua_type(L, 4) != LUA_TNONE {
        guard lua_type(L, 4) == LUA_TSTRING, let mode = HookStateStore.Expiry(rawValue: luaString(L, 4) ?? "") else {
            return fail(L, "state.incr: the expiry mode must be \"fixed\" or \"sliding\"")
        }
        expiry = mode
    }
    let r: JSONValue
    do {
        r = try plugin.env.store.incr(plugin: plugin.name, key: key, by: by, ttl: ttl, expiry: expiry, now: plugin.env.clock.now())
    } catch {
        return fail(L, "state.incr(\(key)): \(error)")
    }
    _ = luaPush(L, json: r)
    return 1
}

let cbStateDelete: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    guard let key = stateKey(L) else { return invalidStateKey(L, "delete") }
    do { try plugin.env.store.delete(plugin: plugin.name, key: key) } catch { return fail(L, "state.delete: \(error)") }
    return 0
}

let cbStateKeys: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    let prefix = luaString(L, 1) ?? ""
    let keys: [String]
    do { keys = try plugin.env.store.keys(plugin: plugin.name, prefix: prefix, now: plugin.env.clock.now()) } catch {
        return fail(L, "state.keys: \(error)")
    }
    lua_createtable(L, Int32(clamping: keys.count), 0)
    for (i, k) in keys.enumerated() {
        luaPush(L, k)
        lua_rawseti(L, -2, Int64(i + 1))
    }
    return 1
}
