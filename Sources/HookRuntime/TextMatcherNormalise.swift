import Foundation

/// Text as the matcher sees it, with where each byte came from in the original text.
///
/// Two levels: the *light* form (lower case, width-folded, accents and other combining marks removed, common
/// confusables folded, zero-width characters dropped, runs of white space made one space) is what regular
/// expressions see; the *full* form adds leetspeak folding, removes the separators between single letters
/// ("s c a m" → "scam") and squeezes runs of three or more of one letter; keywords and presets match it.
struct NormalisedText {
    /// UTF-8 bytes of the normalised text.
    var bytes: [UInt8] = []
    /// For each byte: the first byte (0-based) of the original text it came from.
    var from: [Int32] = []
    /// For each byte: one past the last original byte it came from.
    var to: [Int32] = []
    /// For each byte: 0 outside words, 1 in a word character (letters and digits, not CJK), 2 in a word
    /// character of single letters joined from separated ones ("s c a m"): between two of those there is a
    /// word boundary too (the sender wrote one), so "a s c a m" still has the word "scam".
    var word: [UInt8] = []

    var count: Int { bytes.count }

    mutating func reserve(_ n: Int) {
        bytes.reserveCapacity(n)
        from.reserveCapacity(n)
        to.reserveCapacity(n)
        word.reserveCapacity(n)
    }

    mutating func append(_ scalar: UInt32, from f: Int32, to t: Int32, word isWord: Bool, joined: Bool = false) {
        let w: UInt8 = isWord ? (joined ? 2 : 1) : 0
        if scalar < 0x80 {
            bytes.append(UInt8(scalar))
            from.append(f)
            to.append(t)
            word.append(w)
            return
        }
        var buf: (UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0)
        let n: Int
        if scalar < 0x800 {
            buf = (UInt8(0xC0 | (scalar >> 6)), UInt8(0x80 | (scalar & 0x3F)), 0, 0)
            n = 2
        } else if scalar < 0x10000 {
            buf = (UInt8(0xE0 | (scalar >> 12)), UInt8(0x80 | ((scalar >> 6) & 0x3F)), UInt8(0x80 | (scalar & 0x3F)), 0)
            n = 3
        } else {
            buf = (
                UInt8(0xF0 | (scalar >> 18)), UInt8(0x80 | ((scalar >> 12) & 0x3F)), UInt8(0x80 | ((scalar >> 6) & 0x3F)),
                UInt8(0x80 | (scalar & 0x3F))
            )
            n = 4
        }
        withUnsafeBytes(of: &buf) { raw in
            for i in 0..<n {
                bytes.append(raw[i])
                from.append(f)
                to.append(t)
                word.append(w)
            }
        }
    }

    var string: String { String(decoding: bytes, as: UTF8.self) }
}

/// One scalar of the light form and the original bytes it came from.
struct NormalUnit {
    var scalar: UInt32
    var from: Int32
    var to: Int32
}

enum TextNormaliser {
    // MARK: character classes

    @inline(__always) static func isCJK(_ u: UInt32) -> Bool {
        (u >= 0x4E00 && u <= 0x9FFF) || (u >= 0x3400 && u <= 0x4DBF) || (u >= 0x3040 && u <= 0x30FF)
            || (u >= 0xAC00 && u <= 0xD7AF) || (u >= 0xF900 && u <= 0xFAFF) || (u >= 0x20000 && u <= 0x3FFFF)
    }

    @inline(__always) static func isASCIILetter(_ u: UInt32) -> Bool { (u >= 0x61 && u <= 0x7A) || (u >= 0x41 && u <= 0x5A) }
    @inline(__always) static func isASCIIDigit(_ u: UInt32) -> Bool { u >= 0x30 && u <= 0x39 }

    /// Letters and digits of any script except CJK (which has no spaces, so it matches as substrings).
    @inline(__always) static func isWordScalar(_ u: UInt32) -> Bool {
        if u < 0x80 { return isASCIILetter(u) || isASCIIDigit(u) || u == 0x5F }
        if isCJK(u) { return false }
        guard let s = Unicode.Scalar(u) else { return false }
        let p = s.properties
        return p.isAlphabetic || p.numericType != nil
    }

