import CLua
import Foundation
import IMCore
import Logging
import LuaSandbox
import Synchronization

private let instanceCounter = Atomic<Int>(0)

/// A process-unique id for each loaded plugin version.
private func nextInstanceID() -> Int { instanceCounter.wrappingAdd(1, ordering: .relaxed).newValue }

/// One loaded version of a plugin: its own lua_State, hooks, timers and
/// pending actions. Not thread-safe; the runtime serialises all use.
final class LuaPlugin {
    let env: PluginEnvironment
    let key: String
    let path: String
    let instanceID: Int
    let generation: Int
    private(set) var name: String
    private(set) var priority: Int = 0
    /// The settings this version accepts and their defaults (the console's config editor shows them).
    private(set) var settingsSchema = ConfigSchema(fields: [:])
    private(set) var settingsDefaults: JSONValue = .object([:])
    private(set) var L: OpaquePointer?
    let limits: UnsafeMutablePointer<hb_limits>
    // The properties every hook call reads or writes are `@exclusivity(unchecked)`: a plugin is used on one
    // thread (the runtime's) and none of them is accessed overlapping, so the dynamic checks (swift_beginAccess
    // on each access of a class's stored property) were pure per-call cost.
    @exclusivity(unchecked) var refs = [Int32](repeating: LUA_NOREF, count: HookName.allCases.count)
    var hookLines = [Int](repeating: 0, count: HookName.allCases.count)
    var ctxRef: Int32 = LUA_NOREF
    /// The table the plugin's chunk returned (schedules call its functions by name).
    var pluginTableRef: Int32 = LUA_NOREF
    private var fireTimerRef: Int32 = LUA_NOREF
    private var runCommandRef: Int32 = LUA_NOREF
    private var httpDoneRef: Int32 = LUA_NOREF

    // per call
    @exclusivity(unchecked) var pending: [HookAction] = []
    @exclusivity(unchecked) var currentCid: String?
    @exclusivity(unchecked) var currentMessageID: String?
    /// The plugin's translations (`ctx.t`), read from its locale files at load (Locale.swift).
    var catalog = LocaleCatalog()
    /// Dialogs (`ctx.ask`): the coroutine running now, the question it asked, the open dialogs and spare
    /// threads (PluginEngine+Dialogs.swift).
    @exclusivity(unchecked) var dialogs = DialogState()

    var timers: [Int: PluginTimer] = [:]
    var nextTimerID = 1

    // health
    @exclusivity(unchecked) var consecutiveFailures = 0
    /// Timer time used in the current one-second window (monotonic seconds), for `HookLimits.timerShare`.
    var timerWindow: (start: Double, spent: Double, overrun: Bool) = (0, 0, false)
    var totalFailures = 0
    var lastError: HookError?
    var disabled = false
    /// Where calls are counted and timed (set by the engine once the plugin's name is known).
    var usage: PluginUsage?

    /// Creates the state, runs the plugin chunk and reads its table. Does not
    /// call `on_load`.
    init(
        env: PluginEnvironment, key: String, path: String, chunkName: String, source: String,
        generation: Int, hostConfig: (String) -> JSONValue?
    ) throws {
        self.env = env
        self.key = key
        self.path = path
        self.name = key
        self.generation = generation
        self.instanceID = nextInstanceID()
        limits = .allocate(capacity: 1)
        limits.initialize(to: hb_limits())
        limits.pointee.mem_cap = env.limits.memoryBytes > 0 ? env.limits.memoryBytes : 0
        limits.pointee.count_step = Int32(max(1, min(env.limits.checkInterval, 1_000_000)))
        limits.pointee.unlimited = 1
        guard let L = hb_newstate(limits) else {
            // deinit frees `limits`
            throw HookError(plugin: key, hook: "load", reason: .invalidPlugin("cannot create Lua state"))
        }
        self.L = L
        limits.pointee.owner = Unmanaged.passUnretained(self).toOpaque()
        do {
            try setUp(source: source, chunkName: chunkName, hostConfig: hostConfig)
        } catch {
            close()
            throw error
        }
    }

    deinit {
        close()
        limits.deallocate()
    }

