import CLua
import Foundation
import IMCore
import Logging
import LuaSandbox

// Swift functions called from Lua through the C trampoline (shim.h).
// Rules: never call lua_error; on failure push a message and return -1 (the
// trampoline raises it once this frame is gone). Only raw table access. No
// Lua allocation inside a database closure.

@inline(__always) func pluginOf(_ L: LuaRef) -> LuaPlugin? {
    guard let lim = hb_limits_of(L), let owner = lim.pointee.owner else { return nil }
    return Unmanaged<LuaPlugin>.fromOpaque(owner).takeUnretainedValue()
}

/// "source:line: " of the innermost plugin frame (skipping C and prelude frames).
func luaWhere(_ L: LuaRef) -> String {
    var level: Int32 = 1
    while level < 30 {
        var ar = lua_Debug()
        if lua_getstack(L, level, &ar) == 0 { break }
        if lua_getinfo(L, "Sl", &ar) != 0, ar.currentline > 0 {
            let src = ar.source.map { String(cString: $0) } ?? ""
            if src != "=(hookbot)" {
                let short = withUnsafeBytes(of: &ar.short_src) { raw -> String in
                    let b = raw.bindMemory(to: UInt8.self)
                    let n = b.firstIndex(of: 0) ?? b.count
                    return String(decoding: b[0..<n], as: UTF8.self)
                }
                return "\(short):\(ar.currentline): "
            }
        }
        level += 1
    }
    return ""
}

/// Fails a callback: pushes the message with the plugin's file and line, for the trampoline to raise.
@inline(__always) func fail(_ L: LuaRef, _ msg: String) -> Int32 {
    luaPush(L, luaWhere(L) + msg)
    return -1
}

func argString(_ L: LuaRef, _ i: Int32) -> String? {
    switch lua_type(L, i) {
    case LUA_TSTRING: return luaString(L, i)
    case LUA_TNUMBER:
        return lua_isinteger(L, i) != 0 ? String(lua_tointegerx(L, i, nil)) : String(lua_tonumberx(L, i, nil))
    default: return nil
    }
}

func argNumber(_ L: LuaRef, _ i: Int32) -> Double? {
    lua_type(L, i) == LUA_TNUMBER ? lua_tonumberx(L, i, nil) : nil
}

let cbLog: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    guard let lv = argString(L, 1), let level = HookLogLevel(rawValue: lv) else {
        return fail(
            L, "ctx.log: unknown level '\(argString(L, 1) ?? luaTypeName(L, 1))' (use trace, debug, info, notice, warning, error, critical)"
        )
    }
    let text = StoredText.cut(argString(L, 2) ?? "", to: StoredText.maxLogEntryBytes)
    plugin.env.logger.log(level: level.swiftLog, "\(text)", metadata: ["plugin": "\(plugin.name)"])
    if plugin.pending.count < maxActionsPerCall {
        plugin.pending.append(HookAction(plugin: plugin.name, kind: .log(level: level, message: text)))
    }
    return 0
}

let cbWhere: hb_swift_fn = { L in
    guard let L else { return 0 }
    luaPush(L, luaWhere(L))
    return 1
}

let cbNow: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    lua_pushnumber(L, plugin.env.clock.now())
    return 1
}

func isValidModuleName(_ n: String) -> Bool {
    guard !n.isEmpty, n.utf8.count <= 128 else { return false }
    for part in n.split(separator: ".", omittingEmptySubsequences: false) {
        guard let f = part.utf8.first, !(f >= 0x30 && f <= 0x39) else { return false }
        for c in part.utf8 {
            let ok = (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x5F
            if !ok { return false }
        }
    }
    return true
}

let cbRequireSource: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    guard let name = luaString(L, 1), isValidModuleName(name) else {
        return fail(
            L,
            "require: invalid module name '\(argString(L, 1) ?? "?")' (modules are <plugins>/lib/<name>.lua; letters, digits, _ and . only)"
        )
    }
    let rel = "lib/" + name.replacingOccurrences(of: ".", with: "/") + ".lua"
    let url = plugin.env.directory.appendingPathComponent(rel)
    guard let data = FileManager.default.contents(atPath: url.path) else {
        return fail(L, "require: module '\(name)' not found (looked for \(rel))")
    }
    data.withUnsafeBytes { raw in
        _ = lua_pushlstring(L, raw.baseAddress?.assumingMemoryBound(to: CChar.self), raw.count)
    }
    luaPush(L, "@" + rel)
    return 2
}

