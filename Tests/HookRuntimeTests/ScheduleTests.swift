import Foundation
import IMCore
import XCTest

@testable import HookRuntime

/// `ctx.schedule`: cron parsing and time zones, jobs persisted across reloads and restarts, the missed-run
/// policies, list and cancel, and the caps.
final class ScheduleTests: XCTestCase {
    private func iso(_ s: String) -> Double { ISO8601DateFormatter().date(from: s)!.timeIntervalSince1970 }

    private func next(_ expr: String, _ after: String, _ tz: String) throws -> String? {
        let zone = TimeZone(identifier: tz)!
        guard let t = try CronExpression(expr).next(after: iso(after), in: zone) else { return nil }
        let f = ISO8601DateFormatter()
        f.timeZone = zone
        return f.string(from: Date(timeIntervalSince1970: t))
    }

    /// Checks `next` for each row: (expression, after, time zone, the run expected).
    private func assertNextRuns(
        _ rows: [(String, String, String, String)], file: StaticString = #filePath, line: UInt = #line
    ) throws {
        for (expr, after, tz, expected) in rows {
            XCTAssertEqual(try next(expr, after, tz), expected, "'\(expr)' after \(after) in \(tz)", file: file, line: line)
        }
    }

    func testCronFieldsNamesStepsAndShortcuts() throws {
        XCTAssertNotNil(TimeZone(identifier: "Asia/Shanghai"), "the system's tz database (/usr/share/zoneinfo)")
        try assertNextRuns([
            // Friday 18:00 in Shanghai: the next weekday 09:00 is Monday.
            ("0 9 * * MON-FRI", "2026-11-27T18:00:00+08:00", "Asia/Shanghai", "2026-11-30T09:00:00+08:00"),
            ("0 9 * * 1-5", "2026-11-30T08:59:00+08:00", "Asia/Shanghai", "2026-11-30T09:00:00+08:00"),
            ("*/15 * * * *", "2026-11-30T09:00:00Z", "UTC", "2026-11-30T09:15:00Z"),
            ("5,35 10-12/2 * * *", "2026-11-30T10:40:00Z", "UTC", "2026-11-30T12:05:00Z"),
            ("0 0 1 JAN *", "2026-11-30T09:00:00Z", "UTC", "2027-01-01T00:00:00Z"),
            ("@daily", "2026-11-30T09:00:00Z", "UTC", "2026-12-01T00:00:00Z"),
            ("@weekly", "2026-11-30T09:00:00Z", "UTC", "2026-12-06T00:00:00Z"),
            ("@hourly", "2026-11-30T09:00:00Z", "UTC", "2026-11-30T10:00:00Z"),
            // Both day fields restricted: either matches (the 13th, or a Friday).
            ("0 0 13 * FRI", "2026-11-30T00:00:00Z", "UTC", "2026-12-04T00:00:00Z"),
            ("0 0 * * 7", "2026-11-30T00:00:00Z", "UTC", "2026-12-06T00:00:00Z"),
            // 29 February: the next leap year.
            ("0 12 29 2 *", "2026-11-30T00:00:00Z", "UTC", "2028-02-29T12:00:00Z"),
        ])
        XCTAssertNil(try CronExpression("0 0 30 2 *").next(after: 0, in: TimeZone(identifier: "UTC")!))

        for (bad, says) in [
            ("0 25 * * *", "hour field '25': 25 is out of range 0-23"),
            ("0 9 * * MON-FRX", "day of week field 'MON-FRX': 'FRX' is not a number"),
            ("61 * * * *", "minute field"), ("* * 0 * *", "day of month field"), ("* * * 13 *", "month field"),
            ("* * *", "expected 5 fields"), ("@often", "unknown shortcut"), ("*/0 * * * *", "step '0'"),
            ("5-1 * * * *", "runs backwards"),
        ] {
            XCTAssertThrowsError(try CronExpression(bad), bad) { e in
                XCTAssertTrue("\(e)".contains(says), "\(bad): \(e)")
            }
        }
    }

