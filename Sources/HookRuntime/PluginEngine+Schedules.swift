import CLua
import Foundation
import IMCore
import Logging
import LuaSandbox

/// Schedules (`ctx.schedule.cron / at / every`): jobs persisted in the state store that call a function of
/// the plugin named by a string (a closure cannot outlive a reload or a restart), fired by the host's timer
/// driver within each plugin's timer share.

let maxSchedulesPerPlugin = 1000
let maxScheduleDataBytes = 16 * 1024
let maxScheduleMissedRuns = 100
let defaultScheduleGrace = 60.0

/// Everyone's schedules in memory, loaded from the store the first time a plugin name is asked for; the
/// store is written before this changes. Lives in the engine's `PluginEnvironment`, so reloads keep it.
final class ScheduleBook {
    private var jobs: [String: [String: ScheduleJob]] = [:]
    /// A job out of its plugin's timer share waits until this time (in memory only).
    var notBefore: [String: Double] = [:]

    func jobs(_ plugin: String, store: HookStateStore, logger: Logger) -> [String: ScheduleJob] {
        if let j = jobs[plugin] { return j }
        var loaded: [String: ScheduleJob] = [:]
        do {
            for job in try store.schedules(plugin: plugin) { loaded[job.id] = job }
        } catch {
            logger.error("schedules could not be read", metadata: ["plugin": "\(plugin)", "error": "\(error)"])
        }
        jobs[plugin] = loaded
        return loaded
    }

    func put(_ plugin: String, _ job: ScheduleJob) { jobs[plugin, default: [:]][job.id] = job }
    func remove(_ plugin: String, _ id: String) {
        jobs[plugin]?[id] = nil
        notBefore[plugin + "\u{0}" + id] = nil
    }
}

/// Jobs of one plugin, for the console.
public struct PluginSchedules: Sendable, Hashable {
    public var plugin: String
    /// False when no loaded plugin has this name (its jobs wait, unfired, until it is back).
    public var loaded: Bool
    public var jobs: [ScheduleJob]
}

extension ScheduleJob {
    var zone: TimeZone { TimeZone(identifier: tz) ?? TimeZone(identifier: "UTC")! }

    /// The first time after `t` this job is due again (nil: never, an `at` job).
    func next(after t: Double) -> Double? {
        switch kind {
        case .at: return nil
        case .every:
            guard let iv = interval, iv > 0 else { return nil }
            if due > t { return due }
            return due + ((t - due) / iv).rounded(.down) * iv + iv
        case .cron:
            return (try? CronExpression(spec))?.next(after: t, in: zone)
        }
    }

    /// The last `count` times at or before `t`, from `due` on, earliest first.
    func occurrences(upTo t: Double, last count: Int) -> [Double] {
        guard due <= t, count > 0 else { return [] }
        switch kind {
        case .at: return [due]
        case .every:
            guard let iv = interval, iv > 0 else { return [due] }
            let n = Int(((t - due) / iv).rounded(.down)) + 1
            return (max(0, n - count)..<n).map { due + Double($0) * iv }
        case .cron:
            guard let expr = try? CronExpression(spec) else { return [due] }
            // Walk forward from ever earlier starts until enough times are found (a dense expression finds
            // them within the hour; the walk never goes through years of minutes).
            for window in [3600.0, 86_400, 32 * 86_400, 366 * 86_400, .infinity] {
                let start = max(due - 1, t - window)
                var found: [Double] = []
                var cursor = start
                var steps = 0
                while steps < 20_000, let n = expr.next(after: cursor, in: zone), n <= t {
                    found.append(n)
                    if found.count > count { found.removeFirst() }
                    cursor = n
                    steps += 1
                }
                if found.count >= count || start <= due - 1 { return found }
            }
            return [due]
        }
    }
}

// MARK: - Lua

private func scheduleFail(_ L: LuaRef, _ msg: String) -> Int32 {
    luaPush(L, luaWhere(L) + msg)
    return -1
}

private func isValidScheduleName(_ s: String, max: Int = 64) -> Bool {
    !s.isEmpty && s.utf8.count <= max
        && s.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x5F || c == 0x2D
                || c == 0x2E || c == 0x3A
        }
}

