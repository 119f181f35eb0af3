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
