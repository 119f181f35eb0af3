import CLua
import IMCore
import LuaSandbox

/// Stack helpers. All table reads are raw (no metamethods), so nothing here
/// can run plugin code or raise a Lua error while Swift frames are live
/// (allocation is uncapped while Swift runs, see shim.h).
typealias LuaRef = OpaquePointer

struct LuaConversionError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

@inline(__always) func luaPush(_ L: LuaRef, _ s: String) {
    // Borrowed in place when the string's UTF-8 is contiguous (native and small strings): `var s = s` for
    // `withUTF8` cost a retain and a release of every string a hook call pushes.
    if s.utf8.withContiguousStorageIfAvailable({ buf in _ = lua_pushlstring(L, buf.baseAddress, buf.count) }) != nil { return }
    var s = s
    s.withUTF8 { buf in _ = lua_pushlstring(L, buf.baseAddress, buf.count) }
}

@inline(__always) func luaPushStatic(_ L: LuaRef, _ s: StaticString) {
    _ = lua_pushlstring(L, UnsafeRawPointer(s.utf8Start).assumingMemoryBound(to: CChar.self), s.utf8CodeUnitCount)
}

@inline(__always) func luaSetField(_ L: LuaRef, _ key: StaticString, _ s: String) {
    luaPush(L, s)
    lua_setfield(L, -2, UnsafeRawPointer(key.utf8Start).assumingMemoryBound(to: CChar.self))
}

@inline(__always) func luaSetField(_ L: LuaRef, _ key: StaticString, int v: Int64) {
    lua_pushinteger(L, v)
    lua_setfield(L, -2, UnsafeRawPointer(key.utf8Start).assumingMemoryBound(to: CChar.self))
}

@inline(__always) func luaSetFieldTop(_ L: LuaRef, _ key: StaticString) {
    lua_setfield(L, -2, UnsafeRawPointer(key.utf8Start).assumingMemoryBound(to: CChar.self))
}

@inline(__always) func luaString(_ L: LuaRef, _ idx: Int32) -> String? {
    guard lua_type(L, idx) == LUA_TSTRING else { return nil }
    var len = 0
    guard let p = lua_tolstring(L, idx, &len) else { return nil }
    return p.withMemoryRebound(to: UInt8.self, capacity: len) {
        String(decoding: UnsafeBufferPointer(start: $0, count: len), as: UTF8.self)
    }
}

func luaTypeName(_ L: LuaRef, _ idx: Int32) -> String {
    String(cString: lua_typename(L, lua_type(L, idx)))
}

/// Pushes the raw field `key` of the table at `idx` (absolute index).
@inline(__always) func luaRawField(_ L: LuaRef, _ idx: Int32, _ key: StaticString) -> Int32 {
    luaPushStatic(L, key)
    return lua_rawget(L, idx)
}

func luaPush(_ L: LuaRef, json: JSONValue, depth: Int = 0) -> Bool {
    guard lua_checkstack(L, 3) != 0, depth < 100 else { return false }
    switch json {
    case .null: lua_pushnil(L)
    case .bool(let b): lua_pushboolean(L, b ? 1 : 0)
    case .int(let i): lua_pushinteger(L, Int64(i))
    case .double(let d): lua_pushnumber(L, d)
    case .string(let s): luaPush(L, s)
    case .array(let a):
        lua_createtable(L, Int32(clamping: a.count), 0)
        for (i, v) in a.enumerated() {
            if !luaPush(L, json: v, depth: depth + 1) {
                lua_settop(L, -2)
                return false
            }
            lua_rawseti(L, -2, Int64(i + 1))
        }
    case .object(let o):
        lua_createtable(L, 0, Int32(clamping: o.count))
        for (k, v) in o {
            luaPush(L, k)
            if !luaPush(L, json: v, depth: depth + 1) {
                lua_settop(L, -3)
                return false
            }
            lua_rawset(L, -3)
        }
    }
    return true
}

/// Converts the value at `idx` to JSON. Tables become arrays when their keys
/// are exactly 1...n (n > 0), objects when all keys are strings; anything
/// else (functions, mixed keys, cycles, NaN) is an error.
func luaToJSON(_ L: LuaRef, _ idx: Int32, depth: Int = 0, path: String = "value") throws -> JSONValue {
    var budget = LuaConversionBudget()
    return try luaToJSON(L, idx, depth: depth, path: path, budget: &budget)
}

/// The most any one value crossing from Lua to the host may hold. Tables that share subtables are
/// expanded into trees, so a small Lua value can describe an enormous one; the budget stops that early.
struct LuaConversionBudget {
    static let maxNodes = 200_000
    static let maxBytes = 16 << 20
    var nodes = 0
    var bytes = 0

    mutating func spend(nodes: Int = 1, bytes: Int = 0, at path: String) throws {
        self.nodes += nodes
        self.bytes += bytes
        if self.nodes > Self.maxNodes {
            throw LuaConversionError("\(path): value has more than \(Self.maxNodes) elements")
        }
        if self.bytes > Self.maxBytes {
            throw LuaConversionError("\(path): value holds more than \(Self.maxBytes >> 20) MiB of text")
        }
    }
}