    func close() {
        guard let L else { return }
        limits.pointee.owner = nil
        limits.pointee.unlimited = 1
        limits.pointee.deadline = 1e-9
        hb_close(L)
        self.L = nil
        timers.removeAll()
        dialogs = DialogState()
    }

    var memoryUsed: Int { limits.pointee.mem_used }

    func has(_ hook: HookName) -> Bool { refs[hook.rawValue] != LUA_NOREF }

    private func loadError(_ status: Int32, hook: String) -> HookError {
        makeError(status: status, hook: hook, fallbackLine: nil)
    }

    private func setUp(source: String, chunkName: String, hostConfig: (String) -> JSONValue?) throws {
        guard let L else { return }
        hb_open_safe_libs(L)
        let budget = Int64(env.limits.instructionBudget)
        // prelude (Resources/prelude.lua)
        guard let prelude = hookbotPrelude else {
            throw HookError(
                plugin: key, hook: "load", reason: .invalidPlugin("prelude: cannot read prelude.lua from the HookRuntime resources"))
        }
        var status = prelude.withCString { p in
            hb_luaL_loadbuffer(L, p, strlen(p), "=(hookbot)", "t")
        }
        guard status == LUA_OK else {
            throw HookError(plugin: key, hook: "load", reason: .invalidPlugin("prelude: \(luaString(L, -1) ?? "?")"))
        }
        pushHBTable(L)
        lua_rawgeti(L, hb_lua_registryindex(), Int64(LUA_RIDX_GLOBALS))
        status = hb_limited_pcall(L, 2, 5, env.limits.loadDeadline, 0)
        guard status == LUA_OK else { throw loadError(status, hook: "load") }
        httpDoneRef = hb_ref(L)
        runCommandRef = hb_ref(L)
        fireTimerRef = hb_ref(L)
        ctxRef = hb_ref(L)
        let envRef = hb_ref(L)

        // plugin chunk
        var src = source
        status = src.withUTF8 { buf in
            buf.withMemoryRebound(to: CChar.self) { b in
                hb_luaL_loadbuffer(L, b.baseAddress, b.count, chunkName, "t")
            }
        }
        guard status == LUA_OK else {
            let msg = luaString(L, -1) ?? "unknown compile error"
            let (src, line, text) = splitLuaPosition(msg)
            throw HookError(plugin: key, hook: "load", source: src, line: line, reason: .compile(text))
        }
        hb_getregistryref(L, envRef)
        _ = lua_setupvalue(L, -2, 1)
        hb_unref(L, envRef)
        status = hb_limited_pcall(L, 0, 1, env.limits.loadDeadline, budget)
        guard status == LUA_OK else { throw loadError(status, hook: "load") }
        guard lua_type(L, -1) == LUA_TTABLE else {
            throw HookError(
                plugin: key, hook: "load",
                reason: .invalidPlugin("the script must return a table, got \(luaTypeName(L, -1))"))
        }
        let t = lua_gettop(L)
        lua_pushvalue(L, t)
        pluginTableRef = hb_ref(L)

        // name
        switch luaRawField(L, t, "name") {
        case LUA_TNIL: break
        case LUA_TSTRING:
            let n = luaString(L, -1) ?? ""
            guard isValidPluginName(n) else {
                throw HookError(plugin: key, hook: "load", reason: .invalidPlugin("invalid name '\(n)' (letters, digits, _ . - only)"))
            }
            name = n
        default:
            throw HookError(plugin: key, hook: "load", reason: .invalidPlugin("name must be a string"))
        }
        lua_settop(L, t)
        guard !isReservedPluginName(name) else {
            throw HookError(
                plugin: name, hook: "load",
                reason: .invalidPlugin(
                    "the name '\(name)' is reserved for the host (names starting with 'hookbot.')"))
        }
        // priority
        switch luaRawField(L, t, "priority") {
        case LUA_TNIL: break
        case LUA_TNUMBER:
            let d = lua_tonumberx(L, -1, nil)
            guard d.isFinite, abs(d) < 1e9 else {
                throw HookError(plugin: name, hook: "load", reason: .invalidPlugin("priority out of range"))
            }
            priority = Int(d)
        default:
            throw HookError(plugin: name, hook: "load", reason: .invalidPlugin("priority must be a number"))
        }
        lua_settop(L, t)
        // config
        var defaults: JSONValue = .object([:])
        if luaRawField(L, t, "config") != LUA_TNIL {
            do {
                defaults = try luaToJSON(L, -1, path: "config")
            } catch {
                throw HookError(plugin: name, hook: "load", reason: .invalidPlugin("\(error)"))
            }
            if case .array(let a) = defaults, a.isEmpty { defaults = .object([:]) }
            guard case .object = defaults else {
                throw HookError(plugin: name, hook: "load", reason: .invalidPlugin("config must be a table with string keys"))
            }
        }
        lua_settop(L, t)
        // schema: declared, or the types of the config defaults
        let schema: ConfigSchema
        if luaRawField(L, t, "schema") != LUA_TNIL {
            do {
                schema = try ConfigSchema.declared(try luaToJSON(L, -1, path: "schema"))
            } catch {
                throw HookError(plugin: name, hook: "load", reason: .invalidPlugin("\(error)"))
            }
            defaults = .object(schema.defaults.merging(defaults.objectValue ?? [:]) { _, configured in configured })
        } else {
            schema = ConfigSchema.inferred(from: defaults.objectValue ?? [:])
        }
        lua_settop(L, t)
        settingsSchema = schema
        settingsDefaults = defaults
        let settings = hostConfig(name)
        if let settings = settings?.objectValue, let (key, message) = schema.problem(with: settings) {
            let path = "plugins.\(name).\(key)"
            let location = env.configLocator?(path)
            throw HookError(
                plugin: name, hook: "load", source: location?.file, line: location?.line,
                reason: .config(key: path, message: message))
        }
        // hooks
        for hook in HookName.allCases {
            luaPush(L, hook.luaName)
            let ty = lua_rawget(L, t)
            if ty == LUA_TFUNCTION {
                var ar = lua_Debug()
                lua_pushvalue(L, -1)
                if lua_getinfo(L, ">S", &ar) != 0 { hookLines[hook.rawValue] = Int(ar.linedefined) }
                refs[hook.rawValue] = hb_ref(L)
            } else if ty != LUA_TNIL {
                throw HookError(plugin: name, hook: "load", reason: .invalidPlugin("\(hook.luaName) must be a function"))
            }
            lua_settop(L, t)
        }
        // ctx.plugin, ctx.config
        let config = mergeConfig(defaults, settings ?? .null)
        hb_getregistryref(L, ctxRef)
        luaSetField(L, "plugin", name)
        if let bot = env.botID { luaSetField(L, "bot", bot) }
        if !luaPush(L, json: config) { lua_createtable(L, 0, 0) }
        luaSetFieldTop(L, "config")
        // ctx.commands.prefix
        luaPush(L, "commands")
        if lua_rawget(L, -2) == LUA_TTABLE { luaSetField(L, "prefix", env.commandSettings.prefix) }
        lua_settop(L, 0)
    }

