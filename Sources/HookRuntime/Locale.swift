import Foundation
import HookbotConfig
import IMCore

/// Locale tags as plugins and members write them (`zh-CN`, `zh_cn`, `en`, `zh-Hant-TW`), and the order
/// in which their translations are tried.
public enum LocaleTag {
    /// Longest tag accepted (BCP 47's practical limit).
    public static let maxLength = 35

    /// The tag in its usual spelling (`zh_cn` → `zh-CN`, `ZH-hant-tw` → `zh-Hant-TW`), or nil when it is
    /// not one: a language of 2–8 letters, then subtags of 1–8 letters or digits, separated by `-` or `_`.
    public static func normalise(_ text: String) -> String? {
        let raw = text.trimmingCharacters(in: .whitespaces)
        guard !raw.isEmpty, raw.utf8.count <= maxLength else { return nil }
        let parts = raw.split(separator: "-", omittingEmptySubsequences: false)
            .flatMap { $0.split(separator: "_", omittingEmptySubsequences: false) }
        guard let language = parts.first, (2...8).contains(language.count), language.allSatisfy(\.isASCIILetterOrDigit),
            language.allSatisfy(\.isLetter)
        else { return nil }
        var out = [language.lowercased()]
        for part in parts.dropFirst() {
            guard (1...8).contains(part.count), part.allSatisfy(\.isASCIILetterOrDigit) else { return nil }
            if part.count == 4, part.allSatisfy(\.isLetter) {
                out.append(part.prefix(1).uppercased() + part.dropFirst().lowercased()) // script: Hant
            } else if part.count == 2, part.allSatisfy(\.isLetter) {
                out.append(part.uppercased()) // region: CN
            } else {
                out.append(part.lowercased())
            }
        }
        return out.joined(separator: "-")
    }

    /// The tags tried for `tag`, most specific first: `zh-Hant-TW` → `zh-Hant-TW`, `zh-Hant`, `zh`. Chinese
    /// regions imply their script: `zh-TW`, `zh-HK`, `zh-MO` → … `zh-Hant`, `zh`; `zh-CN`, `zh-SG`,
    /// `zh-MY` → … `zh-Hans`, `zh`.
    public static func chain(_ tag: String) -> [String] {
        var parts = tag.split(separator: "-").map(String.init)
        var out: [String] = []
        while !parts.isEmpty {
            out.append(parts.joined(separator: "-"))
            parts.removeLast()
        }
        if tag.hasPrefix("zh-"), !out.contains("zh-Hant"), !out.contains("zh-Hans"), let region = tag.split(separator: "-").last {
            let script: String? =
                ["TW", "HK", "MO"].contains(region) ? "zh-Hant" : ["CN", "SG", "MY"].contains(region) ? "zh-Hans" : nil
            if let script, let zh = out.firstIndex(of: "zh") { out.insert(script, at: zh) }
        }
        return out
    }

    /// Every tag tried for `tag`: its chain, then the other locales of `available` in the same language
    /// (a member who chose `zh` or `zh-HK` reads `zh-CN` rather than the default), then the same for the
    /// default locale; each once.
    static func fallbacks(_ tag: String?, defaultLocale: String, available: [String] = []) -> [String] {
        var out: [String] = []
        func add(_ t: String) {
            let mine = chain(t)
            let language = mine.last ?? t
            for c in mine + available.filter({ $0.hasPrefix(language + "-") }).sorted() where !out.contains(c) { out.append(c) }
        }
        if let tag { add(tag) }
        add(defaultLocale)
        return out
    }
}

extension Character {
    fileprivate var isASCIILetterOrDigit: Bool { isASCII && (isLetter || isNumber) }
}

/// One plugin's translations: per locale, the texts by (dotted) key, read from its locale files.
///
/// Where they are: a folder plugin's `plugins/<name>/locales/<locale>.toml`; a single-file plugin's
/// `plugins/locales/<name>/<locale>.toml` (a folder beside `<name>.lua` would look like a folder plugin).
/// Tables nest keys (`[mod] warned = "…"` is `mod.warned`); every value is a string.
public struct LocaleCatalog: Sendable, Hashable {
    /// At most this many locale files per plugin, bytes per file, and keys per plugin (all files).
    public static let maxFiles = 64
    public static let maxFileBytes = 512 * 1024
    public static let maxKeys = 20_000
    /// A translated text is cut to this many bytes.
    public static let maxTextBytes = 16 * 1024

