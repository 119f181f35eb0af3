import CLua
import Foundation
import IMCore
import LuaSandbox

// `ctx.matcher{…}` and `ctx.text` (docs/PLUGINS.md, "Matching text"). A matcher is a full userdata holding a
// retained `TextMatcher`; its metatable (kept in the registry, hidden from plugins by `__metatable`) has the
// methods and a `__gc` that releases it, so a matcher lives as long as the plugin version references it and
// `lua_close` frees every one on reload or unload. Its compiled size is added to the state's memory count.

private let matcherMetatable = "hookbot.matcher"

/// The strings of the list at `idx` (a Lua sequence, or nil for none).
private func stringList(_ value: JSONValue?, _ what: String) throws(TextMatcherError) -> [String] {
    switch value {
    case nil, .null?: return []
    case .array(let a)?:
        var out: [String] = []
        for (i, v) in a.enumerated() {
            guard let s = v.stringValue else { throw TextMatcherError("\(what)[\(i + 1)] must be a string") }
            out.append(s)
        }
        return out
    case .object(let o)? where o.isEmpty: return []
    case .string(let s)?: return [s]
    default: throw TextMatcherError("\(what) must be a list of strings")
    }
}

/// Pushes the matcher metatable (creating it once per state).
private func pushMatcherMetatable(_ L: LuaRef) {
    if lua_getfield(L, hb_lua_registryindex(), matcherMetatable) == LUA_TTABLE { return }
    lua_settop(L, -2)
    lua_createtable(L, 0, 5)
    lua_createtable(L, 0, 2)
    hb_push_swift_function(L, cbMatcherFind)
    lua_setfield(L, -2, "find")
    hb_push_swift_function(L, cbMatcherFindAll)
    lua_setfield(L, -2, "find_all")
    lua_setfield(L, -2, "__index")
    hb_push_swift_function(L, cbMatcherCollect)
    lua_setfield(L, -2, "__gc")
    lua_pushboolean(L, 0)
    lua_setfield(L, -2, "__metatable")
    luaPush(L, matcherMetatable)
    lua_setfield(L, -2, "__name")
    lua_pushvalue(L, -1)
    lua_setfield(L, hb_lua_registryindex(), matcherMetatable)
}

/// The slot of the matcher userdata at `idx`, or nil when the value is not one.
private func matcherSlot(_ L: LuaRef, _ idx: Int32) -> UnsafeMutablePointer<UnsafeMutableRawPointer?>? {
    guard lua_type(L, idx) == LUA_TUSERDATA, let raw = lua_touserdata(L, idx), lua_getmetatable(L, idx) != 0 else { return nil }
    _ = lua_getfield(L, hb_lua_registryindex(), matcherMetatable)
    let same = lua_rawequal(L, -1, -2) != 0
    lua_settop(L, -3)
    return same ? raw.assumingMemoryBound(to: UnsafeMutableRawPointer?.self) : nil
}

let cbMatcherNew: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    guard lua_type(L, 1) == LUA_TTABLE else {
        return fail(L, "ctx.matcher: expects a table {keywords = {...}, regex = {...}, allow = {...}, presets = {...}}")
    }
    let matcher: TextMatcher
    do throws(TextMatcherError) {
        let json: JSONValue
        do { json = try luaToJSON(L, 1, path: "matcher") } catch { throw TextMatcherError("\(error)") }
        var spec = TextMatcher.Spec()
        let fields = json.objectValue ?? [:]
        for key in fields.keys where !["keywords", "regex", "allow", "presets"].contains(key) {
            throw TextMatcherError("unknown field '\(key)' (keywords, regex, allow, presets)")
        }
        spec.keywords = try stringList(fields["keywords"], "keywords")
        spec.regex = try stringList(fields["regex"], "regex")
        spec.allow = try stringList(fields["allow"], "allow")
        spec.presets = try stringList(fields["presets"], "presets")
        matcher = try TextMatcher(spec, presetDirectory: plugin.env.directory, limits: plugin.env.limits.matcher)
    } catch {
        return fail(L, "ctx.matcher: \(error)")
    }
    let limits = plugin.limits
    if limits.pointee.mem_cap > 0, limits.pointee.mem_used + matcher.bytes > limits.pointee.mem_cap {
        return fail(
            L,
            "ctx.matcher: the compiled matcher needs \(matcher.bytes / 1024) KiB, which with the plugin's other memory "
                + "(\(limits.pointee.mem_used / 1024) KiB) is over its cap of \(limits.pointee.mem_cap / 1024) KiB")
    }
    guard let raw = lua_newuserdatauv(L, MemoryLayout<UnsafeMutableRawPointer?>.size, 0) else {
        return fail(L, "ctx.matcher: out of memory")
    }
    raw.assumingMemoryBound(to: UnsafeMutableRawPointer?.self).pointee = Unmanaged.passRetained(matcher).toOpaque()
    limits.pointee.mem_used += matcher.bytes
    liveTextMatchers.add(1, ordering: .relaxed)
    pushMatcherMetatable(L)
    lua_setmetatable(L, -2)
    return 1
}

let cbMatcherCollect: hb_swift_fn = { L in
    guard let L, let slot = matcherSlot(L, 1), let p = slot.pointee else { return 0 }
    slot.pointee = nil
    let matcher = Unmanaged<TextMatcher>.fromOpaque(p).takeRetainedValue()
    if let lim = hb_limits_of(L) {
        lim.pointee.mem_used -= min(lim.pointee.mem_used, matcher.bytes)
    }
    liveTextMatchers.subtract(1, ordering: .relaxed)
    return 0
}