    private func pushHBTable(_ L: LuaRef) {
        lua_createtable(L, 0, 32)
        func set(_ name: String, _ fn: hb_swift_fn) {
            hb_push_swift_function(L, fn)
            lua_setfield(L, -2, name)
        }
        set("log", cbLog)
        set("now", cbNow)
        set("where", cbWhere)
        set("require_source", cbRequireSource)
        set("ask", cbAsk)
        set("state_get", cbStateGet)
        set("state_set", cbStateSet)
        set("state_incr", cbStateIncr)
        set("state_delete", cbStateDelete)
        set("state_keys", cbStateKeys)
        set("timer_add", cbTimerAdd)
        set("timer_cancel", cbTimerCancel)
        set("schedule_add", cbScheduleAdd)
        set("schedule_list", cbScheduleList)
        set("schedule_cancel", cbScheduleCancel)
        set("schedule_next", cbScheduleNext)
        set("schedule_date", cbScheduleDate)
        set("types_register", cbTypesRegister)
        set("command_add", cbCommandAdd)
        set("roles", cbRoles)
        set("muted", cbMuted)
        set("conv_member", cbConvMember)
        set("conv_locked", cbConvLocked)
        set("dm_conversation", cbDMConversation)
        set("http_start", cbHTTPStart)
        set("media_info", cbMediaInfo)
        set("media_read", cbMediaRead)
        set("types_validate", cbTypesValidate)
        set("types_name", cbTypesName)
        set("types_number", cbTypesNumber)
        set("matcher_new", cbMatcherNew)
        set("text_normalise", cbTextNormalise)
        set("text_urls", cbTextURLs)
        set("text_stats", cbTextStats)
        set("card_send", cbCardSend)
        set("card_update", cbCardUpdate)
        set("card_get", cbCardGet)
        set("t", cbT)
        set("locale", cbLocale)
        for kind in ActionKind.allCases {
            luaPush(L, kind.rawValue)
            hb_push_swift_closure(L, cbAction, 1)
            lua_setfield(L, -2, "act_" + kind.rawValue)
        }
    }

