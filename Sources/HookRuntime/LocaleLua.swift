import CLua
import Foundation
import HookbotConfig
import IMCore
import LuaSandbox

/// Where members' and conversations' locales are kept: a state namespace of the host's own (no plugin can
/// be named `hookbot.…`), keys `user:<uid>` and `conv:<cid>`, values the tags. Its own namespace, so that
/// many members choosing a language can never fill the one the host keeps mutes and roles in.
let localeStatePlugin = "hookbot.locale"

/// The language choices the host keeps (what `ctx.locale.set_user` / `set_conv` store), for hosts and
/// test runners that set them without a plugin.
public enum LocaleChoices {
    /// Stores `tag` (normalised) as `user`'s choice; nil clears it. False when `tag` is not a locale tag.
    @discardableResult
    public static func set(user: String, to tag: String?, in store: HookStateStore, now: Double) throws -> Bool {
        guard let tag else {
            try store.delete(plugin: localeStatePlugin, key: "user:\(user)")
            return true
        }
        guard let normalised = LocaleTag.normalise(tag) else { return false }
        try store.set(plugin: localeStatePlugin, key: "user:\(user)", value: .string(normalised), now: now)
        return true
    }

    /// `user`'s stored choice.
    public static func user(_ user: String, in store: HookStateStore, now: Double) -> String? {
        (try? store.get(plugin: localeStatePlugin, key: "user:\(user)", now: now))??.stringValue
    }
}

/// The member and conversation whose locale `ctx.t` uses during one event.
struct LocaleSubject {
    /// The member the event is about (a message's sender, a cmd's sender, the one member who joined…).
    var user: String?
    /// The locale the member's client put on the message (`attrs.lang` or `attrs.locale`), normalised.
    var messageLocale: String?
    /// Stored choices read during this event (`user:<uid>` / `conv:<cid>` → tag or nil).
    var cache: [String: String?] = [:]
}

/// Locale settings and the current event's subject, shared by the plugins of one engine.
final class LocaleContext {
    /// `[bot] locale`: what members who chose nothing (in conversations that chose nothing) get.
    var defaultLocale = "en" {
        didSet { chains.removeAll() }
    }
    /// Set and restored for every event, on the runtime's thread only and never overlapping (no dynamic
    /// exclusivity check: it was a measured share of a trivial hook call).
    @exclusivity(unchecked) var subject: LocaleSubject?
    /// The locales tried for a tag, per loaded plugin version (its files decide the same-language ones).
    private var chains: [ChainKey: [String]] = [:]

    private struct ChainKey: Hashable {
        var instance: Int
        var tag: String
    }

    func fallbacks(_ tag: String, for plugin: LuaPlugin) -> [String] {
        let key = ChainKey(instance: plugin.instanceID, tag: tag)
        if let known = chains[key] { return known }
        if chains.count >= 4096 { chains.removeAll() } // versions come and go with reloads
        let chain = LocaleTag.fallbacks(tag, defaultLocale: defaultLocale, available: plugin.catalog.locales)
        chains[key] = chain
        return chain
    }
}

extension HookMessage {
    /// The locale the sending client declared on the message (`attrs.lang`, else `attrs.locale`).
    var declaredLocale: String? {
        // Asked for every message: no array of keys, no lookups when there are no attrs.
        guard !attrs.isEmpty else { return nil }
        if let tag = attrs["lang"]?.stringValue.flatMap(LocaleTag.normalise) { return tag }
        return attrs["locale"]?.stringValue.flatMap(LocaleTag.normalise)
    }
}

extension HookEvent {
    /// The member a conversation event is about, for `ctx.t`: the one member who joined or left (several:
    /// none, the conversation's locale), or who recalled, edited or changed something.
    var localeUser: String? {
        switch self {
        case .membersJoined(_, let members, _, _), .membersLeft(_, let members, _):
            return members.count == 1 ? members[0] : nil
        case .invited(_, let by), .kicked(_, let by), .conversationUpdated(_, _, let by), .recalled(_, _, let by, _):
            return by
        case .edited(let message, _): return message.from
        }
    }
}

extension PluginEngine {
    /// `[bot] locale`: the locale of members and conversations that chose none (`en` by default).
    public var defaultLocale: String { env.locale.defaultLocale }

    /// Sets the default locale; false (and unchanged) when `tag` is not a locale tag.
    @discardableResult
    public func setDefaultLocale(_ tag: String) -> Bool {
        guard let tag = LocaleTag.normalise(tag) else { return false }
        env.locale.defaultLocale = tag
        return true
    }