    /// Characters a word is made of for tokenising: word characters, CJK, and the symbols leetspeak uses.
    @inline(__always) static func isTokenScalar(_ u: UInt32) -> Bool {
        if u < 0x80 { return isASCIILetter(u) || isASCIIDigit(u) || u == 0x24 || u == 0x40 || u == 0x21 || u == 0x7C }
        return isCJK(u) || isWordScalar(u)
    }

    /// Format characters that only hide things: zero-width spaces and joiners, soft hyphens, bidi marks.
    @inline(__always) static func isInvisible(_ u: UInt32) -> Bool {
        u == 0xAD || (u >= 0x200B && u <= 0x200F) || (u >= 0x202A && u <= 0x202E) || (u >= 0x2060 && u <= 0x2064)
            || u == 0xFEFF || u == 0x180E || u == 0x034F || (u >= 0xFE00 && u <= 0xFE0F)
    }

    /// Letters of other scripts that look like Latin ones (after lower-casing).
    static let confusables: [UInt32: UInt32] = {
        let pairs: [(Character, Character)] = [
            ("а", "a"), ("в", "b"), ("е", "e"), ("к", "k"), ("м", "m"), ("о", "o"), ("р", "p"), ("с", "c"), ("т", "t"),
            ("у", "y"), ("х", "x"), ("ѕ", "s"), ("і", "i"), ("ј", "j"), ("ԁ", "d"), ("ԛ", "q"), ("ԝ", "w"), ("ү", "y"),
            ("һ", "h"), ("ɡ", "g"), ("ı", "i"), ("α", "a"), ("β", "b"), ("ε", "e"), ("ι", "i"), ("κ", "k"), ("ν", "v"),
            ("ο", "o"), ("ρ", "p"), ("τ", "t"), ("υ", "u"), ("χ", "x"), ("ʏ", "y"), ("ᴀ", "a"), ("ʙ", "b"), ("ᴄ", "c"),
            ("ᴅ", "d"), ("ᴇ", "e"), ("ғ", "f"), ("ɢ", "g"), ("ʜ", "h"), ("ɪ", "i"), ("ᴊ", "j"), ("ᴋ", "k"), ("ʟ", "l"),
            ("ᴍ", "m"), ("ɴ", "n"), ("ᴏ", "o"), ("ᴘ", "p"), ("ʀ", "r"), ("ꜱ", "s"), ("ᴛ", "t"), ("ᴜ", "u"), ("ᴠ", "v"),
            ("ᴡ", "w"), ("ᴢ", "z"),
        ]
        var m: [UInt32: UInt32] = [:]
        for (a, b) in pairs { m[a.unicodeScalars.first!.value] = b.unicodeScalars.first!.value }
        return m
    }()

    /// What a non-ASCII scalar folds to, for the ranges where folding changes anything (Latin, Greek,
    /// Cyrillic, punctuation and letter-like symbols, enclosed and fullwidth forms, mathematical letters):
    /// compatibility decomposition (NFKC), combining marks removed, lower case, confusables. Computed once.
    static let foldTable: [UInt32: [UInt32]] = {
        var table: [UInt32: [UInt32]] = [:]
        let ranges: [ClosedRange<UInt32>] = [
            0x80...0x52F, 0x1D00...0x1EFF, 0x2000...0x2BFF, 0x3000...0x3000, 0xFB00...0xFB06, 0xFF00...0xFFEF,
            0x1D400...0x1D7FF, 0x1F100...0x1F1E5,
        ]
        for r in ranges {
            for u in r {
                guard let s = Unicode.Scalar(u) else { continue }
                let p = s.properties
                if p.generalCategory == .nonspacingMark || p.generalCategory == .enclosingMark || isInvisible(u) {
                    table[u] = []
                    continue
                }
                let decomposed = String(Character(s)).precomposedStringWithCompatibilityMapping
                    .decomposedStringWithCanonicalMapping
                var out: [UInt32] = []
                for t in decomposed.unicodeScalars {
                    let c = t.properties.generalCategory
                    if c == .nonspacingMark || c == .enclosingMark || c == .spacingMark { continue }
                    for l in t.properties.lowercaseMapping.unicodeScalars {
                        var v = l.value
                        if let c = confusables[v] { v = c }
                        if l.properties.isWhitespace { v = 0x20 }
                        out.append(v)
                    }
                }
                if out != [u] { table[u] = out }
            }
        }
        return table
    }()