    // MARK: calling

    /// Calls `hook(args..., ctx)` under the limits. On success the single
    /// result is left on top of the stack (caller pops with `lua_settop(L, 0)`).
    func invoke(_ hook: HookName, timeout: Double? = nil, _ pushArgs: (LuaRef) -> Int32) -> HookError? {
        guard let L else {
            return HookError(plugin: name, hook: hook.luaName, reason: .runtime("plugin is closed"))
        }
        lua_settop(L, 0)
        let t = timeout ?? env.limits.deadline
        dialogs.hook = hook
        if env.askTarget != nil, hook.mayAsk {
            // A hook that may wait in ctx.ask runs as a coroutine; its one result is left on L.
            let ref = refs[hook.rawValue]
            let ctx = ctxRef
            return runAsCoroutine(
                hook: hook.luaName, slot: hook.rawValue, fallbackLine: hookLines[hook.rawValue], timeout: t
            ) { co in
                hb_getregistryref(co, ref)
                let n = pushArgs(co)
                hb_getregistryref(co, ctx)
                return n + 1
            }
        }
        hb_getregistryref(L, refs[hook.rawValue])
        let n = pushArgs(L)
        hb_getregistryref(L, ctxRef)
        let status = hb_limited_pcall(L, n + 1, 1, t, Int64(env.limits.instructionBudget))
        usage?.record(slot: hook.rawValue, nanos: limits.pointee.last_nanos, failed: status != LUA_OK)
        if status == LUA_OK { return nil }
        let e = makeError(status: status, hook: hook.luaName, fallbackLine: hookLines[hook.rawValue])
        lua_settop(L, 0)
        return e
    }

    func fireTimer(id: Int, once: Bool) -> HookError? {
        callPrelude(fireTimerRef, hook: "timer", slot: PluginUsage.timerSlot) { L in
            lua_pushinteger(L, Int64(id))
            lua_pushboolean(L, once ? 1 : 0)
            return 2
        }
    }

    /// Runs the callback of an HTTP call with its outcome (`{ok, status, headers, body, json, error}`).
    func httpDone(_ id: Int, _ outcome: JSONValue) -> HookError? {
        callPrelude(httpDoneRef, hook: "http callback", slot: PluginUsage.httpSlot) { L in
            lua_pushinteger(L, Int64(id))
            if !luaPush(L, json: outcome) { lua_createtable(L, 0, 0) }
            return 2
        }
    }

    /// Calls one of the prelude's dispatch functions (timers, commands) with the arguments `push` pushes,
    /// within the plugin's limits, counting the call in `slot` of its usage.
    private func callPrelude(_ ref: Int32, hook: String, slot: Int, _ push: (LuaRef) -> Int32) -> HookError? {
        guard let L else { return HookError(plugin: name, hook: hook, reason: .runtime("plugin is closed")) }
        lua_settop(L, 0)
        dialogs.hook = nil
        if env.askTarget != nil, slot == PluginUsage.commandSlot {
            // A command may wait in ctx.ask: it runs as a coroutine.
            return runAsCoroutine(hook: hook, slot: slot, fallbackLine: nil, timeout: env.limits.deadline) { co in
                hb_getregistryref(co, ref)
                return push(co)
            }
        }
        hb_getregistryref(L, ref)
        let count = push(L)
        let status = hb_limited_pcall(L, count, 0, env.limits.deadline, Int64(env.limits.instructionBudget))
        usage?.record(slot: slot, nanos: limits.pointee.last_nanos, failed: status != LUA_OK)
        if status == LUA_OK { return nil }
        let e = makeError(status: status, hook: hook, fallbackLine: nil)
        lua_settop(L, 0)
        return e
    }