    /// Warnings about the loaded plugins' locale files: keys the default locale lacks.
    public var localeWarnings: [String] {
        ordered.sorted { $0.name < $1.name }.flatMap { $0.catalog.warnings(defaultLocale: env.locale.defaultLocale) }
    }

    /// Makes `user` (and the locale their message declares) the subject of `ctx.t` for one event; returns
    /// the previous subject for `leaveLocale`.
    func enterLocale(user: String?, messageLocale: String? = nil) -> LocaleSubject? {
        let saved = env.locale.subject
        env.locale.subject = LocaleSubject(user: user.flatMap { $0.isEmpty ? nil : $0 }, messageLocale: messageLocale)
        return saved
    }

    func leaveLocale(_ saved: LocaleSubject?) { env.locale.subject = saved }

    /// Reads the locale files of the plugin at `path` (an empty catalog when there are none); a bad file
    /// is a load error naming the file, its line and the key.
    func localeCatalog(forPlugin path: String, key: String) throws(HookError) -> LocaleCatalog {
        let dir = LocaleCatalog.directory(forPlugin: path, key: key, in: directory)
        let label =
            dir.path.hasPrefix(directory.path + "/")
            ? directory.lastPathComponent + "/" + dir.path.dropFirst(directory.path.count + 1) : dir.path
        do {
            let catalog = try LocaleCatalog.load(from: dir, label: label)
            for warning in catalog.warnings(defaultLocale: env.locale.defaultLocale) {
                logger.warning("\(warning)", metadata: ["plugin": "\(key)"])
            }
            return catalog
        } catch {
            let message = error.key.map { "\($0): \(error.message)" } ?? error.message
            throw HookError(
                plugin: key, hook: "load", source: error.file, line: error.line, reason: .invalidPlugin("locale file: \(message)"))
        }
    }

    /// What the locale files of the plugin at `path` hold, for hot reload.
    func localeFingerprint(forPlugin path: String, key: String) -> String {
        LocaleCatalog.fingerprint(of: LocaleCatalog.directory(forPlugin: path, key: key, in: directory))
    }
}

extension PluginEnvironment {
    /// A stored choice (`user:<uid>` or `conv:<cid>`), read once per event.
    func storedLocale(_ key: String) -> String? {
        if let cached = locale.subject?.cache[key] { return cached }
        let value = (try? store.get(plugin: localeStatePlugin, key: key, now: clock.now()))??.stringValue
        locale.subject?.cache[key] = .some(value)
        return value
    }

    /// The locale `ctx.t` uses: `user`'s `!lang` choice, else the locale their current message declares,
    /// else the conversation's choice, else the default.
    func resolveLocale(user: String?, cid: String?) -> (tag: String, from: String) {
        if let user, let tag = storedLocale("user:\(user)") { return (tag, "member") }
        if let subject = locale.subject, let tag = subject.messageLocale, user == subject.user { return (tag, "message") }
        if let cid, let tag = storedLocale("conv:\(cid)") { return (tag, "conversation") }
        return (locale.defaultLocale, "default")
    }
}

@inline(__always) private func localeFail(_ L: LuaRef, _ msg: String) -> Int32 {
    luaPush(L, luaWhere(L) + msg)
    return -1
}

/// Reads `{locale = …, user = …, conv = …}` at `index` (nil or absent: none) for `fname`.
private func localeOptions(_ L: LuaRef, _ index: Int32, _ fname: String) throws -> (locale: String?, user: String?, conv: String?) {
    switch lua_type(L, index) {
    case LUA_TNONE, LUA_TNIL: return (nil, nil, nil)
    case LUA_TTABLE: break
    default: throw LuaConversionError("\(fname): options must be a table {locale = …, user = …, conv = …}")
    }
    func field(_ key: StaticString) throws -> String? {
        let t = luaRawField(L, index, key)
        defer { lua_settop(L, -2) }
        switch t {
        case LUA_TNIL: return nil
        case LUA_TSTRING: return luaString(L, -1)
        default: throw LuaConversionError("\(fname): option \(key) must be a string, got \(luaTypeName(L, -1))")
        }
    }
    var locale = try field("locale")
    if let given = locale {
        guard let tag = LocaleTag.normalise(given) else {
            throw LuaConversionError("\(fname): '\(given.prefix(40))' is not a locale tag (en, zh-CN, zh-Hant …)")
        }
        locale = tag
    }
    return (locale, try field("user"), try field("conv"))
}

