import Foundation
import HookRuntime
import IMCore

/// A parsed `*.test.lua` file: which plugins to load, how the simulated host behaves, and the cases.
public struct Scenario: Sendable {
    public enum Mode: String, Sendable {
        /// The bot is the server's interceptor (`hookbot run` with its embedded server): moderation and
        /// `before_send` decide before delivery, and mutes are enforced.
        case interceptor
        /// The bot is an ordinary member: it moderates what it receives but cannot stop delivery.
        case client
    }

    public var path: String
    public var pluginsDirectory: URL
    /// Plugins copied into the sandbox directory; the first is the one `state` expectations read.
    public var plugins: [String]
    public var bot: String
    public var mode: Mode
    public var config: [String: JSONValue]
    public var translateTo: [String: String]
    public var replyLimit: Int
    public var replyWindow: Double
    public var maxHops: Int
    public var deadline: Double
    /// The bots' `[bot] locale` (`locale = "zh-CN"`; `en` by default): the plugins' language for members
    /// who chose none.
    public var locale: String
    /// More bots in the same conversations (`bots = { { id, plugins, config }, ... }`); they are ordinary
    /// members (never interceptors), and what any bot sends reaches all the others.
    public var bots: [Bot]
    public var cases: [TestCase]

    /// A bot of the scenario: its client id, the plugins it loads and their config.
    public struct Bot: Sendable {
        public var id: String
        public var plugins: [String]
        public var config: [String: JSONValue]
    }

    public struct TestCase: Sendable {
        public var name: String
        public var config: [String: JSONValue]
        public var translateTo: [String: String]
        public var mode: Mode
        /// Expectations on what loading the plugins did (`on_load` actions, logs, errors).
        public var expectLoad: [String: JSONValue]
        public var steps: [Step]
        /// Recorded HTTP responses by `"METHOD url"` (the file's, with the case's merged over them).
        public var http: [String: HookHTTPOutcome]
        /// Files stored on the simulated hub, by id (the file's, with the case's merged over them): a message
        /// whose `file.id` names one is filled from it as the server fills it, and `ctx.media` reads it.
        public var files: [String: ScenarioFile] = [:]
        /// The members the bots know when the case starts (the file's, with the case's merged over them).
        var members = ScenarioMembers()
    }

    /// A file stored on the simulated hub (`files = { [id] = { name = …, mime = …, size = …, content = …,
    /// sha256 = …, width = …, height = …, duration = …, format = … } }`).
    public struct ScenarioFile: Sendable {
        public var record: HookMediaRecord
        /// The bytes `ctx.media.read` returns; nil when the scenario gave none.
        public var content: [UInt8]?
    }

    public struct Step: Sendable {
        public enum Event: Sendable {
            case message(JSONValue)
            case transient(JSONValue)
            case cmd(JSONValue)
            case join(JSONValue)
            case leave(JSONValue)
            case invited(JSONValue)
            case kicked(JSONValue)
            case update(JSONValue)
            case recall(JSONValue)
            /// An edit of a message: the new version (`id` names the message edited).
            case edit(JSONValue)
            /// A member's click on a card's button (ScenarioCards.swift).
            case click(JSONValue)
            case advance(Double)
            /// The clock set to a time (epoch seconds) no earlier than now; schedules due on the way fire.
            case at(Double)
            case translate(JSONValue)
            /// Offline receivers of a message: `on_offline` decides their pushes.
            case offline(JSONValue)
            case reload
            case setState(plugin: String?, values: [String: JSONValue])
            case none
        }
        public var number: Int
        public var event: Event
        public var expect: [String: JSONValue]
    }

    /// What the scenario global `NIL` holds: it stands for "absent" in expectations (a Lua `nil` field
    /// would simply be missing).
    static let absentMarker = "\u{0}nil"
    static let absent = JSONValue.string(absentMarker)

