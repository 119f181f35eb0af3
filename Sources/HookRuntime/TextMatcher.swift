import Foundation
import Synchronization

/// Matchers alive in this process (all plugins), for tests and diagnostics.
let liveTextMatchers = Atomic<Int>(0)

/// The caps of `ctx.matcher` (`HookLimits.matcher`). Discord's AutoMod allows 1,000 keywords and 10 regular
/// expressions per rule; the defaults are the same.
public struct TextMatcherLimits: Sendable, Hashable {
    /// Keywords per matcher (not counting presets).
    public var maxKeywords = 1000
    /// Allow-list terms per matcher (not counting the presets' own).
    public var maxAllow = 1000
    /// Regular expressions per matcher.
    public var maxRegexes = 10
    /// Characters per keyword or allow-list term.
    public var maxKeywordCharacters = 60
    /// Bytes per regular expression.
    public var maxRegexBytes = 260
    /// Presets per matcher, and terms per preset file.
    public var maxPresets = 16
    public var maxPresetTerms = 5000
    /// Bytes of text `find` and `ctx.text` accept.
    public var maxTextBytes = 1 << 20
    /// Hits `find_all` returns at most.
    public var maxFindAll = 100
    /// PCRE2's match limit (backtracking steps), depth limit and heap limit (KiB) per match call.
    public var regexMatchSteps: UInt32 = 100_000
    public var regexDepth: UInt32 = 1_000
    public var regexHeapKiB: UInt32 = 1_024

    public init() {}

    /// The `[plugins]` keys of `hookbot.toml` that set these caps, with the range each accepts.
    public static let settings: [(key: String, range: ClosedRange<Int>, what: String)] = [
        ("matcher_max_keywords", 1...100_000, "keywords per matcher"),
        ("matcher_max_allow", 0...100_000, "allow-list terms per matcher"),
        ("matcher_max_regexes", 0...100, "regular expressions per matcher"),
        ("matcher_max_regex_bytes", 16...4_096, "bytes per regular expression"),
        ("matcher_regex_steps", 1_000...10_000_000, "PCRE2 match steps per regular expression and text"),
        ("matcher_regex_depth", 10...100_000, "PCRE2 backtracking depth per match"),
        ("matcher_max_text_kb", 1...16_384, "KiB of text find and ctx.text accept"),
    ]

    /// Sets the cap named by one of `settings`' keys; nil when `value` is in its range, else the error.
    public mutating func set(_ key: String, _ value: Int) -> String? {
        guard let setting = Self.settings.first(where: { $0.key == key }) else { return "unknown matcher cap" }
        guard setting.range.contains(value) else {
            return "must be \(setting.range.lowerBound)–\(setting.range.upperBound) (\(setting.what))"
        }
        switch key {
        case "matcher_max_keywords": maxKeywords = value
        case "matcher_max_allow": maxAllow = value
        case "matcher_max_regexes": maxRegexes = value
        case "matcher_max_regex_bytes": maxRegexBytes = value
        case "matcher_regex_steps": regexMatchSteps = UInt32(value)
        case "matcher_regex_depth": regexDepth = UInt32(value)
        default: maxTextBytes = value << 10
        }
        return nil
    }
}

/// A bad matcher specification: the message names the pattern and what is wrong.
struct TextMatcherError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// A keyword, preset term or allow-list term as compiled: its normalised bytes and the wildcards at its ends.
struct MatcherTerm {
    enum Kind: UInt8 { case keyword, preset, allow }
    var term: String
    var kind: Kind
    var preset: String?
    /// `*` at the start: the term may end a word (`*coin` matches "bitcoin").
    var openStart: Bool
    /// `*` at the end: the term may begin a word (`casino*` matches "casinos").
    var openEnd: Bool
    var length: Int
    /// Whether the term's first (last) character is a word character: only then does a word boundary apply.
    var startsWord: Bool
    var endsWord: Bool
}

/// One hit of a matcher: byte offsets in the original text (0-based, `to` exclusive).
struct MatcherHit: Equatable {
    enum Kind: String { case keyword, regex, preset }
    var kind: Kind
    var term: String
    var preset: String?
    var from: Int
    var to: Int
}