/// `hb.schedule_add(kind, spec, fn, data, opts)` behind `ctx.schedule.cron / at / every`; returns the id.
let cbScheduleAdd: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    guard let kindName = luaString(L, 1), let kind = ScheduleJob.Kind(rawValue: kindName) else {
        return scheduleFail(L, "ctx.schedule: unknown kind")
    }
    let what = "ctx.schedule.\(kindName)"
    guard lua_type(L, 3) == LUA_TSTRING, let fn = luaString(L, 3) else {
        let got = lua_type(L, 3) == LUA_TFUNCTION ? "a function" : luaTypeName(L, 3)
        return scheduleFail(
            L,
            "\(what): the callback must be the name (a string) of a function in plugin.schedules or the plugin table, got \(got) (a closure cannot survive a reload or restart)"
        )
    }
    guard isValidScheduleName(fn) else { return scheduleFail(L, "\(what): invalid function name '\(fn)'") }
    guard plugin.hasScheduleFunction(fn) else {
        return scheduleFail(L, "\(what): the plugin has no function '\(fn)' (plugin.schedules.\(fn) or plugin.\(fn))")
    }
    var data: JSONValue = .null
    if lua_type(L, 4) != LUA_TNIL {
        do { data = try luaToJSON(L, 4, path: "data") } catch { return scheduleFail(L, "\(what): \(error)") }
        let size = data.jsonString().utf8.count
        guard size <= maxScheduleDataBytes else {
            return scheduleFail(L, "\(what): data is \(size) bytes as JSON; at most \(maxScheduleDataBytes)")
        }
    }
    var opts: [String: JSONValue] = [:]
    switch lua_type(L, 5) {
    case LUA_TNIL: break
    case LUA_TTABLE:
        do {
            let o = try luaToJSON(L, 5, path: "opts")
            if case .object(let d) = o {
                opts = d
            } else if case .array(let a) = o, !a.isEmpty {
                return scheduleFail(L, "\(what): opts must be a table with names (tz, missed, max_missed, grace, id)")
            }
        } catch { return scheduleFail(L, "\(what): \(error)") }
    default: return scheduleFail(L, "\(what): opts must be a table, got \(luaTypeName(L, 5))")
    }
    let known: Set<String> = ["tz", "missed", "max_missed", "grace", "id"]
    if let bad = opts.keys.sorted().first(where: { !known.contains($0) }) {
        return scheduleFail(L, "\(what): unknown option '\(bad)' (tz, missed, max_missed, grace, id)")
    }
    var tz = "UTC"
    if let v = opts["tz"] {
        guard let s = v.stringValue, TimeZone(identifier: s) != nil else {
            return scheduleFail(L, "\(what): unknown time zone '\(v.stringValue ?? "\(v)")' (an IANA name like Asia/Shanghai)")
        }
        tz = s
    }
    let zone = TimeZone(identifier: tz)!
    var missed: ScheduleJob.Missed = kind == .at ? .once : .skip
    if let v = opts["missed"] {
        guard let s = v.stringValue, let m = ScheduleJob.Missed(rawValue: s) else {
            return scheduleFail(L, "\(what): missed must be \"skip\", \"once\" or \"all\"")
        }
        missed = m
    }
    var maxMissed = 10
    if let v = opts["max_missed"] {
        guard let n = v.intValue, n >= 1, n <= maxScheduleMissedRuns else {
            return scheduleFail(L, "\(what): max_missed must be an integer 1-\(maxScheduleMissedRuns)")
        }
        maxMissed = n
    }
    var grace = defaultScheduleGrace
    if let v = opts["grace"] {
        guard let d = v.doubleValue, d >= 0, d <= 86_400 else {
            return scheduleFail(L, "\(what): grace must be 0-86400 seconds")
        }
        grace = d
    }
    let now = plugin.env.clock.now()
    var spec: String
    var due: Double
    var interval: Double?
    switch kind {
    case .cron:
        guard let s = luaString(L, 2), lua_type(L, 2) == LUA_TSTRING else {
            return scheduleFail(L, "\(what): the expression must be a string like \"0 9 * * MON-FRI\"")
        }
        do {
            let expr = try CronExpression(s)
            guard let n = expr.next(after: now, in: zone) else {
                return scheduleFail(L, "\(what): '\(s)' never happens")
            }
            spec = expr.source
            due = n
        } catch { return scheduleFail(L, "\(what): \(error)") }
    case .at:
        if lua_type(L, 2) == LUA_TNUMBER {
            let d = lua_tonumberx(L, 2, nil)
            guard d.isFinite, d > 0, d < 1e11 else { return scheduleFail(L, "\(what): time must be epoch seconds") }
            due = d
        } else if lua_type(L, 2) == LUA_TSTRING, let s = luaString(L, 2), let p = CivilTime.parseISO(s) {
            if let off = p.offset {
                due = Double(p.wall.naive - off)
            } else if let first = p.wall.instants(in: zone).first {
                due = first
            } else {
                return scheduleFail(L, "\(what): '\(s)' does not exist in \(tz)")
            }
        } else {
            return scheduleFail(
                L, "\(what): time must be epoch seconds or an ISO 8601 time like \"2026-11-30T09:00:00+08:00\"")
        }
        spec = Date(timeIntervalSince1970: due).formatted(.iso8601)
    case .every:
        guard lua_type(L, 2) == LUA_TNUMBER else { return scheduleFail(L, "\(what): seconds must be a number") }
        let s = lua_tonumberx(L, 2, nil)
        guard s.isFinite, s >= 1, s <= 400 * 86_400 else {
            return scheduleFail(L, "\(what): seconds must be 1-\(400 * 86_400)")
        }
        interval = s
        spec = s == s.rounded() ? String(Int(s)) : String(s)
        due = now + s
    }
    let store = plugin.env.store
    let book = plugin.env.schedules
    let existing = book.jobs(plugin.name, store: store, logger: plugin.env.logger)
    var id: String
    var runs = 0
    var lastRun: Double?
    var created = now
    if let v = opts["id"] {
        guard let s = v.stringValue, isValidScheduleName(s), Int(s) == nil else {
            return scheduleFail(L, "\(what): id must be a name (letters, digits, _ - . :; not a number), at most 64 bytes")
        }
        id = s
        if let old = existing[s], old.kind == kind, old.spec == spec, old.tz == tz {
            // The same job declared again (on_load after a reload or restart): it keeps its due time.
            due = old.due
            (runs, lastRun, created) = (old.runs, old.lastRun, old.created)
        }
    } else {
        id = ""
    }
    if existing[id] == nil && existing.count >= maxSchedulesPerPlugin {
        return scheduleFail(L, "\(what): too many schedules (\(maxSchedulesPerPlugin)); cancel some first")
    }
    do {
        if id.isEmpty { id = String(try store.nextScheduleNumber(plugin: plugin.name)) }
        let job = ScheduleJob(
            id: id, kind: kind, spec: spec, fn: fn, data: data, tz: tz, missed: missed, maxMissed: maxMissed,
            grace: grace, due: due, interval: interval, created: created, runs: runs, lastRun: lastRun)
        try store.saveSchedule(plugin: plugin.name, job)
        book.put(plugin.name, job)
    } catch {
        return scheduleFail(L, "\(what): could not be stored: \(error)")
    }
    luaPush(L, id)
    return 1
}