// MARK: timers

let cbTimerAdd: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    let repeating = lua_toboolean(L, 2) != 0
    let what = repeating ? "ctx.every" : "ctx.after"
    guard let s = argNumber(L, 1), s.isFinite, s >= 0, s < 1e9, !(repeating && s < 0.001) else {
        return fail(L, "\(what): seconds must be a number \(repeating ? ">= 0.001" : ">= 0")")
    }
    guard plugin.timers.count < maxTimersPerPlugin else { return fail(L, "\(what): too many timers (\(maxTimersPerPlugin))") }
    let id = plugin.nextTimerID
    plugin.nextTimerID += 1
    plugin.timers[id] = PluginTimer(id: id, due: plugin.env.clock.now() + s, interval: repeating ? s : nil)
    lua_pushinteger(L, Int64(id))
    return 1
}

let cbTimerCancel: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    guard lua_type(L, 1) == LUA_TNUMBER else {
        lua_pushboolean(L, 0)
        return 1
    }
    let id = Int(lua_tointegerx(L, 1, nil))
    lua_pushboolean(L, plugin.timers.removeValue(forKey: id) != nil ? 1 : 0)
    return 1
}

// MARK: commands and roles

let cbCommandAdd: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    let spec: JSONValue
    do { spec = try luaToJSON(L, 1, path: "command") } catch { return fail(L, "ctx.commands.add: \(error)") }
    guard let name = spec["name"]?.stringValue, !name.isEmpty, name.count <= 32,
        name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" })
    else {
        return fail(L, "ctx.commands.add: name must be 1–32 letters, digits, _ or -")
    }
    let signature = spec["args"]?.stringValue ?? ""
    let arguments: [ChatCommand.Argument]
    do { arguments = try ChatCommand.arguments(signature) } catch { return fail(L, "ctx.commands.add: \(error)") }
    var roles: [String] = []
    switch spec["roles"] {
    case nil: break
    case .string(let role)?: roles = [role]
    case .array(let list)?:
        for role in list {
            guard let text = role.stringValue else { return fail(L, "ctx.commands.add: roles must be strings") }
            roles.append(text)
        }
    default: return fail(L, "ctx.commands.add: roles must be a role or a list of roles")
    }
    let cooldown = spec["cooldown"]?.doubleValue ?? 0
    guard cooldown.isFinite, cooldown >= 0, cooldown < 1e7 else { return fail(L, "ctx.commands.add: cooldown must be seconds >= 0") }
    let command = ChatCommand(
        name: name, arguments: arguments, signature: signature, roles: roles, cooldown: cooldown,
        description: spec["description"]?.stringValue, plugin: plugin.name)
    if let problem = plugin.env.commands.register(command, owner: plugin.instanceID) { return fail(L, "ctx.commands.add: \(problem)") }
    luaPush(L, name)
    return 1
}

/// `ctx.http.request(opts)`: checks the call against the plugin's policy and starts it; the call's id, or
/// nil and why it was refused (a value the plugin sees, not an error).
let cbHTTPStart: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    func refuse(_ reason: String) -> Int32 {
        plugin.usage?.httpRefused()
        lua_pushnil(L)
        luaPush(L, "ctx.http: \(reason)")
        return 2
    }
    guard let options = try? luaToJSON(L, 1, path: "request") else { return refuse("expects a table {url = ..., method = ...}") }
    plugin.env.nextHTTPID += 1
    switch (plugin.env.httpPolicies[plugin.name] ?? HTTPPolicy()).check(
        options, plugin: plugin.name, id: plugin.env.nextHTTPID,
        inFlight: plugin.usage?.http.inFlight ?? 0)
    {
    case .failure(let problem): return refuse(problem.description)
    case .success(var call):
        guard let start = plugin.env.startHTTP else { return refuse("this host makes no HTTP calls") }
        call.instanceID = plugin.instanceID
        call.cid = plugin.currentCid
        call.messageID = plugin.currentMessageID
        plugin.usage?.httpStarted()
        start(call)
        lua_pushinteger(L, Int64(call.id))
        return 1
    }
}