    @inline(__always) static func foldRangeMayApply(_ u: UInt32) -> Bool {
        u <= 0x2BFF || u == 0x3000 || (u >= 0xFB00 && u <= 0xFB06) || (u >= 0xFF00 && u <= 0xFFEF)
            || (u >= 0x1D400 && u <= 0x1D7FF) || (u >= 0x1F100 && u <= 0x1F1E5)
    }

    // MARK: decoding

    /// The scalar starting at byte `i` of the UTF-8 bytes and its length in bytes; each byte of an invalid
    /// sequence is U+FFFD.
    @inline(__always) static func scalar(at i: Int, in b: UnsafeBufferPointer<UInt8>) -> (UInt32, Int) {
        let c0 = b[i]
        if c0 < 0x80 { return (UInt32(c0), 1) }
        let need: Int
        var u: UInt32
        let minimum: UInt32
        if c0 & 0xE0 == 0xC0 {
            need = 1
            u = UInt32(c0 & 0x1F)
            minimum = 0x80
        } else if c0 & 0xF0 == 0xE0 {
            need = 2
            u = UInt32(c0 & 0x0F)
            minimum = 0x800
        } else if c0 & 0xF8 == 0xF0 {
            need = 3
            u = UInt32(c0 & 0x07)
            minimum = 0x10000
        } else {
            return (0xFFFD, 1)
        }
        guard i + need < b.count else { return (0xFFFD, 1) }
        for k in 1...need {
            let c = b[i + k]
            if c & 0xC0 != 0x80 { return (0xFFFD, 1) }
            u = (u << 6) | UInt32(c & 0x3F)
        }
        if u < minimum || u > 0x10FFFF || (u >= 0xD800 && u <= 0xDFFF) { return (0xFFFD, 1) }
        return (u, need + 1)
    }

    /// Calls `body(scalar, from, to)` for each scalar of the UTF-8 bytes (see `scalar(at:in:)`).
    @inline(__always) static func decode(_ b: UnsafeBufferPointer<UInt8>, _ body: (UInt32, Int, Int) -> Void) {
        var i = 0
        while i < b.count {
            let (u, n) = scalar(at: i, in: b)
            body(u, i, i + n)
            i += n
        }
    }

    // MARK: light form

    /// The light form's scalars: lower case, width-folded, marks removed, confusables folded, invisible
    /// characters dropped, white space runs made one space.
    static func lightUnits(_ text: UnsafeBufferPointer<UInt8>) -> [NormalUnit] {
        var units: [NormalUnit] = []
        units.reserveCapacity(text.count)
        var lastSpace = false
        var i = 0
        let table = foldTable
        while i < text.count {
            let (u, n) = scalar(at: i, in: text)
            let f = Int32(i)
            let t = Int32(i + n)
            i += n
            var v = u
            if u < 0x80 {
                if u >= 0x41 && u <= 0x5A {
                    v = u + 32
                } else if u == 0x20 || (u >= 0x09 && u <= 0x0D) {
                    v = 0x20
                }
            } else if isCJK(u) {
                v = u
            } else if foldRangeMayApply(u), let folded = table[u] {
                for w in folded {
                    if w == 0x20 {
                        if lastSpace { continue }
                        lastSpace = true
                    } else {
                        lastSpace = false
                    }
                    units.append(NormalUnit(scalar: w, from: f, to: t))
                }
                continue
            } else if isInvisible(u) {
                continue
            } else if let s = Unicode.Scalar(u) {
                let p = s.properties
                let c = p.generalCategory
                if c == .nonspacingMark || c == .enclosingMark { continue }
                if c == .spaceSeparator || c == .lineSeparator || c == .paragraphSeparator { v = 0x20 }
            }
            if v == 0x20 {
                if lastSpace { continue }
                lastSpace = true
            } else {
                lastSpace = false
            }
            units.append(NormalUnit(scalar: v, from: f, to: t))
        }
        return units
    }

    /// The light form as text with its byte map (what regular expressions see).
    static func light(_ units: [NormalUnit]) -> NormalisedText {
        var out = NormalisedText()
        out.reserve(units.count + 8)
        for x in units { out.append(x.scalar, from: x.from, to: x.to, word: isWordScalar(x.scalar)) }
        return out
    }