/// `ctx.schedule.list()`: the plugin's jobs, next due first.
let cbScheduleList: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    let jobs = plugin.env.schedules.jobs(plugin.name, store: plugin.env.store, logger: plugin.env.logger).values
        .sorted { ($0.due, $0.id) < ($1.due, $1.id) }
    lua_createtable(L, Int32(clamping: jobs.count), 0)
    for (i, job) in jobs.enumerated() {
        if !luaPush(L, json: job.luaView) { lua_createtable(L, 0, 0) }
        lua_rawseti(L, -2, Int64(i + 1))
    }
    return 1
}

/// `ctx.schedule.cancel(id)`: true when the job existed.
let cbScheduleCancel: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    let id: String
    switch lua_type(L, 1) {
    case LUA_TSTRING: id = luaString(L, 1) ?? ""
    case LUA_TNUMBER where lua_isinteger(L, 1) != 0: id = String(lua_tointegerx(L, 1, nil))
    default: return scheduleFail(L, "ctx.schedule.cancel: id (a string or number) expected, got \(luaTypeName(L, 1))")
    }
    let book = plugin.env.schedules
    guard book.jobs(plugin.name, store: plugin.env.store, logger: plugin.env.logger)[id] != nil else {
        lua_pushboolean(L, 0)
        return 1
    }
    do {
        try plugin.env.store.deleteSchedule(plugin: plugin.name, id: id)
    } catch { return scheduleFail(L, "ctx.schedule.cancel: \(error)") }
    book.remove(plugin.name, id)
    lua_pushboolean(L, 1)
    return 1
}