/// Host state where granted roles live ("role:<role>:<user>" of the host's own plugin name).
let hostStatePlugin = "hookbot.host"

func hasRole(_ env: PluginEnvironment, user: String, role: String, cid: String? = nil) -> Bool {
    if user == ChatCommandSettings.consoleID { return true }
    if env.commandSettings.roles[role]?.contains(user) == true { return true }
    // `owner` and `manager`: the user's role in the conversation the command is used in (mirrored by the host).
    if let cid, role == "owner" || role == "manager",
        let held = (try? env.store.get(plugin: hostStatePlugin, key: ConversationRoles.key(cid, user), now: env.clock.now()))??.stringValue
    {
        if held == "Owner" || (role == "manager" && held == "Manager") { return true }
    }
    return (try? env.store.get(plugin: hostStatePlugin, key: "role:\(role):\(user)", now: env.clock.now())) != nil
}

let cbRoles: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    guard let op = argString(L, 1), let user = argString(L, 2), !user.isEmpty, let role = argString(L, 3), !role.isEmpty else {
        return fail(L, "ctx.roles: expects (user, role)")
    }
    let key = "role:\(role):\(user)"
    do {
        switch op {
        case "has": lua_pushboolean(L, hasRole(plugin.env, user: user, role: role) ? 1 : 0)
        case "grant":
            try plugin.env.store.set(plugin: hostStatePlugin, key: key, value: .bool(true), now: plugin.env.clock.now())
            lua_pushboolean(L, 1)
        default:
            try plugin.env.store.delete(plugin: hostStatePlugin, key: key)
            lua_pushboolean(L, 1)
        }
    } catch {
        return fail(L, "ctx.roles.\(op): \(error)")
    }
    return 1
}

/// `hb.muted(cid)`: `{ {user = …, ["until"] = seconds since 1970}, … }` of the members muted in `cid` as the
/// host knows them (its own mutes and those the server announced to it), sorted by user.
let cbMuted: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    guard let cid = lua_type(L, 1) <= LUA_TNIL ? plugin.currentCid : argString(L, 1) else {
        return fail(L, "ctx.conv(cid).muted: conversation id expected")
    }
    let now = plugin.env.clock.now()
    let prefix = HostMutes.prefix(cid)
    var mutes: [(String, Double)] = []
    do {
        for key in try plugin.env.store.keys(plugin: hostStatePlugin, prefix: prefix, now: now) {
            if let end = try plugin.env.store.get(plugin: hostStatePlugin, key: key, now: now)?.doubleValue, end > now {
                mutes.append((String(key.dropFirst(prefix.count)), end))
            }
        }
    } catch {
        return fail(L, "ctx.conv(cid).muted: \(error)")
    }
    lua_createtable(L, Int32(clamping: mutes.count), 0)
    for (index, (user, end)) in mutes.sorted(by: { $0.0 < $1.0 }).enumerated() {
        lua_createtable(L, 0, 2)
        luaPush(L, user)
        lua_setfield(L, -2, "user")
        lua_pushnumber(L, end)
        lua_setfield(L, -2, "until")
        lua_rawseti(L, -2, Int64(index + 1))
    }
    return 1
}

/// `hb.conv_member(cid, uid)`: `{joined_at, role, messages, founder}` of a member of `cid` as the host knows
/// it (`ConversationMembers`), nil when it does not know `uid` as a member.
let cbConvMember: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    guard let cid = lua_type(L, 1) <= LUA_TNIL ? plugin.currentCid : argString(L, 1) else {
        return fail(L, "ctx.conv(cid).member: conversation id expected")
    }
    guard let user = argString(L, 2) else { return fail(L, "ctx.conv(cid).member: user id (a string) expected") }
    guard let member = plugin.env.members.member(user, of: cid) else {
        lua_pushnil(L)
        return 1
    }
    lua_createtable(L, 0, 4)
    lua_pushnumber(L, member.joinedAt)
    lua_setfield(L, -2, "joined_at")
    luaPush(L, member.role)
    lua_setfield(L, -2, "role")
    lua_pushinteger(L, Int64(member.messages))
    lua_setfield(L, -2, "messages")
    if member.founder {
        lua_pushboolean(L, 1)
        lua_setfield(L, -2, "founder")
    }
    return 1
}