    /// Locale (normalised tag) → key → text.
    public private(set) var tables: [String: [String: String]] = [:]
    /// Locale → the file it was read from, for warnings.
    public private(set) var files: [String: String] = [:]
    /// The locale directory as errors and warnings name it (`plugins/locales/autoreply`).
    public private(set) var label = ""

    public init() {}

    public var isEmpty: Bool { tables.isEmpty }
    /// The locales there are files for, sorted.
    public var locales: [String] { tables.keys.sorted() }

    /// Where the locale files of the plugin at `pluginPath` are (`…/name/init.lua` or `…/name.lua`), in
    /// the plugins directory `directory`.
    public static func directory(forPlugin pluginPath: String, key: String, in directory: URL) -> URL {
        if URL(fileURLWithPath: pluginPath).lastPathComponent == "init.lua" {
            return directory.appendingPathComponent(key).appendingPathComponent("locales")
        }
        return directory.appendingPathComponent("locales").appendingPathComponent(key)
    }

    /// The `*.toml` files of a locale directory, sorted (none when it does not exist).
    static func tomlFiles(in dir: URL) -> [URL] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
        return names.filter { $0.hasSuffix(".toml") && !$0.hasPrefix(".") }.sorted().map { dir.appendingPathComponent($0) }
    }

    /// What the locale files hold, to notice a change (hot reload).
    static func fingerprint(of dir: URL) -> String {
        tomlFiles(in: dir).map { url in
            url.path + "\n" + String(decoding: FileManager.default.contents(atPath: url.path) ?? Data(), as: UTF8.self)
        }.joined(separator: "\u{0}")
    }

    /// Reads every `<locale>.toml` of `dir`; a missing directory is an empty catalog. `label` is how
    /// errors name the directory (`plugins/locales/autoreply`).
    public static func load(from dir: URL, label: String) throws(ConfigurationError) -> LocaleCatalog {
        var catalog = LocaleCatalog()
        catalog.label = label
        let files = tomlFiles(in: dir)
        guard files.count <= maxFiles else {
            throw ConfigurationError(message: "\(files.count) locale files; at most \(maxFiles) per plugin", file: label)
        }
        var keys = 0
        for url in files {
            let name = "\(label)/\(url.lastPathComponent)"
            let stem = String(url.lastPathComponent.dropLast(".toml".count))
            guard let tag = LocaleTag.normalise(stem) else {
                throw ConfigurationError(
                    message: "'\(stem)' is not a locale tag (name the file like en.toml, zh-CN.toml, zh-Hant.toml)", file: name)
            }
            if let other = catalog.files[tag] {
                throw ConfigurationError(message: "locale \(tag) is also read from \(other)", file: name)
            }
            guard let data = FileManager.default.contents(atPath: url.path) else {
                throw ConfigurationError(message: "cannot read the file", file: name)
            }
            guard data.count <= maxFileBytes else {
                throw ConfigurationError(message: "\(data.count) bytes; a locale file holds at most \(maxFileBytes)", file: name)
            }
            guard let text = String(data: data, encoding: .utf8) else {
                throw ConfigurationError(message: "not UTF-8 text", file: name)
            }
            let file = try ConfigFile(text: text, name: name)
            var table: [String: String] = [:]
            try flatten(file.root, prefix: "", into: &table, file: file)
            keys += table.count
            guard keys <= maxKeys else {
                throw ConfigurationError(message: "more than \(maxKeys) keys in this plugin's locale files", file: name)
            }
            catalog.tables[tag] = table
            catalog.files[tag] = name
        }
        return catalog
    }

    private static func flatten(
        _ object: [String: JSONValue], prefix: String, into table: inout [String: String], file: ConfigFile
    ) throws(ConfigurationError) {
        for (key, value) in object {
            let path = prefix.isEmpty ? key : prefix + "." + key
            switch value {
            case .string(let text): table[path] = text
            case .object(let inner): try flatten(inner, prefix: path, into: &table, file: file)
            default:
                throw file.error(path, "a translation must be a string (or a table of them), got \(value.jsonString())")
            }
        }
    }

    /// The text of `key` in the first of `locales` that has it. With a number `count`, the plural form is
    /// looked for first: `key.zero` (count 0, when given), `key.one` (count 1), `key.other`; then `key`.
    func lookup(_ key: String, in locales: [String], count: Double?) -> String? {
        var candidates: [String] = []
        if let count {
            if count == 0 { candidates.append(key + ".zero") }
            if count == 1 { candidates.append(key + ".one") }
            candidates.append(key + ".other")
        }
        candidates.append(key)
        for locale in locales {
            guard let table = tables[locale] else { continue }
            for candidate in candidates {
                if let text = table[candidate] { return text }
            }
        }
        return nil
    }

    /// `key` translated for the first locale of `locales` that has it, `{name}` placeholders filled from
    /// `vars` (`{{` and `}}` are literal braces), or the key itself when no locale has it.
    public func text(_ key: String, vars: [String: JSONValue] = [:], locales: [String]) -> String {
        let count = vars["count"]?.doubleValue
        guard let template = lookup(key, in: locales, count: count) else { return key }
        return StoredText.cut(Self.fill(template, vars), to: Self.maxTextBytes)
    }

    /// Fills `{name}` placeholders (letters, digits, `_`, `.`, `-`) from `vars`; a placeholder with no value
    /// stays as written, so a missing variable shows instead of vanishing. `{{` and `}}` are `{` and `}`.
    /// Written by hand: Foundation has no named-placeholder formatting, and this is one pass.
    public static func fill(_ template: String, _ vars: [String: JSONValue]) -> String {
        guard template.utf8.contains(UInt8(ascii: "{")) || template.utf8.contains(UInt8(ascii: "}")) else { return template }
        var out = ""
        var i = template.startIndex
        while i < template.endIndex {
            let c = template[i]
            let next = template.index(after: i)
            if c == "{", next < template.endIndex, template[next] == "{" {
                out.append("{")
                i = template.index(after: next)
            } else if c == "}", next < template.endIndex, template[next] == "}" {
                out.append("}")
                i = template.index(after: next)
            } else if c == "{", let close = template[next...].firstIndex(of: "}"),
                case let name = template[next..<close], !name.isEmpty,
                name.allSatisfy({ $0.isASCIILetterOrDigit || $0 == "_" || $0 == "." || $0 == "-" })
            {
                if let value = vars[String(name)] { out += display(value) } else { out += template[i...close] }
                i = template.index(after: close)
            } else {
                out.append(c)
                i = next
            }
        }
        return out
    }

    /// How a variable shows in a text: strings as they are, integral numbers without a fraction.
    static func display(_ value: JSONValue) -> String {
        switch value {
        case .string(let s): return s
        case .int(let n): return String(n)
        case .double(let d):
            if d.isFinite, d.rounded() == d, abs(d) < 1e15 { return String(Int64(d)) }
            return String(d)
        case .bool(let b): return b ? "true" : "false"
        case .null: return ""
        default: return value.jsonString()
        }
    }

    /// Keys of other locales that the default locale does not have (members whose locale lacks a key
    /// fall back to the default locale, then see the key itself), as warnings naming file and key.
    public func warnings(defaultLocale: String) -> [String] {
        guard !tables.isEmpty else { return [] }
        let chain = LocaleTag.chain(defaultLocale)
        guard let base = chain.first(where: { tables[$0] != nil }) else {
            let list = locales.joined(separator: ", ")
            return [
                "\(label): no file for the default locale \(defaultLocale) (there are: \(list)); members whose locale has none of these see the keys"
            ]
        }
        let known = Set(tables[base]!.keys)
        var out: [String] = []
        for locale in locales where locale != base {
            let missing = tables[locale]!.keys.filter { key in
                // a plural form counts as present when the default locale has the key in any form
                if known.contains(key) || known.contains(key + ".other") || known.contains(key + ".one") { return false }
                let stem = key.split(separator: ".").dropLast().joined(separator: ".")
                let form = key.split(separator: ".").last.map(String.init) ?? ""
                if ["zero", "one", "other"].contains(form), known.contains(stem) || known.contains(stem + ".other") {
                    return false
                }
                return true
            }.sorted()
            guard !missing.isEmpty else { continue }
            let shown = missing.prefix(10).joined(separator: ", ") + (missing.count > 10 ? " … (\(missing.count) in all)" : "")
            out.append(
                "\(files[locale] ?? locale): \(missing.count == 1 ? "key" : "keys") \(shown) not in \(files[base] ?? base) (the default locale \(defaultLocale))"
            )
        }
        return out
    }
}