/// `ctx.t(key, vars, opts)`: the plugin's text for `key` in the current member's locale.
let cbT: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    guard lua_type(L, 1) == LUA_TSTRING, let key = luaString(L, 1) else {
        return localeFail(L, "ctx.t: the key must be a string, got \(luaTypeName(L, 1))")
    }
    var vars: [String: JSONValue] = [:]
    switch lua_type(L, 2) {
    case LUA_TNONE, LUA_TNIL: break
    case LUA_TTABLE:
        do {
            let value = try luaToJSON(L, 2, path: "vars")
            if case .object(let object) = value { vars = object }
        } catch {
            return localeFail(L, "ctx.t: \(error)")
        }
    default: return localeFail(L, "ctx.t: vars must be a table, got \(luaTypeName(L, 2))")
    }
    let options: (locale: String?, user: String?, conv: String?)
    do { options = try localeOptions(L, 3, "ctx.t") } catch { return localeFail(L, "\(error)") }
    let env = plugin.env
    let tag =
        options.locale
        ?? env.resolveLocale(
            user: options.user ?? (options.conv == nil ? env.locale.subject?.user : nil),
            cid: options.conv ?? plugin.currentCid
        ).tag
    let chain = env.locale.fallbacks(tag, for: plugin)
    luaPush(L, plugin.catalog.text(StoredText.cut(key, to: 256), vars: vars, locales: chain))
    return 1
}

/// `ctx.locale.*`: `hb.locale(op, …)`.
let cbLocale: hb_swift_fn = { L in
    guard let L, let plugin = pluginOf(L) else { return 0 }
    let env = plugin.env
    let op = luaString(L, 1) ?? ""
    func idArg(_ what: String) -> String? {
        guard lua_type(L, 2) == LUA_TSTRING, let id = luaString(L, 2), !id.isEmpty, id.utf8.count <= 256 else { return nil }
        _ = what
        return id
    }
    switch op {
    case "current":
        let options: (locale: String?, user: String?, conv: String?)
        do { options = try localeOptions(L, 2, "ctx.locale.current") } catch { return localeFail(L, "\(error)") }
        if let forced = options.locale {
            luaPush(L, forced)
            luaPush(L, "forced")
            return 2
        }
        let (tag, from) = env.resolveLocale(
            user: options.user ?? (options.conv == nil ? env.locale.subject?.user : nil),
            cid: options.conv ?? plugin.currentCid)
        luaPush(L, tag)
        luaPush(L, from)
        return 2
    case "default":
        luaPush(L, env.locale.defaultLocale)
        return 1
    case "available":
        let locales = plugin.catalog.locales
        lua_createtable(L, Int32(locales.count), 0)
        for (i, tag) in locales.enumerated() {
            luaPush(L, tag)
            lua_rawseti(L, -2, Int64(i + 1))
        }
        return 1
    case "user", "conv":
        let fname = op == "user" ? "ctx.locale.user(uid)" : "ctx.locale.conv(cid)"
        guard let id = idArg(op) else { return localeFail(L, "\(fname): a non-empty id (a string) is expected") }
        if let tag = env.storedLocale("\(op):\(id)") { luaPush(L, tag) } else { lua_pushnil(L) }
        return 1
    case "set_user", "set_conv":
        let scope = op == "set_user" ? "user" : "conv"
        let fname = op == "set_user" ? "ctx.locale.set_user(uid, tag)" : "ctx.locale.set_conv(cid, tag)"
        guard let id = idArg(scope) else { return localeFail(L, "\(fname): a non-empty id (a string) is expected") }
        let key = "\(scope):\(id)"
        var stored: String?
        switch lua_type(L, 3) {
        case LUA_TNONE, LUA_TNIL: stored = nil
        case LUA_TSTRING:
            let given = luaString(L, 3) ?? ""
            if !given.isEmpty {
                guard let tag = LocaleTag.normalise(given) else {
                    lua_pushnil(L)
                    luaPush(L, "'\(given.prefix(40))' is not a locale tag (en, zh-CN, zh-Hant …)")
                    return 2
                }
                stored = tag
            }
        default: return localeFail(L, "\(fname): the tag must be a string or nil, got \(luaTypeName(L, 3))")
        }
        do {
            if let stored {
                try env.store.set(plugin: localeStatePlugin, key: key, value: .string(stored), now: env.clock.now())
            } else {
                try env.store.delete(plugin: localeStatePlugin, key: key)
            }
        } catch {
            lua_pushnil(L)
            luaPush(L, "\(fname): not stored: \(error)")
            return 2
        }
        env.locale.subject?.cache[key] = .some(stored)
        if let stored { luaPush(L, stored) } else { lua_pushboolean(L, 1) }
        return 1
    default:
        return localeFail(L, "ctx.locale: unknown operation '\(op)'")
    }
}