/// `hb.dm_conversation(uid)`: the bot's 1:1 conversation with `uid` as the host knows it (opened by
/// `ctx.dm`, or listed when the host started), nil otherwise.
let cbDMConversation: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    guard let user = argString(L, 1) else { return fail(L, "ctx.dm_conversation: user id (a string) expected") }
    if let cid = plugin.env.members.direct(with: user) { luaPush(L, cid) } else { lua_pushnil(L) }
    return 1
}

/// `hb.conv_locked(cid)`: whether the host knows `cid` as locked (invite-only by a lock).
let cbConvLocked: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    guard let cid = lua_type(L, 1) <= LUA_TNIL ? plugin.currentCid : argString(L, 1) else {
        return fail(L, "ctx.conv(cid).locked: conversation id expected")
    }
    lua_pushboolean(L, plugin.env.members.isLocked(cid) ? 1 : 0)
    return 1
}

// MARK: actions

enum ActionKind: String, CaseIterable {
    case reply, send, send_cmd, send_transient, recall, kick, mute, add, warn, update_attr
    // ctx.conv(cid): unmute, block, unblock, lock, unlock
    case unmute, block, unblock, lock, unlock
    // ctx.dm(uid, message): to a member in the bot's 1:1 conversation with them
    case dm
}

private func messageArg(_ L: LuaRef, _ i: Int32, cid: String, plugin: LuaPlugin, what: String) throws -> HookMessage {
    switch lua_type(L, i) {
    case LUA_TSTRING, LUA_TNUMBER:
        return HookMessage(cid: cid, type: MessageType.text.rawValue, text: argString(L, i))
    case LUA_TTABLE:
        var m = try luaToMessage(L, i, base: HookMessage(cid: cid))
        m.cid = cid
        if let err = plugin.env.registry.validate(m) { throw LuaConversionError(err) }
        return m
    default:
        throw LuaConversionError("message must be a string or a table, got \(luaTypeName(L, i))")
    }
}

/// Conversation argument: a string, or nil for the current event's conversation.
private func cidArg(_ L: LuaRef, _ i: Int32, _ plugin: LuaPlugin) -> String? {
    if lua_type(L, i) <= LUA_TNIL { return plugin.currentCid }
    return argString(L, i)
}

