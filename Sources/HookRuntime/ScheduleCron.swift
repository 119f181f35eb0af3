import Foundation
import IMCore

/// A five-field cron expression (`minute hour day-of-month month day-of-week`) and the times it names in
/// one time zone.
///
/// Written here because the local package mirror has no cron library (and the common Swift ones either
/// ignore time zones or use the process's). Fields take `*`, numbers, ranges `a-b`, steps `*/n`, `a-b/n`,
/// `a/n`, lists `a,b,c`, month names (`JAN`…`DEC`) and day names (`SUN`…`SAT`, 0 and 7 both Sunday);
/// `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight` and `@hourly` stand for their
/// usual expressions. As in Vixie cron, when both day fields are restricted a day matches either.
///
/// Local wall-clock times are walked as plain numbers (no `Calendar` in the loop) and turned into instants
/// through the system's tz database (`TimeZone(identifier:)`): a time that does not exist on a day clocks
/// spring forward runs at the change; a time that happens twice when clocks fall back runs at its first
/// occurrence (a job that names every minute or hour also runs in the repeated hour).
struct CronExpression: Sendable, Hashable {
    let source: String
    let minutes: UInt64
    let hours: UInt64
    let days: UInt64
    let months: UInt64
    let weekdays: UInt64
    let daysRestricted: Bool
    let weekdaysRestricted: Bool

    struct ParseError: Error, CustomStringConvertible {
        var description: String
    }

    private static let shortcuts: [String: String] = [
        "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
        "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
    ]
    private static let monthNames = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
    private static let dayNames = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]

    init(_ text: String) throws {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        source = trimmed
        var expanded = trimmed
        if trimmed.hasPrefix("@") {
            guard let e = Self.shortcuts[trimmed.lowercased()] else {
                throw ParseError(
                    description: "unknown shortcut '\(trimmed)' (use @yearly, @monthly, @weekly, @daily or @hourly)")
            }
            expanded = e
        }
        let fields = expanded.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard fields.count == 5 else {
            throw ParseError(
                description:
                    "expected 5 fields (minute hour day-of-month month day-of-week), got \(fields.count) in '\(trimmed)'")
        }
        minutes = try Self.field(fields[0], name: "minute", 0, 59, names: nil)
        hours = try Self.field(fields[1], name: "hour", 0, 23, names: nil)
        days = try Self.field(fields[2], name: "day of month", 1, 31, names: nil)
        months = try Self.field(fields[3], name: "month", 1, 12, names: Self.monthNames, nameBase: 1)
        var dow = try Self.field(fields[4], name: "day of week", 0, 7, names: Self.dayNames)
        if dow & (1 << 7) != 0 { dow |= 1 }
        weekdays = dow & 0x7F
        daysRestricted = fields[2] != "*" && fields[2] != "?"
        weekdaysRestricted = fields[4] != "*" && fields[4] != "?"
    }

    private static func field(
        _ text: String, name: String, _ lo: Int, _ hi: Int, names: [String]?, nameBase: Int = 0
    ) throws -> UInt64 {
        func value(_ s: Substring) throws -> Int {
            if let n = Int(s) {
                guard n >= lo, n <= hi else {
                    throw ParseError(description: "\(name) field '\(text)': \(n) is out of range \(lo)-\(hi)")
                }
                return n
            }
            if let names, let i = names.firstIndex(of: s.uppercased()) { return i + nameBase }
            let hint = names.map { " or a name (\($0.first!)…\($0.last!))" } ?? ""
            throw ParseError(description: "\(name) field '\(text)': '\(s)' is not a number \(lo)-\(hi)\(hint)")
        }
        var bits: UInt64 = 0
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            guard !part.isEmpty else { throw ParseError(description: "\(name) field '\(text)': empty list item") }
            let pieces = part.split(separator: "/", omittingEmptySubsequences: false)
            guard pieces.count <= 2 else { throw ParseError(description: "\(name) field '\(text)': more than one '/'") }
            var step = 1
            if pieces.count == 2 {
                guard let s = Int(pieces[1]), s >= 1, s <= hi - lo + 1 else {
                    throw ParseError(
                        description: "\(name) field '\(text)': step '\(pieces[1])' must be a number 1-\(hi - lo + 1)")
                }
                step = s
            }
            let range = pieces[0]
            var first = lo
            var last = hi
            if range == "*" || range == "?" {
            } else if let dash = range.firstIndex(of: "-") {
                first = try value(range[range.startIndex..<dash])
                last = try value(range[range.index(after: dash)...])
                guard first <= last else {
                    throw ParseError(description: "\(name) field '\(text)': range \(range) runs backwards")
                }
            } else {
                first = try value(range)
                if pieces.count == 1 { last = first }
            }
            var v = first
            while v <= last {
                bits |= 1 << UInt64(v)
                v += step
            }
        }
        return bits
    }

    private func matchesDay(year: Int, month: Int, day: Int) -> Bool {
        let dom = days & (1 << UInt64(day)) != 0
        let dow = weekdays & (1 << UInt64(CivilTime.weekday(year: year, month: month, day: day))) != 0
        if daysRestricted && weekdaysRestricted { return dom || dow }
        return dom && dow
    }

    /// The first time this expression names strictly after `after` (epoch seconds), in `zone`; nil when
    /// there is none within about eight years (e.g. `0 0 30 2 *`).
    func next(after: Double, in zone: TimeZone) -> Double? {
        let first = walk(from: CivilTime(epoch: after, zone: zone), after: after, in: zone)
        // Clocks falling back before that: the wall clock repeats from the change on, so walk from there too.
        if let change = zone.nextDaylightSavingTimeTransition(after: Date(timeIntervalSince1970: after))?
            .timeIntervalSince1970, change < (first ?? .infinity),
            zone.secondsFromGMT(for: Date(timeIntervalSince1970: change))
                < zone.secondsFromGMT(for: Date(timeIntervalSince1970: change - 1)),
            let again = walk(from: CivilTime(epoch: change, zone: zone), after: after, in: zone)
        {
            return min(first ?? again, again)
        }
        return first
    }

    /// Walks wall-clock minutes from `start` to the first that matches and happens after `after`. The second
    /// occurrence of a repeated time counts only when every hour matches (as in Vixie cron).
    private func walk(from start: CivilTime, after: Double, in zone: TimeZone) -> Double? {
        var w = start
        w.second = 0
        let lastYear = w.year + 8
        let everyHour = hours == (1 << 24) - 1
        var steps = 0
        while steps < 200_000 && w.year <= lastYear {
            steps += 1
            if months & (1 << UInt64(w.month)) == 0 {
                w.month += 1
                if w.month > 12 { (w.month, w.year) = (1, w.year + 1) }
                (w.day, w.hour, w.minute) = (1, 0, 0)
                continue
            }
            if !matchesDay(year: w.year, month: w.month, day: w.day) {
                w.addDays(1)
                (w.hour, w.minute) = (0, 0)
                continue
            }
            if hours & (1 << UInt64(w.hour)) == 0 {
                w.addHours(1)
                w.minute = 0
                continue
            }
            if minutes & (1 << UInt64(w.minute)) == 0 {
                w.addMinutes(1)
                continue
            }
            for (k, t) in w.instants(in: zone).enumerated() where t > after && (k == 0 || everyHour) { return t }
            w.addMinutes(1)
        }
        return nil
    }
}

