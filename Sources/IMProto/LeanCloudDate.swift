import Foundation
import IMCore

/// Dates as LeanCloud's SDKs expect them: ISO 8601 in UTC with milliseconds
/// (`2025-11-21T04:40:00.000Z`), or `{"__type": "Date", "iso": …}` inside JSON documents.
enum LeanCloudDate {
    /// ISO 8601 text of a millisecond timestamp, computed exactly (no floating point).
    static func iso(_ millis: Int64) -> String {
        let (seconds, ms) = floorDivision(millis, 1000)
        let (days, secondOfDay) = floorDivision(seconds, 86_400)
        let (year, month, day) = civil(fromDays: days)
        let hour = secondOfDay / 3600
        let minute = secondOfDay % 3600 / 60
        let second = secondOfDay % 60
        func pad(_ value: Int64, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(hour, 2)):\(pad(minute, 2)):\(pad(second, 2)).\(pad(ms, 3))Z"
    }

    /// Milliseconds of an ISO 8601 UTC date (`YYYY-MM-DDTHH:MM:SS[.fff]Z`), or of a decimal number.
    static func millis(_ text: String) -> Int64? {
        if let number = Int64(text) { return number }
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes.last == UInt8(ascii: "Z") else { return nil }
        func number(_ range: Range<Int>) -> Int64? {
            guard range.upperBound <= bytes.count else { return nil }
            var value: Int64 = 0
            for byte in bytes[range] {
                guard byte >= 48, byte <= 57 else { return nil }
                value = value * 10 + Int64(byte - 48)
            }
            return value
        }
        guard bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: "T"),
            bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
            let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var ms: Int64 = 0
        if bytes.count > 20 {
            // Fraction: "." then 1–9 digits, then "Z".
            guard bytes[19] == UInt8(ascii: "."), bytes.count - 21 >= 1, bytes.count - 21 <= 9,
                let fraction = number(20..<(bytes.count - 1))
            else { return nil }
            let digits = bytes.count - 21
            ms = digits >= 3 ? fraction / pow10(digits - 3) : fraction * pow10(3 - digits)
        } else if bytes[19] != UInt8(ascii: "Z") {
            return nil
        }
        let days = days(fromCivil: year, month, day)
        return ((days * 86_400 + hour * 3600 + minute * 60 + second) * 1000) + ms
    }

    /// `{"__type": "Date", "iso": …}`.
    static func object(_ millis: Int64) -> JSONValue {
        .object(["__type": "Date", "iso": .string(iso(millis))])
    }

    /// Milliseconds of a JSON date: a number, an ISO string or a `__type: Date` object.
    static func millis(_ value: JSONValue) -> Int64? {
        switch value {
        case .int(let number): Int64(number)
        case .double(let number) where number.rounded() == number: Int64(exactly: number)
        case .string(let text): millis(text)
        case .object(let object): object["iso"]?.stringValue.flatMap(millis)
        default: nil
        }
    }

    private static func pow10(_ exponent: Int) -> Int64 {
        var value: Int64 = 1
        for _ in 0..<exponent { value *= 10 }
        return value
    }

    private static func floorDivision(_ a: Int64, _ b: Int64) -> (Int64, Int64) {
        let q = a / b
        let r = a % b
        return r < 0 ? (q - 1, r + b) : (q, r)
    }

    // Days since 1970 and dates both ways: IMCore's CivilDays (shared with the schedules' cron rules).
    private static func days(fromCivil y: Int64, _ m: Int64, _ d: Int64) -> Int64 {
        Int64(CivilDays.days(year: Int(y), month: Int(m), day: Int(d)))
    }

    private static func civil(fromDays days: Int64) -> (Int64, Int64, Int64) {
        let (y, m, d) = CivilDays.civil(fromDays: Int(days))
        return (Int64(y), Int64(m), Int64(d))
    }
}

/// Conversations in `convMessage.results`, shaped as LeanCloud's conversation objects: `objectId`,
/// `name`, `m`, `c`, `tr`, `unique`, `attr`, `mu`, `lm` as a `__type: Date` object, and `createdAt` /
/// `updatedAt` as ISO strings.
enum ConversationJSON {
    static func encode(_ info: ConversationInfo) -> JSONValue {
        var object: [String: JSONValue] = ["objectId": .string(info.objectId)]
        if let v = info.name { object["name"] = .string(v) }
        if let v = info.m { object["m"] = .array(v.map(JSONValue.string)) }
        if let v = info.c { object["c"] = .string(v) }
        if let v = info.tr { object["tr"] = .bool(v) }
        if let v = info.unique { object["unique"] = .bool(v) }
        if let attr = info.attr?.objectValue {
            // Custom attributes are top-level fields for the SDKs; the attribute `attr` is their `attr`.
            let fields = ConversationAttributes.fieldsForSDK(attr)
            for (key, value) in fields.topLevel { object[key] = value }
            if let v = fields.attr { object["attr"] = v }
        } else if let v = info.attr {
            object["attr"] = v
        }
        if let v = info.mu { object["mu"] = .array(v.map(JSONValue.string)) }
        if let v = info.lm { object["lm"] = LeanCloudDate.object(v) }
        if let v = info.createdAt { object["createdAt"] = .string(LeanCloudDate.iso(v)) }
        if let v = info.updatedAt { object["updatedAt"] = .string(LeanCloudDate.iso(v)) }
        if let v = info.ttl { object["ttl"] = .int(Int(v)) }
        return .object(object)
    }

    static func decode(_ value: JSONValue) -> ConversationInfo? {
        guard let object = value.objectValue, let id = object["objectId"]?.stringValue else { return nil }
        func strings(_ key: String) -> [String]? {
            object[key]?.arrayValue.map { $0.compactMap(\.stringValue) }
        }
        var info = ConversationInfo(objectId: id)
        info.name = object["name"]?.stringValue
        info.m = strings("m")
        info.c = object["c"]?.stringValue
        info.tr = object["tr"]?.boolValue
        info.unique = object["unique"]?.boolValue
        let attr = ConversationAttributes.attributesFromSDK(object)
        info.attr = object["attr"] != nil || !attr.isEmpty ? .object(attr) : nil
        info.mu = strings("mu")
        info.lm = object["lm"].flatMap(LeanCloudDate.millis)
        info.createdAt = object["createdAt"].flatMap(LeanCloudDate.millis)
        info.updatedAt = object["updatedAt"].flatMap(LeanCloudDate.millis)
        info.ttl = object["ttl"]?.intValue.map { Int(clamping: $0) }
        return info
    }
}