private func scheduleZone(_ L: LuaRef, _ idx: Int32, _ what: String) -> Result<TimeZone, ScheduleArgumentError> {
    switch lua_type(L, idx) {
    case LUA_TNIL, LUA_TNONE: return .success(TimeZone(identifier: "UTC")!)
    case LUA_TSTRING:
        let s = luaString(L, idx) ?? ""
        guard let z = TimeZone(identifier: s) else {
            return .failure(.init("\(what): unknown time zone '\(s)' (an IANA name like Asia/Shanghai)"))
        }
        return .success(z)
    default: return .failure(.init("\(what): the time zone must be a string like \"Asia/Shanghai\""))
    }
}

struct ScheduleArgumentError: Error {
    var message: String
    init(_ message: String) { self.message = message }
}

/// `ctx.schedule.next(expr, tz, after)`: the next time (epoch seconds) a cron expression names after
/// `after` (default now) in `tz` (default UTC), or nil and why.
let cbScheduleNext: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    guard lua_type(L, 1) == LUA_TSTRING, let text = luaString(L, 1) else {
        return scheduleFail(L, "ctx.schedule.next: the expression must be a string like \"0 9 * * MON-FRI\"")
    }
    let zone: TimeZone
    switch scheduleZone(L, 2, "ctx.schedule.next") {
    case .success(let z): zone = z
    case .failure(let e): return scheduleFail(L, e.message)
    }
    var after = plugin.env.clock.now()
    if lua_type(L, 3) == LUA_TNUMBER { after = lua_tonumberx(L, 3, nil) }
    do {
        guard let t = try CronExpression(text).next(after: after, in: zone) else {
            lua_pushnil(L)
            luaPush(L, "'\(text)' never happens")
            return 2
        }
        lua_pushnumber(L, t)
        return 1
    } catch { return scheduleFail(L, "ctx.schedule.next: \(error)") }
}

/// `ctx.schedule.date(t, tz)`: the wall-clock time of `t` in `tz` as `os.date("*t")` gives it (year,
/// month, day, hour, min, sec, wday with 1 = Sunday, offset in seconds).
let cbScheduleDate: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    var t = plugin.env.clock.now()
    if lua_type(L, 1) == LUA_TNUMBER { t = lua_tonumberx(L, 1, nil) }
    guard t.isFinite, abs(t) < 1e11 else { return scheduleFail(L, "ctx.schedule.date: time out of range") }
    let zone: TimeZone
    switch scheduleZone(L, 2, "ctx.schedule.date") {
    case .success(let z): zone = z
    case .failure(let e): return scheduleFail(L, e.message)
    }
    let w = CivilTime(epoch: t, zone: zone)
    let fields: JSONValue = .object([
        "year": .int(w.year), "month": .int(w.month), "day": .int(w.day), "hour": .int(w.hour), "min": .int(w.minute),
        "sec": .int(w.second), "wday": .int(CivilTime.weekday(year: w.year, month: w.month, day: w.day) + 1),
        "offset": .int(zone.secondsFromGMT(for: Date(timeIntervalSince1970: t))),
    ])
    if !luaPush(L, json: fields) { lua_createtable(L, 0, 0) }
    return 1
}

extension ScheduleJob {
    /// What `ctx.schedule.list()` shows of a job.
    var luaView: JSONValue {
        var o: [String: JSONValue] = [
            "id": .string(id), "kind": .string(kind.rawValue), "spec": .string(spec), "fn": .string(fn), "data": data,
            "tz": .string(tz), "missed": .string(missed.rawValue), "max_missed": .int(maxMissed), "grace": .double(grace),
            "next": .double(due), "runs": .int(runs), "created": .double(created),
        ]
        if let lastRun { o["last_run"] = .double(lastRun) }
        return .object(o)
    }
}