private func luaToJSON(_ L: LuaRef, _ idx: Int32, depth: Int, path: String, budget: inout LuaConversionBudget) throws -> JSONValue {
    let idx = lua_absindex(L, idx)
    try budget.spend(at: path)
    switch lua_type(L, idx) {
    case LUA_TNIL, LUA_TNONE: return .null
    case LUA_TBOOLEAN: return .bool(lua_toboolean(L, idx) != 0)
    case LUA_TNUMBER:
        if lua_isinteger(L, idx) != 0 { return .int(Int(lua_tointegerx(L, idx, nil))) }
        let d = lua_tonumberx(L, idx, nil)
        guard d.isFinite else { throw LuaConversionError("\(path): number is not finite") }
        return .double(d)
    case LUA_TSTRING:
        var length = 0
        _ = lua_tolstring(L, idx, &length)
        try budget.spend(nodes: 0, bytes: length, at: path)
        return .string(luaString(L, idx) ?? "")
    case LUA_TTABLE:
        guard depth < 32 else { throw LuaConversionError("\(path): table nested too deeply (or cyclic)") }
        guard lua_checkstack(L, 4) != 0 else { throw LuaConversionError("\(path): stack overflow") }
        var intKeys: [Int: JSONValue] = [:]
        var strKeys: [String: JSONValue] = [:]
        lua_pushnil(L)
        while lua_next(L, idx) != 0 {
            // key at -2, value at -1
            switch lua_type(L, -2) {
            case LUA_TSTRING:
                let k = luaString(L, -2) ?? ""
                do {
                    try budget.spend(nodes: 0, bytes: k.utf8.count, at: path)
                    strKeys[k] = try luaToJSON(L, -1, depth: depth + 1, path: path + "." + k, budget: &budget)
                } catch {
                    lua_settop(L, -3)
                    throw error
                }
            case LUA_TNUMBER where lua_isinteger(L, -2) != 0:
                let k = Int(lua_tointegerx(L, -2, nil))
                do { intKeys[k] = try luaToJSON(L, -1, depth: depth + 1, path: path + "[\(k)]", budget: &budget) } catch {
                    lua_settop(L, -3)
                    throw error
                }
            default:
                let t = luaTypeName(L, -2)
                lua_settop(L, -3)
                throw LuaConversionError("\(path): keys must be strings or array indices, got \(t)")
            }
            lua_settop(L, -2)
        }
        if intKeys.isEmpty { return .object(strKeys) }
        guard strKeys.isEmpty else { throw LuaConversionError("\(path): table mixes array and string keys") }
        let n = intKeys.count
        var arr: [JSONValue] = []
        arr.reserveCapacity(n)
        for i in 1...n {
            guard let v = intKeys[i] else { throw LuaConversionError("\(path): array has holes") }
            arr.append(v)
        }
        return .array(arr)
    default:
        throw LuaConversionError("\(path): cannot store a \(luaTypeName(L, idx))")
    }
}

// MARK: messages

/// Pushes a message as plugins see it. `file` is what the host found about its file: a stored file's
/// record adds `mime`, `sha256` and `stored = true` to `msg.file` (the message's own fields stay as it
/// carries them: the server filled them in already); otherwise `stored = false`, with `error` when the
/// lookup failed.
func luaPush(_ L: LuaRef, message m: HookMessage, typeName: String?, file lookup: FileLookup? = nil) {
    // The values go on the stack in hb_push_message's order, which builds the table (lua_sandbox.c).
    _ = lua_checkstack(L, 12)
    var present: Int32 = 0
    luaPush(L, m.id)
    luaPush(L, m.cid)
    luaPush(L, m.from)
    if let typeName {
        luaPush(L, typeName)
        present |= Int32(HB_MSG_TYPE_NAME)
    }
    if let t = m.text {
        luaPush(L, t)
        present |= Int32(HB_MSG_TEXT)
    }
    if !m.attrs.isEmpty {
        if !luaPush(L, json: .object(m.attrs)) { lua_createtable(L, 0, 0) }
        present |= Int32(HB_MSG_ATTRS)
    }
    if let f = m.file {
        if !luaPush(L, json: .object(f.hookFields)) { lua_createtable(L, 0, 0) }
        if let record = lookup?.record {
            luaSetField(L, "mime", record.metadata.mime)
            luaSetField(L, "sha256", record.metadata.sha256)
            lua_pushboolean(L, 1)
        } else {
            if let error = lookup?.error { luaSetField(L, "error", error) }
            lua_pushboolean(L, 0)
        }
        luaSetFieldTop(L, "stored")
        present |= Int32(HB_MSG_FILE)
    }
    if let loc = m.location {
        lua_createtable(L, 0, 2)
        lua_pushnumber(L, loc.latitude)
        luaSetFieldTop(L, "latitude")
        lua_pushnumber(L, loc.longitude)
        luaSetFieldTop(L, "longitude")
        present |= Int32(HB_MSG_LOCATION)
    }
    if let v = m.binary {
        luaPush(L, v)
        present |= Int32(HB_MSG_BINARY)
    }
    hb_push_message(L, present, Int64(m.type), m.timestamp, m.transient ? 1 : 0)
}