    static let eventKeys = [
        "message", "transient", "cmd", "click", "join", "leave", "invited", "kicked", "update", "recall", "edit",
        "advance", "translate", "reload", "set_state", "offline", "at",
    ]

    /// Parses the data a scenario file returned. `defaultPlugin` is the file name without `.test.lua`.
    init(data: JSONValue, path: String, pluginsDirectory: URL, defaultPlugin: String) throws {
        guard case .object(let root) = data else { throw ScenarioError("a scenario file must return a table") }
        try Self.checkKeys(
            root,
            allowed: [
                "plugins", "bot", "mode", "config", "translate_to", "reply_limit",
                "reply_window", "max_hops", "deadline_ms", "bots", "http", "files", "cases", "members", "locale",
            ], at: "scenario")
        self.path = path
        self.pluginsDirectory = pluginsDirectory
        switch root["plugins"] {
        case nil: plugins = [defaultPlugin]
        case .string(let s)?: plugins = [s]
        case .array(let a)?: plugins = try a.map { try Self.string($0, "plugins[]") }
        default: throw ScenarioError("plugins must be a name or a list of names")
        }
        bot = try root["bot"].map { try Self.string($0, "bot") } ?? "modbot"
        let modeName = try root["mode"].map { try Self.string($0, "mode") } ?? "interceptor"
        guard let mode = Mode(rawValue: modeName) else { throw ScenarioError("mode must be \"interceptor\" or \"client\"") }
        self.mode = mode
        let main = plugins.first ?? defaultPlugin
        config = try Self.config(root["config"], main: main)
        translateTo = try Self.languages(root["translate_to"])
        replyLimit = try root["reply_limit"].map { try Self.int($0, "reply_limit") } ?? 30
        replyWindow = try root["reply_window"].map { try Self.number($0, "reply_window") } ?? 10
        maxHops = try root["max_hops"].map { try Self.int($0, "max_hops") } ?? 3
        deadline = try root["deadline_ms"].map { try Self.number($0, "deadline_ms") / 1000 } ?? 1
        let locale = try root["locale"].map { try Self.string($0, "locale") } ?? "en"
        guard let tag = LocaleTag.normalise(locale) else { throw ScenarioError("locale: '\(locale)' is not a locale tag (en, zh-CN …)") }
        self.locale = tag
        bots = try Self.bots(root["bots"], main: bot)
        let http = try Self.recordings(root["http"], at: "http")
        let files = try Self.files(root["files"], at: "files")
        let members = try ScenarioMembers(root["members"], at: "members")
        guard case .array(let list)? = root["cases"], !list.isEmpty else {
            throw ScenarioError("scenario needs a non-empty list `cases`")
        }
        var cases: [TestCase] = []
        for (i, item) in list.enumerated() {
            guard case .object(let c) = item else { throw ScenarioError("cases[\(i + 1)] must be a table") }
            try Self.checkKeys(
                c, allowed: ["name", "config", "translate_to", "mode", "expect_load", "steps", "http", "files", "members"],
                at: "cases[\(i + 1)]")
            let name = try c["name"].map { try Self.string($0, "cases[\(i + 1)].name") } ?? "case \(i + 1)"
            let own = try Self.config(c["config"], main: main)
            var steps: [Step] = []
            for (j, s) in (c["steps"]?.arrayValue ?? []).enumerated() {
                steps.append(try Self.step(s, number: j + 1, at: "\(name), step \(j + 1)"))
            }
            let caseMode =
                try c["mode"].map { v -> Mode in
                    guard let m = v.stringValue.flatMap(Mode.init(rawValue:)) else {
                        throw ScenarioError("\(name): mode must be \"interceptor\" or \"client\"")
                    }
                    return m
                } ?? mode
            let expectLoad =
                try c["expect_load"].map { v -> [String: JSONValue] in
                    guard let o = Self.objectOrEmpty(v) else { throw ScenarioError("\(name): expect_load must be a table") }
                    try Self.checkKeys(o, allowed: Expectations.keys, at: "\(name) expect_load")
                    return o
                } ?? [:]
            cases.append(
                TestCase(
                    name: name, config: Self.merge(config, own),
                    translateTo: translateTo.merging(try Self.languages(c["translate_to"])) { $1 },
                    mode: caseMode, expectLoad: expectLoad, steps: steps,
                    http: http.merging(try Self.recordings(c["http"], at: "\(name): http")) { $1 },
                    files: files.merging(try Self.files(c["files"], at: "\(name): files")) { $1 },
                    members: try ScenarioMembers(c["members"], at: "\(name): members").merged(over: members)))
        }
        self.cases = cases
    }

