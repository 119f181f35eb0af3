import CLua
import Foundation
import IMCore
import Logging
import LuaSandbox

// `ctx.types`: custom message types a plugin registers, validates and names (rules as in Callbacks.swift).

let cbTypesRegister: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    guard lua_type(L, 1) == LUA_TTABLE else {
        return fail(L, "ctx.types.register: expects a table {type = n, name = s, fields = {...}}")
    }
    let spec: JSONValue
    do { spec = try luaToJSON(L, 1, path: "type") } catch { return fail(L, "ctx.types.register: \(error)") }
    guard let num = spec["type"]?.intValue, num > 0 else {
        return fail(L, "ctx.types.register: type must be a positive integer")
    }
    guard let name = spec["name"]?.stringValue, isValidPluginName(name) else {
        return fail(L, "ctx.types.register: name must be a string of letters, digits, _ . -")
    }
    var fields: [String: CustomMessageType.Field] = [:]
    switch spec["fields"] ?? .object([:]) {
    case .object(let o):
        for (k, v) in o {
            guard var s = v.stringValue else { return fail(L, "ctx.types.register: field '\(k)' needs a type name") }
            var optional = false
            if s.hasSuffix("?") {
                optional = true
                s.removeLast()
            }
            guard let ft = CustomMessageType.FieldType(rawValue: s) else {
                return fail(L, "ctx.types.register: field '\(k)': unknown type '\(s)' (string, number, integer, boolean, table, any)")
            }
            fields[k] = .init(type: ft, optional: optional)
        }
    case .array(let a) where a.isEmpty: break
    default: return fail(L, "ctx.types.register: fields must be a table of name = type")
    }
    let t = CustomMessageType(number: num, name: name, fields: fields, plugin: plugin.name)
    if let err = plugin.env.registry.register(t, owner: plugin.instanceID) {
        return fail(L, "ctx.types.register: \(err)")
    }
    lua_pushinteger(L, Int64(num))
    return 1
}

let cbTypesValidate: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    let m: HookMessage
    do { m = try luaToMessage(L, 1, base: HookMessage()) } catch {
        lua_pushboolean(L, 0)
        luaPush(L, "\(error)")
        return 2
    }
    if m.type > 0, plugin.env.registry.type(number: m.type) == nil {
        lua_pushboolean(L, 0)
        luaPush(L, "unknown message type \(m.type)")
        return 2
    }
    if let err = plugin.env.registry.validate(m) {
        lua_pushboolean(L, 0)
        luaPush(L, err)
        return 2
    }
    lua_pushboolean(L, 1)
    return 1
}

let cbTypesName: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    guard lua_type(L, 1) == LUA_TNUMBER, let n = plugin.env.registry.name(of: Int(lua_tointegerx(L, 1, nil))) else {
        lua_pushnil(L)
        return 1
    }
    luaPush(L, n)
    return 1
}

let cbTypesNumber: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    if lua_type(L, 1) == LUA_TNUMBER {
        let n = Int(lua_tointegerx(L, 1, nil))
        if plugin.env.registry.name(of: n) != nil { lua_pushinteger(L, Int64(n)) } else { lua_pushnil(L) }
        return 1
    }
    guard let s = luaString(L, 1) else {
        lua_pushnil(L)
        return 1
    }
    if let b = HookMessageTypes.builtinNames.first(where: { $0.value == s }) {
        lua_pushinteger(L, Int64(b.key))
        return 1
    }
    if let t = plugin.env.registry.type(named: s) {
        lua_pushinteger(L, Int64(t.number))
        return 1
    }
    lua_pushnil(L)
    return 1
}