/// Aho–Corasick over bytes: every term of a matcher in one pass over the text. The root has a dense table,
/// the other states sorted sparse edges; outputs are chained through dictionary suffix links.
struct KeywordAutomaton {
    private var root = [Int32](repeating: 0, count: 256)
    private var edgeStart: [Int32] = []
    private var edgeCount: [Int32] = []
    private var edgeByte: [UInt8] = []
    private var edgeTarget: [Int32] = []
    private var fail: [Int32] = []
    private var outStart: [Int32] = []
    private var outCount: [Int32] = []
    private var outTerm: [Int32] = []
    private var dictLink: [Int32] = []

    init(_ terms: [[UInt8]]) {
        // trie
        var children: [[UInt8: Int32]] = [[:]]
        var ends: [[Int32]] = [[]]
        for (index, bytes) in terms.enumerated() {
            var s = 0
            for b in bytes {
                if let t = children[s][b] {
                    s = Int(t)
                } else {
                    children.append([:])
                    ends.append([])
                    children[s][b] = Int32(children.count - 1)
                    s = children.count - 1
                }
            }
            ends[s].append(Int32(index))
        }
        let n = children.count
        edgeStart = [Int32](repeating: 0, count: n)
        edgeCount = [Int32](repeating: 0, count: n)
        for s in 0..<n {
            edgeStart[s] = Int32(edgeByte.count)
            let sorted = children[s].sorted { $0.key < $1.key }
            edgeCount[s] = Int32(sorted.count)
            for (b, t) in sorted {
                edgeByte.append(b)
                edgeTarget.append(t)
            }
        }
        for (b, t) in children[0] { root[Int(b)] = t }
        // failure links, breadth first
        fail = [Int32](repeating: 0, count: n)
        dictLink = [Int32](repeating: -1, count: n)
        var queue: [Int32] = []
        queue.reserveCapacity(n)
        for (_, t) in children[0] { queue.append(t) }
        var head = 0
        while head < queue.count {
            let s = Int(queue[head])
            head += 1
            for (b, t) in children[s] {
                var f = Int(fail[s])
                var target: Int32 = 0
                while true {
                    if let g = children[f][b] {
                        target = g
                        break
                    }
                    if f == 0 { break }
                    f = Int(fail[f])
                }
                fail[Int(t)] = target == t ? 0 : target
                queue.append(t)
            }
            let f = Int(fail[s])
            dictLink[s] = ends[f].isEmpty ? dictLink[f] : Int32(f)
        }
        outStart = [Int32](repeating: 0, count: n)
        outCount = [Int32](repeating: 0, count: n)
        for s in 0..<n {
            outStart[s] = Int32(outTerm.count)
            outCount[s] = Int32(ends[s].count)
            outTerm.append(contentsOf: ends[s])
        }
    }

    var bytes: Int {
        256 * 4 + (edgeStart.count + edgeCount.count + edgeTarget.count + fail.count + outStart.count + outCount.count) * 4
            + outTerm.count * 4 + dictLink.count * 4 + edgeByte.count
    }