    private static func step(_ value: JSONValue, number: Int, at location: String) throws -> Step {
        guard case .object(let o) = value else { throw ScenarioError("\(location): a step must be a table") }
        try checkKeys(o, allowed: eventKeys + ["expect", "expect_state"], at: location)
        let present = eventKeys.filter { o[$0] != nil }
        guard present.count <= 1 else { throw ScenarioError("\(location): one event per step, got \(present.joined(separator: ", "))") }
        var expect: [String: JSONValue] = [:]
        if let e = o["expect"] {
            guard let obj = objectOrEmpty(e) else { throw ScenarioError("\(location): expect must be a table") }
            expect = obj
        }
        if let s = o["expect_state"] {
            guard objectOrEmpty(s) != nil else { throw ScenarioError("\(location): expect_state must be a table") }
            expect["state"] = s
        }
        try checkKeys(expect, allowed: Expectations.keys, at: "\(location) expect")
        let event: Step.Event
        switch present.first {
        case "message"?: event = .message(o["message"]!)
        case "transient"?: event = .transient(o["transient"]!)
        case "cmd"?: event = .cmd(o["cmd"]!)
        case "join"?: event = .join(o["join"]!)
        case "leave"?: event = .leave(o["leave"]!)
        case "invited"?: event = .invited(o["invited"]!)
        case "kicked"?: event = .kicked(o["kicked"]!)
        case "update"?: event = .update(o["update"]!)
        case "recall"?: event = .recall(o["recall"]!)
        case "edit"?: event = .edit(o["edit"]!)
        case "click"?: event = .click(o["click"]!)
        case "advance"?: event = .advance(try Self.duration(o["advance"]!, "\(location): advance"))
        case "at"?: event = .at(try Self.time(o["at"]!, "\(location): at"))
        case "translate"?: event = .translate(o["translate"]!)
        case "offline"?: event = .offline(o["offline"]!)
        case "reload"?: event = .reload
        case "set_state"?:
            guard case .object(var values)? = o["set_state"] else { throw ScenarioError("\(location): set_state must be a table") }
            let plugin = values.removeValue(forKey: "plugin")?.stringValue
            event = .setState(plugin: plugin, values: values)
        default: event = .none
        }
        return Step(number: number, event: event, expect: expect)
    }

    private static func bots(_ value: JSONValue?, main: String) throws -> [Bot] {
        guard let value else { return [] }
        guard let list = value.arrayValue ?? (objectOrEmpty(value)?.isEmpty == true ? [] : nil) else {
            throw ScenarioError("bots must be a list of { id = ..., plugins = ..., config = ... }")
        }
        var seen: Set<String> = [main]
        return try list.enumerated().map { index, item in
            let at = "bots[\(index + 1)]"
            guard let o = objectOrEmpty(item) else { throw ScenarioError("\(at) must be a table") }
            try checkKeys(o, allowed: ["id", "plugins", "config"], at: at)
            guard let id = o["id"]?.stringValue, !id.isEmpty else { throw ScenarioError("\(at).id must be a client id") }
            guard seen.insert(id).inserted else { throw ScenarioError("\(at).id '\(id)' is already a bot of this scenario") }
            let plugins: [String]
            switch o["plugins"] {
            case .string(let name)?: plugins = [name]
            case .array(let names)?: plugins = try names.map { try string($0, "\(at).plugins[]") }
            default: throw ScenarioError("\(at).plugins must be a name or a list of names")
            }
            guard let first = plugins.first else { throw ScenarioError("\(at).plugins is empty") }
            return Bot(id: id, plugins: plugins, config: try config(o["config"], main: first))
        }
    }

