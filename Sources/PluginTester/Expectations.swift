import Foundation
import HookRuntime
import IMCore

/// Compares a step's expectations with what happened and explains the differences.
///
/// * scalar keys (`verdict`, `reason`, `code`, `silent`, `text`, `translation`, `ignored`) must be equal;
/// * list keys (`replies`, `transients`, `commands`, `actions`, `dropped`, `logs`, `errors`, `http`) must
///   have as many items as expected, each matching in order. A string item matches a reply's `text` (a
///   log or error line by substring, an HTTP call by its `url`); a table item matches when its fields do (`match` = Lua pattern on `text`,
///   `contains` = substring of `text`); fields not mentioned are not checked;
/// * `pushes` (after an `offline` step) maps every receiver to `false` (no push), `true` (a push) or the
///   fields its notification must have;
/// * `state` maps keys of the first plugin's state to values, `state_of` does the same per plugin,
///   `absent` lists keys that must not exist.
struct Expectations {
    static let scalarKeys = ["verdict", "reason", "code", "silent", "text", "translation", "ignored"]
    static let listKeys = ["replies", "transients", "commands", "actions", "dropped", "logs", "errors", "http"]
    static let keys = scalarKeys + listKeys + ["state", "state_of", "absent", "pushes"]

    let lua: LuaDataSandbox

    /// Failure explanations (empty when everything matched). Hook errors fail a step unless `errors` is expected.
    func check(
        _ expect: [String: JSONValue], actual: [String: JSONValue],
        state: (String?, String) -> JSONValue?, mainPlugin: String
    ) -> [String] {
        var failures: [String] = []
        for key in Self.scalarKeys where expect[key] != nil {
            let want = expect[key]!
            let got = actual[key] ?? .null
            if want == Scenario.absent ? got != .null : !Self.equal(want, got) {
                failures.append("\(key): expected \(Render.lua(want)), got \(Render.lua(got))")
            }
        }
        var listKeys = Self.listKeys.filter { expect[$0] != nil }
        if expect["errors"] == nil, let errs = actual["errors"]?.arrayValue, !errs.isEmpty {
            listKeys.append("errors")
        }
        for key in listKeys {
            let want = expect[key].flatMap { $0.arrayValue ?? (Scenario.objectOrEmpty($0) != nil ? [] : [$0]) } ?? []
            let got = actual[key]?.arrayValue ?? []
            if let diff = listDiff(key: key, want: want, got: got) { failures.append(diff) }
        }
        if let want = expect["pushes"] { failures += Self.checkPushes(want, actual["pushes"]) }
        var stateChecks: [(String?, String, JSONValue)] = []
        if let s = expect["state"].flatMap(Scenario.objectOrEmpty) {
            stateChecks += s.sorted { $0.key < $1.key }.map { (nil, $0.key, $0.value) }
        }
        if let per = expect["state_of"].flatMap(Scenario.objectOrEmpty) {
            for (plugin, values) in per.sorted(by: { $0.key < $1.key }) {
                for (k, v) in (Scenario.objectOrEmpty(values) ?? [:]).sorted(by: { $0.key < $1.key }) {
                    stateChecks.append((plugin, k, v))
                }
            }
        }
        for (plugin, key, want) in stateChecks {
            let got = state(plugin, key)
            if want == Scenario.absent {
                if let got { failures.append("state \(plugin ?? mainPlugin).\(key): expected nil, got \(Render.lua(got))") }
            } else if got == nil || !Self.matches(want, got!) {
                failures.append("state \(plugin ?? mainPlugin).\(key): expected \(Render.lua(want)), got \(got.map(Render.lua) ?? "nil")")
            }
        }
        for key in expect["absent"]?.arrayValue ?? [] {
            guard let k = key.stringValue else { continue }
            if let got = state(nil, k) { failures.append("state \(mainPlugin).\(k): expected nil, got \(Render.lua(got))") }
        }
        return failures
    }