private func runFind(_ L: LuaRef, all: Bool) -> Int32 {
    let name = all ? "find_all" : "find"
    guard let slot = matcherSlot(L, 1) else { return fail(L, "matcher:\(name): call it as m:\(name)(text) on a matcher") }
    guard let p = slot.pointee else { return fail(L, "matcher:\(name): the matcher has been freed") }
    let matcher = Unmanaged<TextMatcher>.fromOpaque(p).takeUnretainedValue()
    guard lua_type(L, 2) == LUA_TSTRING else {
        return fail(L, "matcher:\(name): text (a string) expected, got \(luaTypeName(L, 2))")
    }
    var limit = 1
    if all {
        limit = matcher.limits.maxFindAll
        if lua_type(L, 3) > LUA_TNIL {
            guard lua_type(L, 3) == LUA_TNUMBER, lua_isinteger(L, 3) != 0, lua_tointegerx(L, 3, nil) >= 1 else {
                return fail(L, "matcher:find_all: the count must be a positive integer")
            }
            limit = Int(min(lua_tointegerx(L, 3, nil), Int64(matcher.limits.maxFindAll)))
        }
    }
    var length = 0
    guard let chars = lua_tolstring(L, 2, &length) else { return fail(L, "matcher:\(name): text expected") }
    guard length <= matcher.limits.maxTextBytes else {
        return fail(L, "matcher:\(name): text of \(length) bytes is over the limit of \(matcher.limits.maxTextBytes)")
    }
    let text = UnsafeBufferPointer(start: UnsafeRawPointer(chars).assumingMemoryBound(to: UInt8.self), count: length)
    let outcome = matcher.hits(in: text, limit: limit)
    if let plugin = pluginOf(L) {
        for (index, message) in outcome.problems where matcher.reportedLimits.insert(index).inserted {
            plugin.env.logger.warning("\(message)", metadata: ["plugin": "\(plugin.name)"])
        }
    }
    func pushHit(_ h: MatcherHit) {
        lua_createtable(L, 0, 6)
        luaSetField(L, "kind", h.kind.rawValue)
        luaSetField(L, "term", h.term)
        if let preset = h.preset { luaSetField(L, "preset", preset) }
        _ = lua_pushlstring(L, chars + h.from, h.to - h.from)
        luaSetFieldTop(L, "match")
        luaSetField(L, "from", int: Int64(h.from + 1))
        luaSetField(L, "to", int: Int64(h.to))
    }
    if all {
        lua_createtable(L, Int32(outcome.hits.count), 0)
        for (i, h) in outcome.hits.enumerated() {
            pushHit(h)
            lua_rawseti(L, -2, Int64(i + 1))
        }
    } else if let h = outcome.hits.first {
        pushHit(h)
    } else {
        lua_pushnil(L)
    }
    guard let problem = outcome.problems.first else { return 1 }
    luaPush(L, problem.message)
    return 2
}

let cbMatcherFind: hb_swift_fn = { L in
    guard let L else { return 0 }
    return runFind(L, all: false)
}

let cbMatcherFindAll: hb_swift_fn = { L in
    guard let L else { return 0 }
    return runFind(L, all: true)
}

// MARK: ctx.text

private func textArgument(_ L: LuaRef, _ what: String, _ body: (String) -> Int32) -> Int32 {
    guard let plugin = pluginOf(L) else { return 0 }
    guard lua_type(L, 1) == LUA_TSTRING, let s = luaString(L, 1) else {
        return fail(L, "ctx.text.\(what): text (a string) expected, got \(luaTypeName(L, 1))")
    }
    let cap = plugin.env.limits.matcher.maxTextBytes
    guard s.utf8.count <= cap else { return fail(L, "ctx.text.\(what): text of \(s.utf8.count) bytes is over the limit of \(cap)") }
    return body(s)
}

let cbTextNormalise: hb_swift_fn = { L in
    guard let L else { return 0 }
    return textArgument(L, "normalise") { s in
        luaPush(L, TextNormaliser.normalise(s))
        return 1
    }
}

let cbTextURLs: hb_swift_fn = { L in
    guard let L else { return 0 }
    return textArgument(L, "urls") { s in
        let found = TextScan.urls(s)
        lua_createtable(L, Int32(clamping: found.count), 0)
        for (i, u) in found.enumerated() {
            lua_createtable(L, 0, 2)
            luaSetField(L, "url", u.url)
            luaSetField(L, "host", u.host)
            lua_rawseti(L, -2, Int64(i + 1))
        }
        return 1
    }
}

let cbTextStats: hb_swift_fn = { L in
    guard let L else { return 0 }
    return textArgument(L, "stats") { s in
        let st = TextScan.stats(s)
        lua_createtable(L, 0, 5)
        luaSetField(L, "length", int: Int64(st.length))
        lua_pushnumber(L, st.caps)
        luaSetFieldTop(L, "caps")
        luaSetField(L, "emoji", int: Int64(st.emoji))
        luaSetField(L, "zalgo", int: Int64(st.zalgo))
        luaSetField(L, "mentions", int: Int64(st.mentions))
        return 1
    }
}