    /// Calls `found(term, end)` for every occurrence of every term (`end` exclusive), in order of `end`.
    func scan(_ text: [UInt8], _ found: (Int, Int) -> Void) {
        root.withUnsafeBufferPointer { root in
            edgeStart.withUnsafeBufferPointer { edgeStart in
                edgeCount.withUnsafeBufferPointer { edgeCount in
                    edgeByte.withUnsafeBufferPointer { edgeByte in
                        edgeTarget.withUnsafeBufferPointer { edgeTarget in
                            fail.withUnsafeBufferPointer { fail in
                                var state = 0
                                for i in 0..<text.count {
                                    let b = text[i]
                                    while true {
                                        if state == 0 {
                                            state = Int(root[Int(b)])
                                            break
                                        }
                                        var lo = Int(edgeStart[state])
                                        var hi = lo + Int(edgeCount[state])
                                        var next = -1
                                        if hi - lo <= 8 {
                                            while lo < hi {
                                                if edgeByte[lo] == b {
                                                    next = Int(edgeTarget[lo])
                                                    break
                                                }
                                                lo += 1
                                            }
                                        } else {
                                            while lo < hi {
                                                let mid = (lo + hi) >> 1
                                                let m = edgeByte[mid]
                                                if m == b {
                                                    next = Int(edgeTarget[mid])
                                                    break
                                                }
                                                if m < b { lo = mid + 1 } else { hi = mid }
                                            }
                                        }
                                        if next >= 0 {
                                            state = next
                                            break
                                        }
                                        state = Int(fail[state])
                                    }
                                    if state == 0 { continue }
                                    var s = state
                                    if outCount[s] == 0 { s = Int(dictLink[s]) }
                                    while s > 0 {
                                        let start = Int(outStart[s])
                                        for k in start..<(start + Int(outCount[s])) { found(Int(outTerm[k]), i + 1) }
                                        s = Int(dictLink[s])
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// What `ctx.matcher{…}` compiles: keywords with wildcards, bounded regular expressions, presets and an
/// allow-list, matched against the normalised text (see `TextNormaliser`). Compiled once; `hits` is linear in
/// the text for the keywords, and each regular expression is bounded by its limits.
final class TextMatcher {
    private(set) var terms: [MatcherTerm] = []
    private var automaton: KeywordAutomaton
    private(set) var regexes: [BoundedRegex] = []
    let limits: TextMatcherLimits
    /// Bytes the compiled matcher holds (counted against the plugin's memory cap).
    private(set) var bytes = 0
    /// Regular expressions that have given up at a limit (logged once each).
    var reportedLimits: Set<Int> = []

    struct Spec {
        var keywords: [String] = []
        var regex: [String] = []
        var allow: [String] = []
        var presets: [String] = []
    }

    init(_ spec: Spec, presetDirectory: URL?, limits: TextMatcherLimits = .init()) throws(TextMatcherError) {
        self.limits = limits
        guard spec.keywords.count <= limits.maxKeywords else {
            throw TextMatcherError("too many keywords (\(spec.keywords.count); at most \(limits.maxKeywords))")
        }
        guard spec.allow.count <= limits.maxAllow else {
            throw TextMatcherError("too many allow-list terms (\(spec.allow.count); at most \(limits.maxAllow))")
        }
        guard spec.regex.count <= limits.maxRegexes else {
            throw TextMatcherError("too many regular expressions (\(spec.regex.count); at most \(limits.maxRegexes))")
        }
        guard spec.presets.count <= limits.maxPresets else {
            throw TextMatcherError("too many presets (\(spec.presets.count); at most \(limits.maxPresets))")
        }
        var compiled: [[UInt8]] = []
        var terms: [MatcherTerm] = []
        func add(_ raw: String, _ kind: MatcherTerm.Kind, preset: String?, what: String) throws(TextMatcherError) {
            guard raw.count <= limits.maxKeywordCharacters else {
                throw TextMatcherError("\(what) \(quoted(raw)): longer than \(limits.maxKeywordCharacters) characters")
            }
            var body = Substring(raw)
            let openStart = body.hasPrefix("*")
            if openStart { body = body.dropFirst() }
            let openEnd = body.hasSuffix("*")
            if openEnd { body = body.dropLast() }
            if body.contains("*") {
                throw TextMatcherError("\(what) \(quoted(raw)): * is allowed only at the start or the end")
            }
            var hadRuns = false
            let normal = TextNormaliser.withBytes(String(body)) { b in
                TextNormaliser.full(TextNormaliser.lightUnits(b), squeeze: 1, hadRuns: &hadRuns)
            }
            var bytes = normal.bytes
            var words = normal.word.map { $0 != 0 }
            // leading and trailing spaces never match usefully
            while bytes.first == 0x20 {
                bytes.removeFirst()
                words.removeFirst()
            }
            while bytes.last == 0x20 {
                bytes.removeLast()
                words.removeLast()
            }
            guard !bytes.isEmpty else {
                throw TextMatcherError("\(what) \(quoted(raw)): nothing to match (empty once normalised)")
            }
            compiled.append(bytes)
            terms.append(
                MatcherTerm(
                    term: raw, kind: kind, preset: preset, openStart: openStart, openEnd: openEnd, length: bytes.count,
                    startsWord: words.first!, endsWord: words.last!))
        }
        for k in spec.keywords { try add(k, .keyword, preset: nil, what: "keyword") }
        for a in spec.allow { try add(a, .allow, preset: nil, what: "allow-list term") }
        for name in spec.presets {
            let lines = try TextMatcherPresets.load(name, directory: presetDirectory, limits: limits)
            for line in lines {
                if line.hasPrefix("!") {
                    try add(String(line.dropFirst()), .allow, preset: name, what: "preset \(name): allow-list term")
                } else {
                    try add(line, .preset, preset: name, what: "preset \(name): term")
                }
            }
        }
        for r in spec.regex { regexes.append(try BoundedRegex(r, limits: limits)) }
        self.terms = terms
        automaton = KeywordAutomaton(compiled)
        bytes =
            automaton.bytes + terms.reduce(0) { $0 + 64 + $1.term.utf8.count + ($1.preset?.utf8.count ?? 0) }
            + regexes.reduce(0) { $0 + $1.bytes } + 256
    }

    struct Outcome {
        var hits: [MatcherHit] = []
        /// Regular expressions that gave up at a limit on this text.
        var problems: [(index: Int, message: String)] = []
    }

    /// The last text scanned and its normalised forms. A message goes through several rules' matchers in a
    /// row (the default rules: scam's and profanity's presets), and the forms depend on the text alone, so
    /// the next matcher given the same bytes reuses them instead of normalising again (perf on `hookbot
    /// bench --only hooks`: the normaliser was the largest entry). One entry behind a lock: the Lua thread
    /// runs one hook at a time; another engine's thread at worst costs a miss.
    private static let lastScanned = Mutex<(text: [UInt8], units: [NormalUnit], forms: [NormalisedText]?)?>(nil)

    /// The light units and (with `full`) the full forms of `text`, from the last scan when it was the same text.
    static func normalised(_ text: UnsafeBufferPointer<UInt8>, full: Bool) -> ([NormalUnit], [NormalisedText]) {
        let cached = lastScanned.withLock { last -> ([NormalUnit], [NormalisedText]?)? in
            guard let last, last.text.count == text.count, last.text.elementsEqual(text) else { return nil }
            return (last.units, last.forms)
        }
        if let (units, forms) = cached, let forms = full ? forms : [] { return (units, forms) }
        let units = cached?.0 ?? TextNormaliser.lightUnits(text)
        let forms = full ? TextNormaliser.fullForms(units) : nil
        // Messages, not documents: a text over 16 KiB is not kept.
        if text.count <= 16 << 10 {
            let bytes = Array(text)
            lastScanned.withLock { $0 = (bytes, units, forms) }
        }
        return (units, forms ?? [])
    }

    /// Up to `limit` hits in `text`, ordered by where they start (then where they end).
    func hits(in text: UnsafeBufferPointer<UInt8>, limit: Int) -> Outcome {
        var outcome = Outcome()
        let (units, forms) = Self.normalised(text, full: !terms.isEmpty)
        var found: [MatcherHit] = []
        var allowed: [(Int, Int)] = []
        if !terms.isEmpty {
            for form in forms {
                let bytes = form.bytes
                let word = form.word
                let n = bytes.count
                automaton.scan(bytes) { index, end in
                    let t = terms[index]
                    var start = end - t.length
                    var stop = end
                    // an open end takes in the rest of the word; a closed one needs a word boundary there (also
                    // between two letters the sender wrote apart, "a s c a m")
                    if t.openStart {
                        while start > 0 && word[start - 1] != 0 { start -= 1 }
                    } else if t.startsWord && start > 0 && word[start - 1] != 0 && !(word[start - 1] == 2 && word[start] == 2) {
                        return
                    }
                    if t.openEnd {
                        while stop < n && word[stop] != 0 { stop += 1 }
                    } else if t.endsWord && stop < n && word[stop] != 0 && !(word[stop] == 2 && word[stop - 1] == 2) {
                        return
                    }
                    let from = Int(form.from[start])
                    let to = Int(form.to[stop - 1])
                    switch t.kind {
                    case .allow: allowed.append((from, to))
                    case .keyword: found.append(MatcherHit(kind: .keyword, term: t.term, preset: nil, from: from, to: to))
                    case .preset: found.append(MatcherHit(kind: .preset, term: t.term, preset: t.preset, from: from, to: to))
                    }
                }
            }
        }
        if !regexes.isEmpty {
            let light = TextNormaliser.light(units)
            light.bytes.withUnsafeBufferPointer { subject in
                for (index, regex) in regexes.enumerated() {
                    var start = 0
                    var count = 0
                    while start <= subject.count && count < limit {
                        switch regex.match(subject, from: start) {
                        case .noMatch: start = subject.count + 1
                        case .limit(let message):
                            outcome.problems.append((index, message))
                            start = subject.count + 1
                        case .match(let s, let e):
                            if e > s {
                                found.append(
                                    MatcherHit(
                                        kind: .regex, term: regex.pattern, preset: nil, from: Int(light.from[s]),
                                        to: Int(light.to[e - 1])))
                                count += 1
                            }
                            var next = max(e, s + 1)
                            while next < subject.count && subject[next] & 0xC0 == 0x80 { next += 1 }
                            start = next
                        }
                    }
                }
            }
        }
        if !allowed.isEmpty {
            found.removeAll { h in allowed.contains { $0.0 <= h.from && h.to <= $0.1 } }
        }
        if found.isEmpty { return outcome }
        func rank(_ k: MatcherHit.Kind) -> Int {
            switch k {
            case .keyword: 0
            case .regex: 1
            case .preset: 2
            }
        }
        found.sort { a, b in
            if a.from != b.from { return a.from < b.from }
            if a.to != b.to { return a.to > b.to }
            return rank(a.kind) < rank(b.kind)
        }
        var seen = Set<String>()
        for h in found where outcome.hits.count < limit {
            let key = "\(h.kind.rawValue)\u{0}\(h.term)\u{0}\(h.preset ?? "")\u{0}\(h.from)\u{0}\(h.to)"
            if seen.insert(key).inserted { outcome.hits.append(h) }
        }
        return outcome
    }
}

/// Preset files: `<plugins>/presets/<name>.txt`, one term per line (the keyword syntax, `*` wildcards),
/// `!term` for a built-in allow-list entry, `#` comments, UTF-8.
enum TextMatcherPresets {
    static func isValidName(_ name: String) -> Bool {
        guard !name.isEmpty, name.utf8.count <= 64, !name.hasPrefix("/"), !name.hasSuffix("/") else { return false }
        for part in name.split(separator: "/", omittingEmptySubsequences: false) {
            guard !part.isEmpty, part != ".", part != ".." else { return false }
            for c in part.utf8 {
                let ok = (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x7A) || c == 0x5F || c == 0x2D
                if !ok { return false }
            }
        }
        return true
    }

    static func load(_ name: String, directory: URL?, limits: TextMatcherLimits) throws(TextMatcherError) -> [String] {
        guard isValidName(name) else {
            throw TextMatcherError(
                "preset \(quoted(name)): not a preset name (lower-case letters, digits, _ and -, parts separated by /)")
        }
        guard let directory else { throw TextMatcherError("preset \(quoted(name)): this host has no presets directory") }
        let url = directory.appendingPathComponent("presets/\(name).txt")
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw TextMatcherError("preset \(quoted(name)): not found (looked for presets/\(name).txt)")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw TextMatcherError("preset \(quoted(name)): presets/\(name).txt is not UTF-8")
        }
        var lines: [String] = []
        for raw in text.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            lines.append(line)
        }
        guard lines.count <= limits.maxPresetTerms else {
            throw TextMatcherError("preset \(quoted(name)): more than \(limits.maxPresetTerms) terms")
        }
        return lines
    }
}