    /// A diff of the expected and actual lists, or nil when they match. Matched items are aligned by
    /// a longest common subsequence so that one missing or extra item shows as one line.
    private func listDiff(key: String, want: [JSONValue], got: [JSONValue]) -> String? {
        let textKey = ["logs", "errors"].contains(key) ? nil : key == "http" ? "url" : "text"
        let substring = textKey == nil
        func ok(_ w: JSONValue, _ g: JSONValue) -> Bool { itemMatches(w, g, textKey: textKey, substring: substring) }
        if want.count == got.count && zip(want, got).allSatisfy({ ok($0, $1) }) { return nil }
        let n = want.count
        let m = got.count
        var lcs = Array(repeating: Array(repeating: 0, count: m + 1), count: n + 1)
        for i in stride(from: n - 1, through: 0, by: -1) {
            for j in stride(from: m - 1, through: 0, by: -1) {
                lcs[i][j] = ok(want[i], got[j]) ? lcs[i + 1][j + 1] + 1 : max(lcs[i + 1][j], lcs[i][j + 1])
            }
        }
        var lines = ["\(key): (- expected, + actual)"]
        var i = 0
        var j = 0
        while i < n || j < m {
            if i < n, j < m, ok(want[i], got[j]), lcs[i][j] == lcs[i + 1][j + 1] + 1 {
                lines.append("      \(Render.lua(got[j]))")
                i += 1
                j += 1
            } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
                lines.append("    - \(Render.lua(want[i]))")
                i += 1
            } else {
                lines.append("    + \(Render.lua(got[j]))")
                j += 1
            }
        }
        return lines.joined(separator: "\n")
    }

    private func itemMatches(_ want: JSONValue, _ got: JSONValue, textKey: String?, substring: Bool) -> Bool {
        if case .string(let s) = want {
            if substring, let g = got.stringValue { return g.contains(s) }
            if let textKey, let g = got[textKey]?.stringValue { return g == s }
            return got.stringValue == s
        }
        guard case .object(let w) = want else { return Self.equal(want, got) }
        let text = got["text"]?.stringValue ?? got.stringValue ?? ""
        for (k, v) in w {
            switch k {
            case "match":
                guard let p = v.stringValue, (try? lua.matches(text, pattern: p)) == true else { return false }
            case "contains":
                guard let p = v.stringValue, text.contains(p) else { return false }
            default:
                guard let g = got[k], Self.matches(v, g) else { return false }
            }
        }
        return true
    }

    /// Expected tables match when their fields do (extra actual fields are fine); lists item by item.
    static func matches(_ want: JSONValue, _ got: JSONValue) -> Bool {
        switch (want, got) {
        case (.object(let w), .object(let g)):
            return w.allSatisfy { k, v in g[k].map { matches(v, $0) } ?? (v == .null) }
        case (.array(let w), .array(let g)):
            return w.count == g.count && zip(w, g).allSatisfy { matches($0, $1) }
        case (.array(let w), .object(let g)) where w.isEmpty:
            return g.isEmpty
        default:
            return equal(want, got)
        }
    }

    /// `pushes`: the same receivers; each `false` (no push), `true` (a push) or a table its notification matches.
    static func checkPushes(_ want: JSONValue, _ got: JSONValue?) -> [String] {
        guard let got = got?.objectValue else { return ["pushes: expected \(Render.lua(want)), but the step had no offline event"] }
        guard let want = Scenario.objectOrEmpty(want) else { return ["pushes must map receivers to false, true or a table"] }
        var failures: [String] = []
        for receiver in Set(want.keys).union(got.keys).sorted() {
            let expected = want[receiver]
            let actual = got[receiver]
            let ok: Bool =
                switch (expected, actual) {
                case (nil, _), (_, nil): false
                case (.bool(false)?, let actual?): actual == .bool(false)
                case (.bool(true)?, let actual?): actual != .bool(false)
                case (let expected?, let actual?): actual != .bool(false) && matches(expected, actual)
                }
            if !ok {
                let want = expected.map(Render.lua) ?? "no receiver"
                failures.append("pushes.\(receiver): expected \(want), got \(actual.map(Render.lua) ?? "no receiver")")
            }
        }
        return failures
    }

    static func equal(_ a: JSONValue, _ b: JSONValue) -> Bool {
        if let x = a.doubleValue, let y = b.doubleValue { return x == y }
        switch (a, b) {
        case (.array(let x), .object(let y)) where x.isEmpty: return y.isEmpty
        case (.object(let x), .array(let y)) where y.isEmpty: return x.isEmpty
        case (.array(let x), .array(let y)): return x.count == y.count && zip(x, y).allSatisfy { equal($0, $1) }
        case (.object(let x), .object(let y)):
            return x.count == y.count && x.allSatisfy { k, v in y[k].map { equal(v, $0) } ?? false }
        default: return a == b
        }
    }
}

/// Renders data as Lua table constructors, the way scenario files write them.
enum Render {
    static func lua(_ v: JSONValue) -> String {
        switch v {
        case .null: return "nil"
        case Scenario.absent: return "nil"
        case .bool(let b): return b ? "true" : "false"
        case .int(let i): return String(i)
        case .double(let d): return d.rounded() == d && abs(d) < 1e15 ? String(Int(d)) : String(d)
        case .string(let s): return quote(s)
        case .array(let a): return "{" + a.map(lua).joined(separator: ", ") + "}"
        case .object(let o):
            let keys = o.keys.sorted { order($0) < order($1) || (order($0) == order($1) && $0 < $1) }
            return "{" + keys.map { key($0) + " = " + lua(o[$0]!) }.joined(separator: ", ") + "}"
        }
    }

    /// Common fields first, so that lines read naturally.
    private static func order(_ key: String) -> Int {
        ["kind": 0, "cid": 1, "user": 2, "text": 3, "type": 4, "action": 5][key] ?? 10
    }

    private static func key(_ k: String) -> String {
        let ident =
            k.first.map { $0.isLetter || $0 == "_" } == true && k.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
        return ident ? k : "[" + quote(k) + "]"
    }

    static func quote(_ s: String) -> String {
        var out = "\""
        for c in s.unicodeScalars {
            switch c {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            default:
                if c.value < 0x20 { out += "\\\(c.value)" } else { out.unicodeScalars.append(c) }
            }
        }
        return out + "\""
    }
}