extension LuaPlugin {
    /// Pushes `plugin.schedules[fn]`, else `plugin[fn]`, leaving the stack as it was plus one value.
    fileprivate func pushScheduleFunction(_ L: LuaRef, _ fn: String) -> Bool {
        let top = lua_gettop(L)
        hb_getregistryref(L, pluginTableRef)
        guard lua_type(L, -1) == LUA_TTABLE else {
            lua_settop(L, top)
            return false
        }
        luaPush(L, "schedules")
        if lua_rawget(L, top + 1) == LUA_TTABLE {
            luaPush(L, fn)
            if lua_rawget(L, top + 2) == LUA_TFUNCTION {
                lua_copy(L, -1, top + 1)
                lua_settop(L, top + 1)
                return true
            }
        }
        lua_settop(L, top + 1)
        luaPush(L, fn)
        let found = lua_rawget(L, top + 1) == LUA_TFUNCTION
        lua_copy(L, -1, top + 1)
        lua_settop(L, top + 1)
        if !found { lua_settop(L, top) }
        return found
    }

    func hasScheduleFunction(_ fn: String) -> Bool {
        guard let L else { return false }
        let top = lua_gettop(L)
        defer { lua_settop(L, top) }
        return pushScheduleFunction(L, fn)
    }

    /// Calls a job's function with `(data, ctx, info)` within the plugin's limits.
    func fireSchedule(_ job: ScheduleJob, info: JSONValue) -> HookError? {
        let hook = "schedule \(job.fn)"
        guard let L else { return HookError(plugin: name, hook: hook, reason: .runtime("plugin is closed")) }
        lua_settop(L, 0)
        guard pushScheduleFunction(L, job.fn) else {
            return HookError(
                plugin: name, hook: hook,
                reason: .runtime(
                    "schedule \(job.id): the plugin has no function '\(job.fn)' (plugin.schedules.\(job.fn) or plugin.\(job.fn))"))
        }
        if !luaPush(L, json: job.data) { lua_pushnil(L) }
        hb_getregistryref(L, ctxRef)
        if !luaPush(L, json: info) { lua_createtable(L, 0, 0) }
        let status = hb_limited_pcall(L, 3, 0, env.limits.deadline, Int64(env.limits.instructionBudget))
        usage?.record(slot: PluginUsage.timerSlot, nanos: limits.pointee.last_nanos, failed: status != LUA_OK)
        if status == LUA_OK { return nil }
        let e = makeError(status: status, hook: hook, fallbackLine: nil)
        lua_settop(L, 0)
        return e
    }
}

// MARK: - engine

extension PluginEngine {
    private func scheduleJobs(_ plugin: String) -> [String: ScheduleJob] {
        env.schedules.jobs(plugin, store: store, logger: logger)
    }

    /// The earliest time any job of a running plugin is due.
    public var nextScheduleDue: Double? {
        var best: Double?
        for plugin in ordered where !plugin.disabled {
            for job in scheduleJobs(plugin.name).values {
                let t = max(job.due, env.schedules.notBefore[plugin.name + "\u{0}" + job.id] ?? 0)
                if best == nil || t < best! { best = t }
            }
        }
        return best
    }

