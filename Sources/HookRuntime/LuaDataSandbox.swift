import CLua
import Foundation
import IMCore

/// Evaluates Lua files that return data (`hookbot test`'s scenario files) in a small sandbox (base,
/// string, table, math, utf8; no io, os, package or debug) and turns the returned table into data, so
/// that nothing above HookRuntime touches the Lua C API. The state stays open so that callers can match
/// Lua patterns with it.
public final class LuaDataSandbox {
    private let L: OpaquePointer
    private var matchRef: Int32 = 0

    /// - Parameter globals: string globals the files may use (such as a sentinel value).
    public init(globals: [String: String] = [:]) throws {
        guard let L = luaL_newstate() else { throw LuaDataError("cannot create a Lua state") }
        self.L = L
        luaL_openlibs(L)
        let prelude = """
            io, os, package, debug, dofile, loadfile, require = nil, nil, nil, nil, nil, nil, nil
            string.dump = nil
            return function(s, p) return string.find(s, p) ~= nil end
            """
        guard hb_luaL_dostring(L, prelude) == 0 else { throw LuaDataError("cannot prepare the Lua data sandbox") }
        matchRef = luaL_ref(L, hb_lua_registryindex())
        for (name, value) in globals {
            push(value)
            lua_setglobal(L, name)
        }
    }

    deinit { lua_close(L) }

    /// Runs the file and returns its result as data: tables with keys 1...n become arrays (an empty table
    /// is an empty array), tables with string keys objects.
    /// Errors name the parts of the value by `name` (`scenario.cases[2]: list has holes`).
    public func evaluate(file path: String, as name: String = "result") throws -> JSONValue {
        guard let data = FileManager.default.contents(atPath: path) else { throw LuaDataError("cannot read \(path)") }
        let chunk = "@" + URL(fileURLWithPath: path).lastPathComponent
        let status = data.withUnsafeBytes { buf in
            hb_luaL_loadbuffer(L, buf.baseAddress?.assumingMemoryBound(to: CChar.self), buf.count, chunk, "t")
        }
        guard status == 0, hb_lua_pcall(L, 0, 1, 0) == 0 else {
            let message = string(at: -1) ?? "error"
            lua_settop(L, 0)
            throw LuaDataError(message)
        }
        defer { lua_settop(L, 0) }
        return try value(at: lua_gettop(L), path: name, depth: 0)
    }

    /// `string.find(subject, pattern) ~= nil`; an invalid pattern is reported as an error.
    public func matches(_ subject: String, pattern: String) throws -> Bool {
        _ = lua_rawgeti(L, hb_lua_registryindex(), lua_Integer(matchRef))
        push(subject)
        push(pattern)
        defer { lua_settop(L, 0) }
        guard hb_lua_pcall(L, 2, 1, 0) == 0 else { throw LuaDataError("bad pattern '\(pattern)': \(string(at: -1) ?? "")") }
        return lua_toboolean(L, -1) != 0
    }

    private func push(_ s: String) {
        var s = s
        s.withUTF8 { buf in _ = lua_pushlstring(L, buf.baseAddress, buf.count) }
    }

    private func string(at idx: Int32) -> String? {
        var len = 0
        guard lua_type(L, idx) == LUA_TSTRING, let p = lua_tolstring(L, idx, &len) else { return nil }
        return p.withMemoryRebound(to: UInt8.self, capacity: len) {
            String(decoding: UnsafeBufferPointer(start: $0, count: len), as: UTF8.self)
        }
    }

    /// Tables with keys 1...n become arrays (an empty table is an empty array), tables with string keys objects.
    private func value(at index: Int32, path: String, depth: Int) throws -> JSONValue {
        let idx = lua_absindex(L, index)
        switch lua_type(L, idx) {
        case LUA_TNIL, LUA_TNONE: return .null
        case LUA_TBOOLEAN: return .bool(lua_toboolean(L, idx) != 0)
        case LUA_TNUMBER:
            if lua_isinteger(L, idx) != 0 { return .int(Int(lua_tointegerx(L, idx, nil))) }
            return .double(lua_tonumberx(L, idx, nil))
        case LUA_TSTRING: return .string(string(at: idx) ?? "")
        case LUA_TTABLE:
            guard depth < 40, lua_checkstack(L, 4) != 0 else { throw LuaDataError("\(path): nested too deeply") }
            var ints: [Int: JSONValue] = [:]
            var strings: [String: JSONValue] = [:]
            lua_pushnil(L)
            while lua_next(L, idx) != 0 {
                defer { lua_settop(L, -2) }
                if lua_type(L, -2) == LUA_TSTRING {
                    let key = string(at: -2) ?? ""
                    strings[key] = try value(at: -1, path: "\(path).\(key)", depth: depth + 1)
                } else if lua_type(L, -2) == LUA_TNUMBER, lua_isinteger(L, -2) != 0 {
                    let key = Int(lua_tointegerx(L, -2, nil))
                    ints[key] = try value(at: -1, path: "\(path)[\(key)]", depth: depth + 1)
                } else {
                    throw LuaDataError("\(path): keys must be strings or list indices")
                }
            }
            if ints.isEmpty && !strings.isEmpty { return .object(strings) }
            guard strings.isEmpty else { throw LuaDataError("\(path): table mixes list items and named fields") }
            return .array(
                try (0..<ints.count).map { i in
                    guard let v = ints[i + 1] else { throw LuaDataError("\(path): list has holes") }
                    return v
                })
        default:
            throw LuaDataError("\(path): a \(String(cString: lua_typename(L, lua_type(L, idx)))) is not data")
        }
    }
}

/// A Lua data file that cannot be evaluated or turned into data, or a bad pattern.
public struct LuaDataError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