    func testDaylightSavingTimeInNewYork() throws {
        try assertNextRuns([
            // 2026-03-08: 02:00 EST becomes 03:00 EDT; 02:30 does not exist and runs at the change.
            ("30 2 * * *", "2026-03-08T00:00:00-05:00", "America/New_York", "2026-03-08T03:00:00-04:00"),
            ("0 9 * * *", "2026-03-08T00:00:00-05:00", "America/New_York", "2026-03-08T09:00:00-04:00"),
            // 2026-11-01: 02:00 EDT becomes 01:00 EST; 01:30 happens twice and runs at the first.
            ("30 1 * * *", "2026-11-01T00:00:00-04:00", "America/New_York", "2026-11-01T01:30:00-04:00"),
            ("30 1 * * *", "2026-11-01T01:30:00-04:00", "America/New_York", "2026-11-02T01:30:00-05:00"),
            // Every half hour also runs in the repeated hour.
            ("*/30 * * * *", "2026-11-01T01:30:00-04:00", "America/New_York", "2026-11-01T01:00:00-05:00"),
            // Shanghai has no DST: 09:00 is 01:00Z every day.
            ("0 9 * * *", "2026-07-01T02:00:00Z", "Asia/Shanghai", "2026-07-02T09:00:00+08:00"),
        ])
    }