    /// Runs every job due at `t` (earliest first), applying each job's missed-run policy, and moves it on.
    func fireDueSchedules(at t: Double, into result: inout HookResult) {
        var due: [(plugin: LuaPlugin, order: Int, job: ScheduleJob)] = []
        for (i, plugin) in ordered.enumerated() where !plugin.disabled {
            for job in scheduleJobs(plugin.name).values where job.due <= t {
                if let nb = env.schedules.notBefore[plugin.name + "\u{0}" + job.id], nb > t { continue }
                due.append((plugin, i, job))
            }
        }
        guard !due.isEmpty else { return }
        due.sort { a, b in
            if a.job.due != b.job.due { return a.job.due < b.job.due }
            if a.order != b.order { return a.order < b.order }
            return a.job.id < b.job.id
        }
        for (plugin, _, job) in due {
            guard !plugin.disabled, plugin.L != nil, var job = scheduleJobs(plugin.name)[job.id], job.due <= t else {
                continue
            }
            let holdKey = plugin.name + "\u{0}" + job.id
            if limits.timerShare > 0 {
                let now = Self.scheduleMonotonic()
                if now - plugin.timerWindow.start >= 1 { plugin.timerWindow = (now, 0, false) }
                if plugin.timerWindow.spent >= limits.timerShare {
                    env.schedules.notBefore[holdKey] = t + (1 - (now - plugin.timerWindow.start))
                    if !plugin.timerWindow.overrun {
                        plugin.timerWindow.overrun = true
                        account(plugin, HookError(plugin: plugin.name, hook: "schedule", reason: .timerBudget), into: &result.errors)
                    }
                    continue
                }
            }
            env.schedules.notBefore[holdKey] = nil
            let runs = plannedRuns(job, at: t)
            // Moved on (or removed) before it runs, so a run that fails or a crash does not repeat it.
            if let next = job.next(after: t) {
                job.due = next
                job.runs += runs.count
                if !runs.isEmpty { job.lastRun = t }
                do { try store.saveSchedule(plugin: plugin.name, job) } catch {
                    logger.error("schedule could not be saved", metadata: ["plugin": "\(plugin.name)", "error": "\(error)"])
                }
                env.schedules.put(plugin.name, job)
            } else {
                do { try store.deleteSchedule(plugin: plugin.name, id: job.id) } catch {
                    logger.error("schedule could not be removed", metadata: ["plugin": "\(plugin.name)", "error": "\(error)"])
                }
                env.schedules.remove(plugin.name, job.id)
            }
            for run in runs {
                let info: JSONValue = .object([
                    "id": .string(job.id), "kind": .string(job.kind.rawValue), "scheduled": .double(run.time),
                    "catch_up": .bool(run.catchUp), "late": .double(max(0, t - run.time)),
                    "missed": .int(run.skipped), "next": job.kind == .at ? .null : .double(job.due),
                ])
                let started = Self.scheduleMonotonic()
                let fired = call(plugin, cid: nil, messageID: nil) { plugin in plugin.fireSchedule(job, info: info) }
                plugin.timerWindow.spent += Self.scheduleMonotonic() - started
                result.errors += fired.errors
                result.actions += fired.actions
            }
        }
    }

    /// The runs a job due at or before `t` makes now: the latest time if it is within the grace, and the
    /// missed ones as the policy says (none, the latest once, or the last `maxMissed`).
    private func plannedRuns(_ job: ScheduleJob, at t: Double) -> [(time: Double, catchUp: Bool, skipped: Int)] {
        let wanted = job.missed == .all ? job.maxMissed + 1 : 1
        let times = job.occurrences(upTo: t, last: wanted)
        guard let latest = times.last else { return [] }
        let onTime = t - latest <= job.grace
        switch job.missed {
        case .skip:
            return onTime ? [(latest, false, 0)] : []
        case .once:
            return [(latest, !onTime, 0)]
        case .all:
            var missed = onTime ? Array(times.dropLast()) : times
            if missed.count > job.maxMissed { missed = Array(missed.suffix(job.maxMissed)) }
            var out = missed.map { (time: $0, catchUp: true, skipped: 0) }
            if onTime { out.append((latest, false, 0)) }
            return out
        }
    }

    private static func scheduleMonotonic() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

    // MARK: public

    /// Every plugin's jobs (loaded plugins first, then names with jobs but no loaded plugin).
    public func schedules() -> [PluginSchedules] {
        var out: [PluginSchedules] = []
        var seen: Set<String> = []
        for plugin in ordered where !seen.contains(plugin.name) {
            seen.insert(plugin.name)
            let jobs = scheduleJobs(plugin.name).values.sorted { ($0.due, $0.id) < ($1.due, $1.id) }
            if !jobs.isEmpty { out.append(PluginSchedules(plugin: plugin.name, loaded: true, jobs: jobs)) }
        }
        for name in (try? store.schedulePlugins()) ?? [] where !seen.contains(name) {
            let jobs = scheduleJobs(name).values.sorted { ($0.due, $0.id) < ($1.due, $1.id) }
            if !jobs.isEmpty { out.append(PluginSchedules(plugin: name, loaded: false, jobs: jobs)) }
        }
        return out
    }

    /// Cancels one job; false when `plugin` has no job `id`.
    public func cancelSchedule(plugin: String, id: String) throws -> Bool {
        guard scheduleJobs(plugin)[id] != nil else { return false }
        try store.deleteSchedule(plugin: plugin, id: id)
        env.schedules.remove(plugin, id)
        return true
    }
}