/// A local wall-clock time as plain numbers, and the instants it stands for in a time zone.
struct CivilTime: Sendable, Hashable {
    var year: Int
    var month: Int
    var day: Int
    var hour: Int
    var minute: Int
    var second: Int

    init(year: Int, month: Int, day: Int, hour: Int = 0, minute: Int = 0, second: Int = 0) {
        (self.year, self.month, self.day, self.hour, self.minute, self.second) = (year, month, day, hour, minute, second)
    }

    /// The wall-clock time at `epoch` in `zone`.
    init(epoch: Double, zone: TimeZone) {
        let offset = zone.secondsFromGMT(for: Date(timeIntervalSince1970: epoch))
        let local = Int((epoch + Double(offset)).rounded(.down))
        let days = Self.floorDiv(local, 86_400)
        let rest = local - days * 86_400
        let (y, m, d) = Self.civil(fromDays: days)
        self.init(year: y, month: m, day: d, hour: rest / 3600, minute: rest % 3600 / 60, second: rest % 60)
    }

    /// Seconds since 1970-01-01 00:00 of this wall time read as if it were UTC.
    var naive: Int { Self.days(year: year, month: month, day: day) * 86_400 + hour * 3600 + minute * 60 + second }

    /// The instants this wall time happens at in `zone`, earliest first: one usually, two when clocks fall
    /// back over it, and when clocks spring forward over it the instant of the change.
    func instants(in zone: TimeZone) -> [Double] {
        let w = Double(naive)
        var offsets: [Int] = []
        for probe in [w - 86_400, w, w + 86_400] {
            let o = zone.secondsFromGMT(for: Date(timeIntervalSince1970: probe))
            if !offsets.contains(o) { offsets.append(o) }
        }
        var found: [Double] = []
        for o in offsets {
            let t = w - Double(o)
            if zone.secondsFromGMT(for: Date(timeIntervalSince1970: t)) == o, !found.contains(t) { found.append(t) }
        }
        if found.isEmpty {
            // In a gap: the change happens between the two readings.
            let lo = w - Double(offsets.max() ?? 0)
            if let change = zone.nextDaylightSavingTimeTransition(after: Date(timeIntervalSince1970: lo - 1)) {
                found.append(change.timeIntervalSince1970)
            }
        }
        return found.sorted()
    }