/// The field `key` of the table at `t` as JSON (raw access, popped again), nil when absent; errors name
/// `message.<name>`.
private func fieldJSON(_ L: LuaRef, _ t: Int32, _ key: StaticString, _ name: String) throws -> JSONValue? {
    defer { lua_settop(L, -2) }
    if luaRawField(L, t, key) == LUA_TNIL { return nil }
    return try luaToJSON(L, -1, path: "message.\(name)")
}

/// nil when the field is absent (keep the base value).
private func fieldString(_ L: LuaRef, _ t: Int32, _ key: StaticString, _ name: String) throws -> String? {
    defer { lua_settop(L, -2) }
    switch luaRawField(L, t, key) {
    case LUA_TNIL: return nil
    case LUA_TSTRING: return luaString(L, -1)
    case LUA_TNUMBER:
        return lua_isinteger(L, -1) != 0 ? String(lua_tointegerx(L, -1, nil)) : String(lua_tonumberx(L, -1, nil))
    default: throw LuaConversionError("message.\(name) must be a string, got \(luaTypeName(L, -1))")
    }
}

/// Reads a message table (raw access). Missing fields are taken from `base`.
func luaToMessage(_ L: LuaRef, _ idx: Int32, base: HookMessage) throws -> HookMessage {
    let t = lua_absindex(L, idx)
    guard lua_type(L, t) == LUA_TTABLE else {
        throw LuaConversionError("message must be a table or string, got \(luaTypeName(L, t))")
    }
    var m = base
    if let v = try fieldString(L, t, "id", "id") { m.id = v }
    if let v = try fieldString(L, t, "cid", "cid") { m.cid = v }
    if let v = try fieldString(L, t, "from", "from") { m.from = v }
    if let v = try fieldString(L, t, "text", "text") { m.text = v }

    if luaRawField(L, t, "type") != LUA_TNIL {
        guard
            lua_isinteger(L, -1) != 0
                || (lua_type(L, -1) == LUA_TNUMBER && lua_tonumberx(L, -1, nil).rounded() == lua_tonumberx(L, -1, nil))
        else {
            lua_settop(L, -2)
            throw LuaConversionError("message.type must be an integer")
        }
        let d = lua_tonumberx(L, -1, nil)
        guard abs(d) < 1e9 else {
            lua_settop(L, -2)
            throw LuaConversionError("message.type out of range")
        }
        m.type = Int(d)
    }
    lua_settop(L, -2)

    if let v = try fieldJSON(L, t, "attrs", "attrs") {
        switch v {
        case .object(let o): m.attrs = o
        case .array(let a) where a.isEmpty: m.attrs = [:]
        default: throw LuaConversionError("message.attrs must be a table with string keys")
        }
    }
    if let v = try fieldJSON(L, t, "file", "file") {
        guard case .object(let o) = v else { throw LuaConversionError("message.file must be a table") }
        // `mime`, `sha256`, `stored` and `error` are the host's, not the message's: they are not read back.
        m.file = FileInfo(
            url: o["url"]?.stringValue ?? "", objId: o["id"]?.stringValue, name: o["name"]?.stringValue,
            format: o["format"]?.stringValue, size: o["size"]?.intValue.map(Int64.init), width: o["width"]?.intValue,
            height: o["height"]?.intValue, duration: o["duration"]?.doubleValue)
    }
    if let v = try fieldJSON(L, t, "location", "location") {
        guard let lat = v["latitude"]?.doubleValue, let lon = v["longitude"]?.doubleValue else {
            throw LuaConversionError("message.location needs numeric latitude and longitude")
        }
        m.location = Location(latitude: lat, longitude: lon)
    }

    if luaRawField(L, t, "timestamp") != LUA_TNIL {
        if lua_isinteger(L, -1) != 0 {
            m.timestamp = lua_tointegerx(L, -1, nil)
        } else {
            // A float from Lua may be NaN, infinite or beyond Int64: refuse it instead of trapping.
            let d = lua_tonumberx(L, -1, nil)
            guard lua_type(L, -1) == LUA_TNUMBER, d.isFinite, abs(d) < 9.2e18 else {
                lua_settop(L, -2)
                throw LuaConversionError("message.timestamp must be a number of milliseconds")
            }
            m.timestamp = Int64(d)
        }
    }
    lua_settop(L, -2)

    if luaRawField(L, t, "transient") != LUA_TNIL {
        m.transient = lua_toboolean(L, -1) != 0
    }
    lua_settop(L, -2)
    return m
}
