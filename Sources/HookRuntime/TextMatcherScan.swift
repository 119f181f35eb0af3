/// `ctx.text.urls` and `ctx.text.stats`: one linear pass each over the text.
enum TextScan {
    /// Top-level domains a bare name (no scheme, not starting with www.) must end in to count as a link. Kept
    /// to common ones and free of file extensions (md, py, rs, sh, pl, cc, js...) and short English words
    /// (it, is, in, at, no, so, to, do), so "readme.md" or "ok.so" are not links.
    static let bareTLDs: Set<String> = [
        "com", "net", "org", "io", "dev", "app", "me", "co", "uk", "de", "fr", "ru", "cn", "jp", "kr", "tw", "hk", "br",
        "au", "ca", "nl", "ch", "se", "es", "eu", "info", "biz", "edu", "gov", "xyz", "top", "site", "online", "ly", "gl",
        "gd", "ai", "tv", "gg", "tk", "ml", "ga", "cf", "gq", "link", "click", "live", "shop", "store", "tech", "news",
        "blog", "cloud", "page", "wiki", "fun", "icu", "vip", "club", "pro", "moe", "be", "la", "fm", "im", "su", "ua",
        "asia", "ws", "sg", "vn", "th", "ph", "nz", "ie", "pt", "cz", "us", "mx", "ar", "cl", "tr", "ir", "za", "ng",
        "ke", "pk", "bd", "my", "id", "run", "world", "today", "space", "website", "network", "win", "bid", "loan",
        "work", "email", "lol", "rest", "cam", "cyou", "buzz", "sbs", "cfd",
    ]

    @inline(__always) private static func fold(_ u: UInt32) -> UInt32 {
        // fullwidth ASCII (and the halfwidth ideographic full stop) as ASCII
        if u >= 0xFF01 && u <= 0xFF5E { return u - 0xFEE0 }
        if u == 0xFF61 { return 0x2E }
        return u
    }

    @inline(__always) private static func isLabel(_ u: UInt32) -> Bool {
        (u >= 0x61 && u <= 0x7A) || (u >= 0x41 && u <= 0x5A) || (u >= 0x30 && u <= 0x39) || u == 0x2D
    }

    /// Characters a URL's path can hold: anything printable but white space, quotes, angle brackets and CJK.
    @inline(__always) private static func isURLChar(_ u: UInt32) -> Bool {
        if u <= 0x20 || u == 0x22 || u == 0x3C || u == 0x3E || u == 0x60 || u == 0x7F { return false }
        if u >= 0x80 {
            if TextNormaliser.isCJK(u) || (u >= 0x3000 && u <= 0x303F) || (u >= 0xFF00 && u <= 0xFFEF) { return false }
            guard let s = Unicode.Scalar(u) else { return false }
            let p = s.properties
            if p.isWhitespace || p.isEmojiPresentation { return false }
        }
        return true
    }