    /// Runs the `run` function of one of the plugin's commands with the parsed arguments and the message.
    func runCommand(_ name: String, arguments: [String: JSONValue], message: HookMessage, typeName: String?) -> HookError? {
        callPrelude(runCommandRef, hook: "command \(name)", slot: PluginUsage.commandSlot) { L in
            luaPush(L, name)
            if !luaPush(L, json: .object(arguments)) { lua_createtable(L, 0, 0) }
            luaPush(L, message: message, typeName: typeName)
            return 3
        }
    }

    func makeError(status: Int32, hook: String, fallbackLine: Int?) -> HookError {
        let tripped = limits.pointee.tripped
        var msg: String
        if let L {
            if let s = luaString(L, -1) {
                msg = s
            } else if lua_type(L, -1) == LUA_TNUMBER {
                msg = String(lua_tonumberx(L, -1, nil))
            } else {
                msg = "(error object is a \(luaTypeName(L, -1)) value)"
            }
        } else {
            msg = "error"
        }
        let (src, line, text) = splitLuaPosition(msg)
        let reason: HookError.Reason
        if tripped == Int32(HB_TRIP_INSTRUCTIONS) {
            reason = .instructionBudget
        } else if tripped == Int32(HB_TRIP_DEADLINE) {
            reason = .deadline
        } else if tripped == Int32(HB_TRIP_MEMORY) || status == LUA_ERRMEM {
            reason = .memory
        } else {
            reason = .runtime(text)
        }
        return HookError(
            plugin: name, hook: hook, source: src ?? (line == nil ? chunkLabel : nil),
            line: line ?? (fallbackLine.flatMap { $0 > 0 ? $0 : nil }), reason: reason)
    }

    var chunkLabel: String {
        path.hasSuffix("init.lua") ? "\(key)/init.lua" : "\(key).lua"
    }

    func takeActions() -> [HookAction] {
        if pending.isEmpty { return [] }
        let a = pending
        pending.removeAll(keepingCapacity: true)
        return a
    }
}

/// Names the host keeps for itself (its own state namespace is `hookbot.host`).
func isReservedPluginName(_ n: String) -> Bool {
    n.lowercased().hasPrefix("hookbot.")
}

func isValidPluginName(_ n: String) -> Bool {
    !n.isEmpty && n.count <= 64
        && n.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x5F || c == 0x2D || c == 0x2E
        }
}

/// Host config overrides plugin defaults; objects merge recursively.
func mergeConfig(_ defaults: JSONValue, _ override: JSONValue) -> JSONValue {
    switch (defaults, override) {
    case (_, .null): return defaults
    case (.object(var a), .object(let b)):
        for (k, v) in b { a[k] = mergeConfig(a[k] ?? .null, v) }
        return .object(a)
    default: return override
    }
}

/// Splits "source:line: message" into its parts.
func splitLuaPosition(_ msg: String) -> (String?, Int?, String) {
    let u = Array(msg.utf8)
    var i = 0
    while i < u.count {
        if u[i] == UInt8(ascii: ":") {
            var j = i + 1
            while j < u.count, u[j] >= 0x30, u[j] <= 0x39 { j += 1 }
            if j > i + 1, j + 1 < u.count, u[j] == UInt8(ascii: ":"), u[j + 1] == UInt8(ascii: " ") {
                let src = String(decoding: u[0..<i], as: UTF8.self)
                let line = Int(String(decoding: u[(i + 1)..<j], as: UTF8.self))
                let rest = String(decoding: u[(j + 2)...], as: UTF8.self)
                return (src, line, rest)
            }
        }
        if u[i] == 0x0A { break }
        i += 1
    }
    return (nil, nil, msg)
}
