import CLua
import Foundation
import IMCore
import Logging
import LuaSandbox

// `ctx.schedule.cron / at / every / cancel / list / next / date`: the Lua side of schedules
// (PluginEngine+Schedules.swift keeps and fires them). Rules as in Callbacks.swift.

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
        return fail(L, "ctx.schedule: unknown kind")
    }
    let what = "ctx.schedule.\(kindName)"
    guard lua_type(L, 3) == LUA_TSTRING, let fn = luaString(L, 3) else {
        let got = lua_type(L, 3) == LUA_TFUNCTION ? "a function" : luaTypeName(L, 3)
        return fail(
            L,
            "\(what): the callback must be the name (a string) of a function in plugin.schedules or the plugin table, got \(got) (a closure cannot survive a reload or restart)"
        )
    }
    guard isValidScheduleName(fn) else { return fail(L, "\(what): invalid function name '\(fn)'") }
    guard plugin.hasScheduleFunction(fn) else {
        return fail(L, "\(what): the plugin has no function '\(fn)' (plugin.schedules.\(fn) or plugin.\(fn))")
    }
    var data: JSONValue = .null
    if lua_type(L, 4) != LUA_TNIL {
        do { data = try luaToJSON(L, 4, path: "data") } catch { return fail(L, "\(what): \(error)") }
        let size = data.jsonString().utf8.count
        guard size <= maxScheduleDataBytes else {
            return fail(L, "\(what): data is \(size) bytes as JSON; at most \(maxScheduleDataBytes)")
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
                return fail(L, "\(what): opts must be a table with names (tz, missed, max_missed, grace, id)")
            }
        } catch { return fail(L, "\(what): \(error)") }
    default: return fail(L, "\(what): opts must be a table, got \(luaTypeName(L, 5))")
    }
    let known: Set<String> = ["tz", "missed", "max_missed", "grace", "id"]
    if let bad = opts.keys.sorted().first(where: { !known.contains($0) }) {
        return fail(L, "\(what): unknown option '\(bad)' (tz, missed, max_missed, grace, id)")
    }
    var tz = "UTC"
    if let v = opts["tz"] {
        guard let s = v.stringValue, TimeZone(identifier: s) != nil else {
            return fail(L, "\(what): unknown time zone '\(v.stringValue ?? "\(v)")' (an IANA name like Asia/Shanghai)")
        }
        tz = s
    }
    let zone = TimeZone(identifier: tz)!
    var missed: ScheduleJob.Missed = kind == .at ? .once : .skip
    if let v = opts["missed"] {
        guard let s = v.stringValue, let m = ScheduleJob.Missed(rawValue: s) else {
            return fail(L, "\(what): missed must be \"skip\", \"once\" or \"all\"")
        }
        missed = m
    }
    var maxMissed = 10
    if let v = opts["max_missed"] {
        guard let n = v.intValue, n >= 1, n <= maxScheduleMissedRuns else {
            return fail(L, "\(what): max_missed must be an integer 1-\(maxScheduleMissedRuns)")
        }
        maxMissed = n
    }
    var grace = defaultScheduleGrace
    if let v = opts["grace"] {
        guard let d = v.doubleValue, d >= 0, d <= 86_400 else {
            return fail(L, "\(what): grace must be 0-86400 seconds")
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
            return fail(L, "\(what): the expression must be a string like \"0 9 * * MON-FRI\"")
        }
        do {
            let expr = try CronExpression(s)
            guard let n = expr.next(after: now, in: zone) else {
                return fail(L, "\(what): '\(s)' never happens")
            }
            spec = expr.source
            due = n
        } catch { return fail(L, "\(what): \(error)") }
    case .at:
        if lua_type(L, 2) == LUA_TNUMBER {
            let d = lua_tonumberx(L, 2, nil)
            guard d.isFinite, d > 0, d < 1e11 else { return fail(L, "\(what): time must be epoch seconds") }
            due = d
        } else if lua_type(L, 2) == LUA_TSTRING, let s = luaString(L, 2), let p = CivilTime.parseISO(s) {
            if let off = p.offset {
                due = Double(p.wall.naive - off)
            } else if let first = p.wall.instants(in: zone).first {
                due = first
            } else {
                return fail(L, "\(what): '\(s)' does not exist in \(tz)")
            }
        } else {
            return fail(
                L, "\(what): time must be epoch seconds or an ISO 8601 time like \"2026-11-30T09:00:00+08:00\"")
        }
        spec = Date(timeIntervalSince1970: due).formatted(.iso8601)
    case .every:
        guard lua_type(L, 2) == LUA_TNUMBER else { return fail(L, "\(what): seconds must be a number") }
        let s = lua_tonumberx(L, 2, nil)
        guard s.isFinite, s >= 1, s <= 400 * 86_400 else {
            return fail(L, "\(what): seconds must be 1-\(400 * 86_400)")
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
            return fail(L, "\(what): id must be a name (letters, digits, _ - . :; not a number), at most 64 bytes")
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
        return fail(L, "\(what): too many schedules (\(maxSchedulesPerPlugin)); cancel some first")
    }
    do {
        if id.isEmpty { id = String(try store.nextScheduleNumber(plugin: plugin.name)) }
        let job = ScheduleJob(
            id: id, kind: kind, spec: spec, fn: fn, data: data, tz: tz, missed: missed, maxMissed: maxMissed,
            grace: grace, due: due, interval: interval, created: created, runs: runs, lastRun: lastRun)
        try store.saveSchedule(plugin: plugin.name, job)
        book.put(plugin.name, job)
    } catch {
        return fail(L, "\(what): could not be stored: \(error)")
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
    default: return fail(L, "ctx.schedule.cancel: id (a string or number) expected, got \(luaTypeName(L, 1))")
    }
    let book = plugin.env.schedules
    guard book.jobs(plugin.name, store: plugin.env.store, logger: plugin.env.logger)[id] != nil else {
        lua_pushboolean(L, 0)
        return 1
    }
    do {
        try plugin.env.store.deleteSchedule(plugin: plugin.name, id: id)
    } catch { return fail(L, "ctx.schedule.cancel: \(error)") }
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
        return fail(L, "ctx.schedule.next: the expression must be a string like \"0 9 * * MON-FRI\"")
    }
    let zone: TimeZone
    switch scheduleZone(L, 2, "ctx.schedule.next") {
    case .success(let z): zone = z
    case .failure(let e): return fail(L, e.message)
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
    } catch { return fail(L, "ctx.schedule.next: \(error)") }
}

/// `ctx.schedule.date(t, tz)`: the wall-clock time of `t` in `tz` as `os.date("*t")` gives it (year,
/// month, day, hour, min, sec, wday with 1 = Sunday, offset in seconds).
let cbScheduleDate: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    var t = plugin.env.clock.now()
    if lua_type(L, 1) == LUA_TNUMBER { t = lua_tonumberx(L, 1, nil) }
    guard t.isFinite, abs(t) < 1e11 else { return fail(L, "ctx.schedule.date: time out of range") }
    let zone: TimeZone
    switch scheduleZone(L, 2, "ctx.schedule.date") {
    case .success(let z): zone = z
    case .failure(let e): return fail(L, e.message)
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