    // MARK: full form

    /// What may stand between two CJK characters and be dropped: spaces and marks used to split words.
    private static let cjkGap: Set<UInt32> = [0x20, 0x2E, 0x2A, 0x2D, 0x5F, 0x7E, 0xB7, 0x2F, 0x2B, 0x7C, 0x2022, 0x30FB]

    @inline(__always) private static func leet(_ u: UInt32) -> UInt32? {
        switch u {
        case 0x30: return 0x6F // 0 → o
        case 0x31: return 0x69 // 1 → i
        case 0x33: return 0x65 // 3 → e
        case 0x34: return 0x61 // 4 → a
        case 0x35: return 0x73 // 5 → s
        case 0x37: return 0x74 // 7 → t
        default: return nil
        }
    }

    /// Whether two separators between single letters are of one kind: both only spaces, or the same characters.
    private static func sameSeparator(_ units: [NormalUnit], _ a: Range<Int>, _ b: Range<Int>) -> Bool {
        let spaces = { (r: Range<Int>) in units[r].allSatisfy { $0.scalar == 0x20 || $0.scalar == 0x09 } }
        if spaces(a) && spaces(b) { return true }
        return a.count == b.count && zip(units[a], units[b]).allSatisfy { $0.scalar == $1.scalar }
    }

    /// The full form: the light form with leetspeak folded in words that contain letters, separators between
    /// single letters removed, and runs of three or more of one letter squeezed to `squeeze` (1 or 2).
    /// `hadRuns` tells whether any such run was squeezed (then the other squeeze is worth matching too).
    static func full(_ units: [NormalUnit], squeeze: Int, hadRuns: inout Bool) -> NormalisedText {
        var out = NormalisedText()
        out.reserve(units.count + 8)
        let n = units.count
        // tokens: [start, end) ranges of token scalars
        var tokens: [(Int, Int)] = []
        var i = 0
        while i < n {
            if isTokenScalar(units[i].scalar) {
                let s = i
                while i < n && isTokenScalar(units[i].scalar) { i += 1 }
                // One letter followed only by exclamation marks ("s c a m!") is a single letter and the marks
                // punctuation (they stay in the text as separators), not a two-scalar leet word.
                if i - s >= 2, units[s].scalar != 0x21, units[(s + 1)..<i].allSatisfy({ $0.scalar == 0x21 }) {
                    tokens.append((s, s + 1))
                } else {
                    tokens.append((s, i))
                }
            } else {
                i += 1
            }
        }
        // runs of single-scalar tokens separated by 1-3 separators: joined into one token
        var joinedUntil = [Int](repeating: -1, count: tokens.count) // index of last token in the run
        var k = 0
        while k < tokens.count {
            guard tokens[k].1 - tokens[k].0 == 1 else {
                k += 1
                continue
            }
            // A run's letters are kept apart by one kind of separator ("s.c.a.m", "s c a m"): "a s.c.a.m" is the
            // word "a" and then "scam", not "ascam".
            var j = k
            while j + 1 < tokens.count, tokens[j + 1].1 - tokens[j + 1].0 == 1, tokens[j + 1].0 - tokens[j].1 <= 3,
                j == k || sameSeparator(units, tokens[k].1..<tokens[k + 1].0, tokens[j].1..<tokens[j + 1].0)
            {
                j += 1
            }
            let count = j - k + 1
            if count >= 2 {
                var letters = 0
                var cjk = 0
                for t in k...j {
                    let u = units[tokens[t].0].scalar
                    if isCJK(u) {
                        cjk += 1
                    } else if u >= 0x80 ? isWordScalar(u) && !isASCIIDigit(u) : isASCIILetter(u) {
                        letters += 1
                    }
                }
                if (cjk == count) || (count >= 3 && letters >= 2) {
                    joinedUntil[k] = j
                    k = j + 1
                    continue
                }
            }
            // Not joined: a run of two ends where the separator changed, and its last letter may start the next
            // run (each step still moves on, so this stays linear).
            k = count == 2 ? j : j + 1
        }
        var scratch: [NormalUnit] = []
        var folded: [NormalUnit] = []
        var pos = 0 // next unit to copy as separator
        k = 0
        while k < tokens.count {
            let last = max(joinedUntil[k], k)
            // Chinese has no spaces: a short run of spaces or in-word marks between two CJK characters
            // ("傻 逼", "傻.逼") is a disguise, not a boundary
            if k > 0, pos < tokens[k].0, tokens[k].0 - pos <= 3, isCJK(units[pos - 1].scalar), isCJK(units[tokens[k].0].scalar),
                units[pos..<tokens[k].0].allSatisfy({ cjkGap.contains($0.scalar) })
            {
                pos = tokens[k].0
            }
            // separators before the token
            while pos < tokens[k].0 {
                let x = units[pos]
                out.append(x.scalar, from: x.from, to: x.to, word: isWordScalar(x.scalar))
                pos += 1
            }
            if last == k {
                emitToken(
                    units[tokens[k].0..<tokens[k].1], joined: false, squeeze: squeeze, hadRuns: &hadRuns, folded: &folded,
                    into: &out)
            } else {
                scratch.removeAll(keepingCapacity: true)
                for t in k...last {
                    for q in tokens[t].0..<tokens[t].1 { scratch.append(units[q]) }
                }
                emitToken(scratch[...], joined: true, squeeze: squeeze, hadRuns: &hadRuns, folded: &folded, into: &out)
            }
            pos = tokens[last].1
            k = last + 1
        }
        while pos < n {
            let x = units[pos]
            out.append(x.scalar, from: x.from, to: x.to, word: isWordScalar(x.scalar))
            pos += 1
        }
        return out
    }

