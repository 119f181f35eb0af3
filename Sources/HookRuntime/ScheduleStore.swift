import Foundation
import GRDB
import IMCore

/// One persisted job of `ctx.schedule` (cron, at, every).
public struct ScheduleJob: Sendable, Hashable, Codable {
    public enum Kind: String, Sendable, Codable { case cron, at, every }
    /// What happens to runs that were due while the bot was down, the plugin disabled or over its share.
    public enum Missed: String, Sendable, Codable, CaseIterable { case skip, once, all }

    /// Stable id: a number the host counts per plugin ("1", "2", …) or the plugin's own `opts.id`.
    public var id: String
    public var kind: Kind
    /// The cron expression, the interval in seconds, or the time (ISO 8601) as given.
    public var spec: String
    /// The function called: `plugin.schedules[fn]`, else `plugin[fn]`.
    public var fn: String
    public var data: JSONValue
    /// The IANA time zone cron fields (and an `at` time without offset) are read in.
    public var tz: String
    public var missed: Missed
    /// With `missed = "all"`: the most catch-up runs made at once.
    public var maxMissed: Int
    /// A run this many seconds late is still on time (not a missed run).
    public var grace: Double
    /// The next time it is due (epoch seconds).
    public var due: Double
    public var interval: Double?
    public var created: Double
    public var runs: Int = 0
    public var lastRun: Double?
}

extension HookStateStore {
    /// The schedule tables (migration `hookruntime-v3-schedules`): jobs, and the per-plugin id counter so
    /// that an id is never handed out twice, even after its job was cancelled.
    static func createScheduleTables(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE plugin_schedules (
                    plugin TEXT NOT NULL,
                    id TEXT NOT NULL,
                    job TEXT NOT NULL,
                    due REAL NOT NULL,
                    PRIMARY KEY (plugin, id)
                ) WITHOUT ROWID;
                CREATE TABLE plugin_schedule_ids (
                    plugin TEXT PRIMARY KEY NOT NULL,
                    last INTEGER NOT NULL
                ) WITHOUT ROWID;
                """)
    }

    /// Every job of `plugin`.
    public func schedules(plugin: String) throws -> [ScheduleJob] {
        let rows = try pool.read { db in
            try String.fetchAll(db, sql: "SELECT job FROM plugin_schedules WHERE plugin = ?", arguments: [plugin])
        }
        let decoder = JSONDecoder()
        return rows.compactMap { try? decoder.decode(ScheduleJob.self, from: Data($0.utf8)) }
    }

    /// Names of the plugins that have jobs.
    public func schedulePlugins() throws -> [String] {
        try pool.read { db in try String.fetchAll(db, sql: "SELECT DISTINCT plugin FROM plugin_schedules ORDER BY plugin") }
    }

    func saveSchedule(plugin: String, _ job: ScheduleJob) throws {
        let text = String(decoding: try JSONEncoder().encode(job), as: UTF8.self)
        try pool.write { db in
            try db.execute(
                sql: """
                    INSERT INTO plugin_schedules (plugin, id, job, due) VALUES (?, ?, ?, ?)
                    ON CONFLICT (plugin, id) DO UPDATE SET job = excluded.job, due = excluded.due
                    """, arguments: [plugin, job.id, text, job.due])
        }
    }

    @discardableResult
    func deleteSchedule(plugin: String, id: String) throws -> Bool {
        try pool.write { db in
            try db.execute(sql: "DELETE FROM plugin_schedules WHERE plugin = ? AND id = ?", arguments: [plugin, id])
            return db.changesCount > 0
        }
    }

    /// The next number id of `plugin` (1, 2, …; never reused).
    func nextScheduleNumber(plugin: String) throws -> Int {
        try pool.write { db in
            try db.execute(
                sql: """
                    INSERT INTO plugin_schedule_ids (plugin, last) VALUES (?, 1)
                    ON CONFLICT (plugin) DO UPDATE SET last = last + 1
                    """, arguments: [plugin])
            return try Int.fetchOne(db, sql: "SELECT last FROM plugin_schedule_ids WHERE plugin = ?", arguments: [plugin])
                ?? 1
        }
    }
}