    /// A plugin that schedules on command and records its runs in state.
    private let recorder = #"""
        return {
          on_receive = function(msg, ctx)
            local kind, spec, opts = msg.text:match("^(%a+) (.-) | (.*)$")
            if kind then
              local o = load("return " .. opts)()
              local ok, id = pcall(ctx.schedule[kind], tonumber(spec) or spec, "tick", { who = msg.from, n = 1 }, o)
              ctx.reply(ok and ("id " .. id) or ("error " .. id))
            elseif msg.text == "list" then
              local out = {}
              for _, j in ipairs(ctx.schedule.list()) do out[#out + 1] = j.id .. "=" .. j.kind .. ":" .. j.fn .. "@" .. j.next end
              ctx.reply(table.concat(out, ","))
            elseif msg.text:match("^cancel ") then
              ctx.reply(tostring(ctx.schedule.cancel(msg.text:sub(8))))
            end
          end,
          schedules = {
            tick = function(data, ctx, info)
              ctx.send("c1", ("%s %s %d catch_up=%s late=%d"):format(data.who, info.id, math.floor(info.scheduled), tostring(info.catch_up), math.floor(info.late)))
            end,
          },
        }
        """#

    private func command(_ rt: PluginEngine, _ text: String) -> String {
        sentTexts(rt.receive(msg(text, from: "Tom")).actions).joined(separator: "\n")
    }

    func testJobsFireByNameAndSurviveReloadsAndRestarts() throws {
        let f = Fixture()
        f.clock.set(iso("2026-11-27T18:00:00+08:00"))
        f.write("r.lua", recorder)
        var rt: PluginEngine? = f.runtime(limits: testLimits)
        XCTAssertTrue(rt!.loadAll().errors.isEmpty)
        XCTAssertEqual(command(rt!, #"cron 0 9 * * MON-FRI | { tz = "Asia/Shanghai" }"#), "id 1")
        XCTAssertEqual(command(rt!, #"at 2026-11-28T10:00:00+08:00 | {}"#), "id 2")
        XCTAssertEqual(command(rt!, #"every 3600 | {}"#), "id 3")
        let monday = iso("2026-11-30T09:00:00+08:00")
        XCTAssertEqual(rt!.nextTimerDue, f.clock.now + 3600)

        // A hot reload (new source) keeps the jobs.
        f.write("r.lua", recorder + "\n-- v2\n")
        XCTAssertEqual(rt!.sync().reloaded, ["r"])
        f.clock.advance(by: 3600)
        XCTAssertEqual(sentTexts(rt!.fireDueTimers().actions), ["Tom 3 \(Int(f.clock.now)) catch_up=false late=0"])

        // A restart: a new engine on the same state file. The `at` job is due meanwhile.
        rt = nil
        let store2 = try HookStateStore(path: f.dbPath)
        rt = f.runtime(limits: testLimits, store: store2)
        XCTAssertTrue(rt!.loadAll().errors.isEmpty)
        XCTAssertEqual(
            command(rt!, "list").split(separator: ",").map { String($0.prefix(while: { $0 != "@" })) },
            ["3=every:tick", "2=at:tick", "1=cron:tick"])
        f.clock.set(iso("2026-11-28T10:00:30+08:00"))
        let fired = sentTexts(rt!.fireDueTimers().actions)
        // the hourly job missed 15 runs: skipped (default), only the one on time runs; the `at` job runs.
        XCTAssertEqual(fired.count, 2, "\(fired)")
        XCTAssertTrue(fired.contains("Tom 2 \(Int(iso("2026-11-28T10:00:00+08:00"))) catch_up=false late=30"), "\(fired)")
        XCTAssertFalse(command(rt!, "list").contains("2=at"), "an `at` job is gone once it ran")

        f.clock.set(monday)
        XCTAssertEqual(
            sentTexts(rt!.fireDueTimers().actions),
            ["Tom 3 \(Int(monday)) catch_up=false late=0", "Tom 1 \(Int(monday)) catch_up=false late=0"])
        XCTAssertEqual(rt!.schedules().first?.jobs.first(where: { $0.id == "1" })?.due, monday + 86_400)

        // Ids are never reused, even after a cancel.
        XCTAssertEqual(command(rt!, "cancel 3"), "true")
        XCTAssertEqual(command(rt!, "cancel 3"), "false")
        XCTAssertEqual(command(rt!, "every 60 | {}"), "id 4")
    }

    func testMissedRunPolicies() throws {
        let f = Fixture()
        let start = iso("2026-11-30T00:00:00Z")
        f.clock.set(start)
        f.write("r.lua", recorder)
        let rt = f.runtime(limits: testLimits)
        XCTAssertTrue(rt.loadAll().errors.isEmpty)
        XCTAssertEqual(command(rt, #"cron 0 * * * * | { missed = "skip" }"#), "id 1")
        XCTAssertEqual(command(rt, #"cron 0 * * * * | { missed = "once" }"#), "id 2")
        XCTAssertEqual(command(rt, #"cron 0 * * * * | { missed = "all", max_missed = 3 }"#), "id 3")
        XCTAssertEqual(command(rt, #"every 3600 | { missed = "all" }"#), "id 4")
        // Down for ten and a half hours: ten runs were missed and none is on time.
        f.clock.set(start + 10.5 * 3600)
        let fired = sentTexts(rt.fireDueTimers().actions)
        let by = Dictionary(grouping: fired) { $0.split(separator: " ")[1] }
        XCTAssertNil(by["1"], "skip: nothing")
        XCTAssertEqual(by["2"], ["Tom 2 \(Int(start + 36000)) catch_up=true late=1800"], "once: the latest")
        XCTAssertEqual(
            by["3"], [8, 9, 10].map { "Tom 3 \(Int(start) + $0 * 3600) catch_up=true late=\(Int(10.5 * 3600) - $0 * 3600)" },
            "all: the last max_missed")
        XCTAssertEqual(by["4"]?.count, 10, "all: up to the default cap of 10")
        XCTAssertEqual(rt.nextTimerDue, start + 11 * 3600)
        // Back on time: every policy runs the run that is due.
        f.clock.set(start + 11 * 3600 + 5)
        XCTAssertEqual(sentTexts(rt.fireDueTimers().actions).filter { $0.contains("catch_up=false") }.count, 4)
    }

    func testLocalTimesAndErrors() throws {
        let f = Fixture()
        f.clock.set(iso("2026-11-27T18:00:00+08:00"))
        f.write("r.lua", recorder)
        let rt = f.runtime(limits: testLimits)
        XCTAssertTrue(rt.loadAll().errors.isEmpty)
        // An ISO time without an offset is read in tz.
        XCTAssertEqual(command(rt, #"at 2026-11-28T09:00 | { tz = "Asia/Shanghai" }"#), "id 1")
        XCTAssertEqual(rt.schedules().first?.jobs.first?.due, iso("2026-11-28T09:00:00+08:00"))
        for (text, says) in [
            (#"cron 0 25 * * * | {}"#, "ctx.schedule.cron: hour field '25': 25 is out of range 0-23"),
            (#"cron 0 9 * * * | { tz = "Mars/Olympus" }"#, "unknown time zone 'Mars/Olympus'"),
            (#"cron 0 9 * * * | { missed = "maybe" }"#, #"missed must be "skip", "once" or "all""#),
            (#"cron 0 9 * * * | { max_missed = 1000 }"#, "max_missed must be an integer 1-100"),
            (#"cron 0 9 * * * | { colour = 1 }"#, "unknown option 'colour'"),
            (#"cron 0 0 30 2 * | {}"#, "never happens"),
            (#"at tomorrow | {}"#, "ISO 8601"),
            (#"every 0.5 | {}"#, "seconds must be 1-"),
            (#"cron 0 9 * * * | { id = "42" }"#, "id must be a name"),
        ] {
            XCTAssertTrue(command(rt, text).hasPrefix("error ") && command(rt, text).contains(says), "\(text): \(command(rt, text))")
        }
        f.write(
            "bad.lua",
            #"""
            return {
              on_receive = function(msg, ctx)
                if msg.text == "closure" then ctx.schedule.every(60, function() end) end
                if msg.text == "missing" then ctx.schedule.every(60, "nope") end
                if msg.text == "big" then ctx.schedule.every(60, "f", string.rep("x", 20000)) end
              end,
              f = function() end,
            }
            """#)
        XCTAssertTrue(rt.sync().errors.isEmpty)
        func error(_ text: String) -> String { rt.receive(msg(text)).errors.map { "\($0)" }.joined() }
        XCTAssertTrue(error("closure").contains("must be the name (a string) of a function"), error("closure"))
        XCTAssertTrue(error("missing").contains("the plugin has no function 'nope'"), error("missing"))
        XCTAssertTrue(error("big").contains("at most 16384"), error("big"))
    }

    func testDeclaredIdsKeepTheirTimeAndTheCapHolds() throws {
        let f = Fixture()
        f.clock.set(iso("2026-11-30T00:00:00Z"))
        f.write(
            "daily.lua",
            #"""
            return {
              on_load = function(ctx) ctx.schedule.every(86400, "digest", { cid = "c1" }, { id = "digest" }) end,
              on_receive = function(msg, ctx)
                if msg.text == "fill" then
                  for i = 1, 1000 do
                    local ok, err = pcall(ctx.schedule.at, 4102444800, "digest", { cid = "c2" })
                    if not ok then ctx.reply(i .. ": " .. err) return end
                  end
                end
              end,
              digest = function(data, ctx) ctx.send(data.cid, "digest") end,
            }
            """#)
        // A thousand persisted schedules in one hook call: a deadline of 2 s was too short on a loaded machine.
        var limits = testLimits
        limits.deadline = 30
        let rt = f.runtime(limits: limits)
        XCTAssertTrue(rt.loadAll().errors.isEmpty)
        f.clock.advance(by: 3600)
        // A reload runs on_load again: the declared job keeps its due time instead of starting over.
        f.write("daily.lua", try String(contentsOf: f.plugins.appendingPathComponent("daily.lua"), encoding: .utf8) + "\n")
        XCTAssertEqual(rt.sync().reloaded, ["daily"])
        XCTAssertEqual(rt.schedules().first?.jobs.map(\.id), ["digest"])
        XCTAssertEqual(rt.nextTimerDue, iso("2026-12-01T00:00:00Z"))
        let capped = sentTexts(rt.receive(msg("fill")).actions)
        XCTAssertEqual(capped.count, 1)
        XCTAssertTrue(capped.first.map { $0.hasPrefix("1000: ") && $0.contains("too many schedules (1000)") } ?? false, "\(capped)")
        f.clock.set(iso("2026-12-01T00:00:00Z"))
        XCTAssertTrue(sentTexts(rt.fireDueTimers().actions).contains("digest"))
    }
}