let cbAction: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    guard let kindName = luaString(L, lua_upvalueindex_swift(2)), let kind = ActionKind(rawValue: kindName) else { return 0 }
    let fname = "ctx." + kindName
    guard plugin.pending.count < maxActionsPerCall else { return fail(L, "\(fname): too many actions in one call (\(maxActionsPerCall))") }
    let action: HookAction.Kind
    do {
        switch kind {
        case .reply:
            guard let cid = plugin.currentCid else { return fail(L, "ctx.reply: no current conversation (use ctx.send)") }
            action = .send(cid: cid, message: try messageArg(L, 1, cid: cid, plugin: plugin, what: fname), replyTo: plugin.currentMessageID)
        case .send, .send_transient:
            guard let cid = cidArg(L, 1, plugin) else { return fail(L, "\(fname): conversation id expected") }
            var m = try messageArg(L, 2, cid: cid, plugin: plugin, what: fname)
            if kind == .send_transient {
                m.transient = true
                action = .sendTransient(cid: cid, message: m)
            } else {
                action = .send(cid: cid, message: m, replyTo: nil)
            }
        case .send_cmd:
            guard let cid = cidArg(L, 1, plugin) else { return fail(L, "\(fname): conversation id expected") }
            guard let act = luaString(L, 2), !act.isEmpty else { return fail(L, "\(fname): action name expected") }
            var ext: [String: JSONValue] = [:]
            if lua_type(L, 3) > LUA_TNIL {
                let v = try luaToJSON(L, 3, path: "ext")
                switch v {
                case .object(let o): ext = o
                case .array(let a) where a.isEmpty: break
                default: return fail(L, "\(fname): ext must be a table with string keys")
                }
                for (k, v) in ext {
                    switch v {
                    case .string, .int, .double, .bool: break
                    default: return fail(L, "\(fname): ext.\(k) must be a string, number or boolean")
                    }
                }
            }
            action = .sendCommand(cid: cid, command: HookCommand(action: act, ext: ext, cid: cid, from: ""))
        case .recall:
            guard let cid = cidArg(L, 1, plugin) else { return fail(L, "\(fname): conversation id expected") }
            guard let id = argString(L, 2) else { return fail(L, "\(fname): message id expected") }
            action = .recall(cid: cid, messageID: id)
        case .kick, .add, .warn:
            guard let cid = cidArg(L, 1, plugin) else { return fail(L, "\(fname): conversation id expected") }
            guard let user = argString(L, 2) else { return fail(L, "\(fname): user id expected") }
            let reason = argString(L, 3)
            action =
                kind == .kick
                ? .kick(cid: cid, user: user, reason: reason)
                : kind == .warn ? .warn(cid: cid, user: user, reason: reason) : .add(cid: cid, user: user)
        case .mute:
            guard let cid = cidArg(L, 1, plugin) else { return fail(L, "\(fname): conversation id expected") }
            guard let user = argString(L, 2) else { return fail(L, "\(fname): user id expected") }
            var secs: Int? = nil
            if lua_type(L, 3) > LUA_TNIL {
                guard let s = argNumber(L, 3), s.isFinite, s >= 0, s < 1e10 else { return fail(L, "\(fname): seconds must be a number") }
                secs = Int(s)
            }
            action = .mute(cid: cid, user: user, seconds: secs, reason: argString(L, 4))
        case .unmute, .block, .unblock:
            guard let cid = cidArg(L, 1, plugin) else { return fail(L, "\(fname): conversation id expected") }
            guard let user = argString(L, 2) else { return fail(L, "\(fname): user id expected") }
            action =
                kind == .unmute
                ? .mute(cid: cid, user: user, seconds: 0, reason: argString(L, 3)) : .block(cid: cid, user: user, blocked: kind == .block)
        case .lock, .unlock:
            guard let cid = cidArg(L, 1, plugin) else { return fail(L, "\(fname): conversation id expected") }
            if lua_type(L, 2) > LUA_TNIL, lua_type(L, 2) != LUA_TSTRING { return fail(L, "\(fname): reason must be a string") }
            action = .lock(cid: cid, locked: kind == .lock, reason: argString(L, 2))
        case .dm:
            guard let user = argString(L, 1), !user.isEmpty else { return fail(L, "\(fname): user id (a string) expected") }
            guard user != plugin.env.botID else { return fail(L, "\(fname): the bot cannot message itself") }
            guard user.utf8.count <= 64 else { return fail(L, "\(fname): user id longer than 64 bytes") }
            // The conversation is the host's to find or open; the message carries no cid until then.
            action = .directMessage(user: user, message: try messageArg(L, 2, cid: "", plugin: plugin, what: fname))
        case .update_attr:
            guard let cid = cidArg(L, 1, plugin) else { return fail(L, "\(fname): conversation id expected") }
            guard let key = argString(L, 2), !key.isEmpty else { return fail(L, "\(fname): attribute key expected") }
            action = .updateAttribute(cid: cid, key: key, value: try luaToJSON(L, 3, path: key))
        }
    } catch {
        return fail(L, "\(fname): \(error)")
    }
    if let reach = plugin.env.reach, let cid = action.conversation, cid != plugin.currentCid, !reach.contains(cid) {
        return fail(L, "\(fname): the bot is not a member of conversation \(cid)")
    }
    plugin.pending.append(HookAction(plugin: plugin.name, kind: action))
    return 0
}

@inline(__always) func lua_upvalueindex_swift(_ i: Int32) -> Int32 { hb_lua_upvalueindex(i) }
