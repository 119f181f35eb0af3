/// Days since 1970-01-01 ↔ proleptic Gregorian dates, exact integer arithmetic (Howard Hinnant's
/// days-from-civil algorithms, public domain). Written by hand because Foundation's `Calendar` is slow on the
/// hot paths that need it (every protobuf date LeanCloudDate encodes, every cron step of a schedule) and
/// answers in floating-point `Date`s; one copy for IMProto's LeanCloudDate and HookRuntime's ScheduleCron.
public enum CivilDays {
    /// `a / b` rounded towards negative infinity (`b > 0`).
    @inline(__always) static func floorDiv(_ a: Int, _ b: Int) -> Int { a >= 0 ? a / b : -((-a + b - 1) / b) }

    /// Days since 1970-01-01 of `year`-`month`-`day` (month 1–12).
    public static func days(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = floorDiv(y, 400)
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The date `days` days after 1970-01-01.
    public static func civil(fromDays days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = floorDiv(z, 146_097)
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }
}