    mutating func addDays(_ n: Int) {
        let (y, m, d) = Self.civil(fromDays: Self.days(year: year, month: month, day: day) + n)
        (year, month, day) = (y, m, d)
    }

    mutating func addHours(_ n: Int) {
        hour += n
        while hour >= 24 {
            hour -= 24
            addDays(1)
        }
    }

    mutating func addMinutes(_ n: Int) {
        minute += n
        while minute >= 60 {
            minute -= 60
            addHours(1)
        }
    }

    static func floorDiv(_ a: Int, _ b: Int) -> Int { a >= 0 ? a / b : -((-a + b - 1) / b) }

    /// Days since 1970-01-01 of a proleptic Gregorian date (IMCore's CivilDays).
    static func days(year: Int, month: Int, day: Int) -> Int { CivilDays.days(year: year, month: month, day: day) }

    static func civil(fromDays days: Int) -> (Int, Int, Int) { CivilDays.civil(fromDays: days) }

    /// 0 = Sunday … 6 = Saturday.
    static func weekday(year: Int, month: Int, day: Int) -> Int {
        let d = days(year: year, month: month, day: day)
        return ((d % 7) + 7 + 4) % 7
    }

    /// Parses `YYYY-MM-DD[Thh:mm[:ss]][Z|±hh:mm|±hhmm]` (a space may stand for `T`). Returns the epoch
    /// seconds when the text names an offset, else the wall time for the caller to place in a zone.
    static func parseISO(_ text: String) -> (wall: CivilTime, offset: Int?)? {
        let u = Array(text.trimmingCharacters(in: .whitespaces).utf8)
        var i = 0
        func digits(_ n: Int) -> Int? {
            guard i + n <= u.count else { return nil }
            var v = 0
            for k in 0..<n {
                let c = u[i + k]
                guard c >= 0x30, c <= 0x39 else { return nil }
                v = v * 10 + Int(c - 0x30)
            }
            i += n
            return v
        }
        func expect(_ c: UInt8) -> Bool {
            guard i < u.count, u[i] == c else { return false }
            i += 1
            return true
        }
        guard let y = digits(4), expect(0x2D), let mo = digits(2), expect(0x2D), let d = digits(2) else { return nil }
        guard (1...12).contains(mo), d >= 1, d <= daysIn(year: y, month: mo) else { return nil }
        var wall = CivilTime(year: y, month: mo, day: d)
        if i < u.count, u[i] == 0x54 || u[i] == 0x20 {
            i += 1
            guard let h = digits(2), expect(0x3A), let mi = digits(2), h < 24, mi < 60 else { return nil }
            (wall.hour, wall.minute) = (h, mi)
            if expect(0x3A) {
                guard let s = digits(2), s < 60 else { return nil }
                wall.second = s
                if expect(0x2E) { while i < u.count, u[i] >= 0x30, u[i] <= 0x39 { i += 1 } }
            }
        }
        if i == u.count { return (wall, nil) }
        if u[i] == 0x5A, i + 1 == u.count { return (wall, 0) }
        guard u[i] == 0x2B || u[i] == 0x2D else { return nil }
        let sign = u[i] == 0x2D ? -1 : 1
        i += 1
        guard let oh = digits(2) else { return nil }
        _ = expect(0x3A)
        guard let om = digits(2), i == u.count, oh <= 18, om < 60 else { return nil }
        return (wall, sign * (oh * 3600 + om * 60))
    }

    static func daysIn(year: Int, month: Int) -> Int {
        days(year: month == 12 ? year + 1 : year, month: month == 12 ? 1 : month + 1, day: 1)
            - days(year: year, month: month, day: 1)
    }
}