    /// `http = { ["GET https://…"] = { status = 200, body = "…" or a table (sent as JSON), headers = {…} },
    /// ["POST https://…"] = { error = "timeout: …" } }`.
    private static func recordings(_ value: JSONValue?, at location: String) throws -> [String: HookHTTPOutcome] {
        guard let value else { return [:] }
        guard let o = objectOrEmpty(value) else { throw ScenarioError("\(location) must map \"METHOD url\" to a response") }
        var out: [String: HookHTTPOutcome] = [:]
        for (key, response) in o {
            let parts = key.split(separator: " ", maxSplits: 1).map(String.init)
            guard parts.count == 2, parts[0] == parts[0].uppercased(), URL(string: parts[1])?.host != nil else {
                throw ScenarioError("\(location): '\(key)' must be \"METHOD url\", as in \"GET https://api.example.org/x\"")
            }
            guard let r = objectOrEmpty(response) else { throw ScenarioError("\(location)[\(key)] must be a table") }
            try checkKeys(r, allowed: ["status", "body", "headers", "error"], at: "\(location)[\(key)]")
            let body: String =
                switch r["body"] {
                case nil: ""
                case .string(let text)?: text
                case let table?: table.jsonString()
                }
            let headers = try (r["headers"].flatMap(objectOrEmpty) ?? [:]).mapValues { try string($0, "\(location)[\(key)].headers") }
            let error = try r["error"].map { try string($0, "\(location)[\(key)].error") }
            let status = try r["status"].map { try int($0, "\(location)[\(key)].status") } ?? (error == nil ? 200 : nil)
            out[key] = HookHTTPOutcome(status: status, headers: headers, body: body, error: error)
        }
        return out
    }

    /// `files = { [id] = { name, mime, size, content, sha256, format, width, height, duration } }`: `size` is
    /// the content's length when content is given; `sha256` is taken as given (`hookbot test` does not hash).
    private static func files(_ value: JSONValue?, at location: String) throws -> [String: ScenarioFile] {
        guard let value else { return [:] }
        guard let o = objectOrEmpty(value) else { throw ScenarioError("\(location) must map file ids to tables") }
        var out: [String: ScenarioFile] = [:]
        for (id, item) in o {
            let at = "\(location)[\(id)]"
            guard HookMedia.isValidID(id) else { throw ScenarioError("\(at): a file id is 1-64 letters, digits, - and _") }
            guard let f = objectOrEmpty(item) else { throw ScenarioError("\(at) must be a table") }
            try checkKeys(f, allowed: ["name", "mime", "size", "content", "sha256", "format", "width", "height", "duration"], at: at)
            let content = try f["content"].map { Array(try string($0, "\(at).content").utf8) }
            let name = try f["name"].map { try string($0, "\(at).name") } ?? "file"
            let sha = try f["sha256"].map { try string($0, "\(at).sha256") } ?? ""
            guard sha.isEmpty || (sha.count == 64 && sha.allSatisfy(\.isHexDigit)) else {
                throw ScenarioError("\(at).sha256 must be 64 hex digits")
            }
            let metadata = MediaMetadata(
                size: Int64(try f["size"].map { try int($0, "\(at).size") } ?? content?.count ?? 0), sha256: sha.lowercased(),
                mime: try f["mime"].map { try string($0, "\(at).mime") } ?? "application/octet-stream",
                format: try f["format"].map { try string($0, "\(at).format") },
                width: try f["width"].map { try int($0, "\(at).width") }, height: try f["height"].map { try int($0, "\(at).height") },
                duration: try f["duration"].map { try number($0, "\(at).duration") })
            let record = HookMediaRecord(
                id: id, url: "/media/\(id)/\(name.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? "file")",
                name: name, metadata: metadata)
            out[id] = ScenarioFile(record: record, content: content)
        }
        return out
    }