    static func urls(_ text: String) -> [(url: String, host: String)] {
        var scalars: [UInt32] = []
        var offsets: [Int] = []
        var bytes: [UInt8] = Array(text.utf8)
        bytes.withUnsafeMutableBufferPointer { b in
            TextNormaliser.decode(UnsafeBufferPointer(b)) { u, f, _ in
                scalars.append(fold(u))
                offsets.append(f)
            }
        }
        offsets.append(bytes.count)
        let n = scalars.count
        var out: [(url: String, host: String)] = []
        func lower(_ u: UInt32) -> UInt32 { u >= 0x41 && u <= 0x5A ? u + 32 : u }
        func hasPrefix(_ i: Int, _ p: String) -> Bool {
            var k = i
            for c in p.unicodeScalars {
                guard k < n, lower(scalars[k]) == c.value else { return false }
                k += 1
            }
            return true
        }
        /// The end of a URL's path starting at `i`, trailing punctuation left out.
        func pathEnd(_ i: Int) -> Int {
            var j = i
            var open = 0
            while j < n && isURLChar(scalars[j]) {
                if scalars[j] == 0x28 { open += 1 } else if scalars[j] == 0x29 { open -= 1 }
                j += 1
            }
            while j > i {
                let c = scalars[j - 1]
                if c == 0x29 && open < 0 {
                    open += 1
                    j -= 1
                } else if c == 0x2E || c == 0x2C || c == 0x3B || c == 0x3A || c == 0x21 || c == 0x3F || c == 0x27
                    || c == 0x5D || c == 0x7D
                {
                    j -= 1
                } else {
                    break
                }
            }
            return j
        }
        func slice(_ a: Int, _ b: Int) -> String { String(decoding: bytes[offsets[a]..<offsets[b]], as: UTF8.self) }
        func host(_ a: Int, _ b: Int) -> String {
            String(String.UnicodeScalarView(scalars[a..<b].compactMap { Unicode.Scalar(lower($0)) }))
        }
        var i = 0
        while i < n {
            let prev: UInt32 = i > 0 ? scalars[i - 1] : 0x20
            let atStart = !(isLabel(prev) || prev == 0x2E || prev == 0x40 || prev == 0x2F || prev == 0x5F)
            if atStart, hasPrefix(i, "http://") || hasPrefix(i, "https://") {
                let hostStart = i + (hasPrefix(i, "https://") ? 8 : 7)
                let end = pathEnd(hostStart)
                var h = hostStart
                var hostEnd = hostStart
                // the authority: up to / ? #, without user info and port
                while h < end && scalars[h] != 0x2F && scalars[h] != 0x3F && scalars[h] != 0x23 { h += 1 }
                var a = hostStart
                for k in hostStart..<h where scalars[k] == 0x40 { a = k + 1 }
                hostEnd = a
                while hostEnd < h && scalars[hostEnd] != 0x3A { hostEnd += 1 }
                if hostEnd > a {
                    out.append((slice(i, end), host(a, hostEnd)))
                    i = max(end, i + 1)
                    continue
                }
            }
            if atStart && isLabel(scalars[i]) && scalars[i] != 0x2D {
                // a bare name: labels separated by dots, the last one a known top-level domain (or www. first)
                var j = i
                var labels: [(Int, Int)] = []
                while true {
                    let s = j
                    while j < n && isLabel(scalars[j]) { j += 1 }
                    if j == s { break }
                    labels.append((s, j))
                    if j + 1 < n && scalars[j] == 0x2E && isLabel(scalars[j + 1]) {
                        j += 1
                    } else {
                        break
                    }
                }
                let after: UInt32 = j < n ? scalars[j] : 0x20
                let boundary = !(after == 0x40 || after == 0x5F || (after >= 0x80 && TextNormaliser.isWordScalar(after)))
                if labels.count >= 2, boundary, let last = labels.last {
                    let tld = host(last.0, last.1)
                    let www = host(labels[0].0, labels[0].1) == "www"
                    let alphabetic = tld.unicodeScalars.allSatisfy { $0.value >= 0x61 && $0.value <= 0x7A }
                    if alphabetic && (bareTLDs.contains(tld) || (www && labels.count >= 3 && tld.count >= 2)) {
                        var end = j
                        if j < n && (scalars[j] == 0x2F || scalars[j] == 0x3A || scalars[j] == 0x3F || scalars[j] == 0x23) {
                            end = max(j, pathEnd(j))
                        }
                        out.append((slice(i, end), host(i, j)))
                        i = end
                        continue
                    }
                }
                i = max(j, i + 1)
                continue
            }
            i += 1
        }
        return out
    }

    struct Stats {
        var length = 0
        var caps = 0.0
        var emoji = 0
        var zalgo = 0
        var mentions = 0
    }

    static func stats(_ text: String) -> Stats {
        var st = Stats()
        var upper = 0
        var cased = 0
        for ch in text {
            st.length += 1
            // One ASCII byte: a letter or not, never an emoji (keycaps and "#️" have more scalars) nor a mark. The
            // Unicode property lookups below cost most of this function on ordinary text.
            let bytes = ch.utf8
            if bytes.count == 1, let b = bytes.first, b < 0x80 {
                if b >= 0x41 && b <= 0x5A {
                    upper += 1
                    cased += 1
                } else if b >= 0x61 && b <= 0x7A {
                    cased += 1
                }
                continue
            }
            let scalars = ch.unicodeScalars
            if let first = scalars.first {
                let p = first.properties
                if p.isEmojiPresentation
                    || (p.isEmoji && scalars.contains { $0.value == 0xFE0F || $0.value == 0x20E3 })
                    || (p.isEmoji && first.value >= 0x1F000)
                {
                    st.emoji += 1
                }
                if ch.isLetter {
                    if ch.isUppercase {
                        upper += 1
                        cased += 1
                    } else if ch.isLowercase {
                        cased += 1
                    }
                }
            }
            for s in scalars {
                let c = s.properties.generalCategory
                // combining marks, not the variation selectors and keycap of emoji
                let emojiPart = (s.value >= 0xFE00 && s.value <= 0xFE0F) || s.value == 0x20E3 || (s.value >= 0xE0100 && s.value <= 0xE01EF)
                if (c == .nonspacingMark || c == .enclosingMark) && !emojiPart { st.zalgo += 1 }
            }
        }
        // @name, not in an e-mail address
        if text.utf8.contains(0x40) {
            var prev: Character? = nil
            var iterator = text.makeIterator()
            var current = iterator.next()
            while let ch = current {
                let next = iterator.next()
                if ch == "@", prev == nil || !(prev!.isLetter || prev!.isNumber || prev! == "." || prev! == "_"),
                    let nx = next, nx.isLetter || nx.isNumber || nx == "_"
                {
                    st.mentions += 1
                }
                prev = ch
                current = next
            }
        }
        st.caps = cased > 0 ? Double(upper) / Double(cased) : 0
        return st
    }
}