    private static func emitToken(
        _ tok: ArraySlice<NormalUnit>, joined: Bool, squeeze: Int, hadRuns: inout Bool, folded: inout [NormalUnit],
        into out: inout NormalisedText
    ) {
        var letters = 0
        var digits = 0
        for x in tok {
            if isASCIILetter(x.scalar) {
                letters += 1
            } else if isASCIIDigit(x.scalar) {
                digits += 1
            }
        }
        let foldSymbols = letters > 0
        let foldDigits = letters > 0 && letters >= digits
        folded.removeAll(keepingCapacity: true)
        for (idx, x) in tok.enumerated() {
            var u = x.scalar
            if foldSymbols {
                switch u {
                case 0x24: u = 0x73 // $ → s
                case 0x7C: u = 0x6C // | → l
                case 0x40 where idx > 0: u = 0x61 // @ → a, not at the start (a mention)
                // ! → i inside a word
                case 0x21 where idx > 0 && idx + 1 < tok.count && isASCIILetter(tok[tok.startIndex + idx + 1].scalar): u = 0x69
                default: if foldDigits, let l = leet(u) { u = l }
                }
            }
            folded.append(NormalUnit(scalar: u, from: x.from, to: x.to))
        }
        var i = 0
        while i < folded.count {
            let u = folded[i].scalar
            var j = i + 1
            if isASCIILetter(u) { while j < folded.count && folded[j].scalar == u { j += 1 } }
            let length = j - i
            if length >= 3 {
                hadRuns = true
                for c in 0..<squeeze {
                    let end = c == squeeze - 1 ? folded[j - 1].to : folded[i + c].to
                    out.append(u, from: folded[i + c].from, to: end, word: true, joined: joined)
                }
            } else {
                for q in i..<j { out.append(u, from: folded[q].from, to: folded[q].to, word: isWordScalar(u), joined: joined) }
            }
            i = j
        }
    }

    /// Both full forms a text can need: squeezed to one letter, and (only when a run of three or more was
    /// squeezed) to two.
    static func fullForms(_ units: [NormalUnit]) -> [NormalisedText] {
        var hadRuns = false
        let one = full(units, squeeze: 1, hadRuns: &hadRuns)
        guard hadRuns else { return [one] }
        var ignored = false
        return [one, full(units, squeeze: 2, hadRuns: &ignored)]
    }

    static func withBytes<R>(_ s: String, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        var s = s
        return s.withUTF8(body)
    }

    /// `ctx.text.normalise`: the full form (runs squeezed to one letter).
    static func normalise(_ s: String) -> String {
        withBytes(s) { b in
            var hadRuns = false
            return full(lightUnits(b), squeeze: 1, hadRuns: &hadRuns).string
        }
    }
}