    /// `config` is either the main plugin's table, or `{ [plugin] = table, ... }` when every key names
    /// a plugin table under `plugins`.
    private static func config(_ value: JSONValue?, main: String) throws -> [String: JSONValue] {
        guard let value else { return [:] }
        guard let o = objectOrEmpty(value) else { throw ScenarioError("config must be a table") }
        if let plugins = o["plugins"]?.objectValue, o.count == 1 { return plugins }
        return [main: .object(o)]
    }

    private static func languages(_ value: JSONValue?) throws -> [String: String] {
        guard let value else { return [:] }
        guard let o = objectOrEmpty(value) else { throw ScenarioError("translate_to must map conversations to languages") }
        return try o.mapValues { try string($0, "translate_to") }
    }

    /// Objects merge key by key, like the runtime merges host config over plugin defaults.
    static func merge(_ base: [String: JSONValue], _ over: [String: JSONValue]) -> [String: JSONValue] {
        var out = base
        for (k, v) in over {
            if case .object(let a)? = out[k], case .object(let b) = v { out[k] = .object(merge(a, b)) } else { out[k] = v }
        }
        return out
    }

    static func objectOrEmpty(_ v: JSONValue) -> [String: JSONValue]? {
        if case .object(let o) = v { return o }
        if case .array(let a) = v, a.isEmpty { return [:] }
        return nil
    }

    static func checkKeys(_ o: [String: JSONValue], allowed: [String], at location: String) throws {
        if let bad = o.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw ScenarioError("\(location): unknown field '\(bad)' (expected one of: \(allowed.joined(separator: ", ")))")
        }
    }

    static func string(_ v: JSONValue, _ what: String) throws -> String {
        guard let s = v.stringValue else { throw ScenarioError("\(what) must be a string") }
        return s
    }

    static func int(_ v: JSONValue, _ what: String) throws -> Int {
        guard let i = v.intValue else { throw ScenarioError("\(what) must be an integer") }
        return i
    }

    static func number(_ v: JSONValue, _ what: String) throws -> Double {
        guard let d = v.doubleValue else { throw ScenarioError("\(what) must be a number") }
        return d
    }

    /// Seconds, or a duration like "10m", "1h30m", "2d", "1w", "45s".
    static func duration(_ v: JSONValue, _ what: String) throws -> Double {
        if let d = v.doubleValue, d >= 0 { return d }
        let bad = ScenarioError("\(what) must be seconds (a number >= 0) or a duration like \"10m\", \"1h30m\", \"2d\"")
        guard let s = v.stringValue, !s.isEmpty else { throw bad }
        var total = 0.0
        var digits = ""
        for c in s {
            if c.isASCII, c.isNumber || c == "." {
                digits.append(c)
                continue
            }
            let unit: Double
            switch c {
            case "s": unit = 1
            case "m": unit = 60
            case "h": unit = 3600
            case "d": unit = 86_400
            case "w": unit = 7 * 86_400
            default: throw bad
            }
            guard let n = Double(digits) else { throw bad }
            total += n * unit
            digits = ""
        }
        guard digits.isEmpty else { throw bad }
        return total
    }

    /// Epoch seconds, or an ISO 8601 time with an offset ("2026-11-30T09:00:00+08:00", "…Z").
    static func time(_ v: JSONValue, _ what: String) throws -> Double {
        if let d = v.doubleValue { return d }
        let formatter = ISO8601DateFormatter()
        guard let s = v.stringValue, let date = formatter.date(from: s) else {
            throw ScenarioError("\(what) must be epoch seconds or an ISO 8601 time with an offset, like \"2026-11-30T09:00:00+08:00\"")
        }
        return date.timeIntervalSince1970
    }
}

/// A scenario file that cannot be used.
public struct ScenarioError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
