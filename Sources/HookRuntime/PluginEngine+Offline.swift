import CLua
import Foundation
import IMCore

/// One receiver of `on_offline`: a member with no connected session who is about to get a push.
public struct OfflineReceiver: Sendable, Equatable {
    public var id: String
    /// Whether the message mentions this receiver (`mentionPids`, or `mentionAll`).
    public var mentioned: Bool
    /// The notification (`title`, `body`, `badge`, `sound`, `data`, `collapse_id`); nil: no push.
    public var notification: [String: JSONValue]?

    public init(id: String, mentioned: Bool = false, notification: [String: JSONValue]?) {
        self.id = id
        self.mentioned = mentioned
        self.notification = notification
    }
}

/// What the `on_offline` chain decided.
public struct OfflineOutcome: Sendable {
    /// The receivers in the order given, each with its final notification (nil: dropped).
    public var receivers: [OfflineReceiver]
    /// Whether any enabled plugin has an `on_offline` hook (when none does, the receivers are as given).
    public var hooked: Bool
    public var actions: [HookAction]
    public var errors: [HookError]
}

/// Notification tables as `on_offline` reads and writes them.
public enum OfflineNotification {
    /// The fields a notification may have.
    static let fields: Set<String> = ["title", "body", "badge", "sound", "data", "collapse_id"]

    /// `changes` merged over `base`: a field set to JSON null is removed; `data` is merged key by key.
    public static func merge(_ base: [String: JSONValue], _ changes: [String: JSONValue]) -> [String: JSONValue] {
        var out = base
        for (key, value) in changes {
            if key == "data", case .object(let entries) = value {
                var data = base["data"]?.objectValue ?? [:]
                for (name, entry) in entries { data[name] = entry == .null ? nil : entry }
                out["data"] = .object(data)
            } else {
                out[key] = value == .null ? nil : value
            }
        }
        return out
    }

    /// What turns `base` into `target` under `merge`: changed fields, removed ones as null.
    public static func changes(from base: [String: JSONValue], to target: [String: JSONValue]) -> [String: JSONValue] {
        var out: [String: JSONValue] = [:]
        for key in Set(base.keys).union(target.keys) where base[key] != target[key] {
            if key == "data", let before = base["data"]?.objectValue, let after = target["data"]?.objectValue {
                var entries: [String: JSONValue] = [:]
                for name in Set(before.keys).union(after.keys) where before[name] != after[name] {
                    entries[name] = after[name] ?? .null
                }
                out["data"] = .object(entries)
            } else {
                out[key] = target[key] ?? .null
            }
        }
        return out
    }

    /// A plugin's notification table checked and turned into changes: `title`, `body`, `sound`,
    /// `collapse_id` strings, `badge` an integer of 0 or more, `data` a table; `false` removes a field.
    static func read(_ value: JSONValue, at path: String) throws -> [String: JSONValue] {
        let table: [String: JSONValue]
        switch value {
        case .object(let object): table = object
        case .array(let list) where list.isEmpty: table = [:]
        default: throw LuaConversionError("\(path) must be a notification table or false")
        }
        var out: [String: JSONValue] = [:]
        for (key, field) in table {
            guard fields.contains(key) else {
                throw LuaConversionError("\(path).\(key) is not a notification field (title, body, badge, sound, data, collapse_id)")
            }
            switch (key, field) {
            case (_, .bool(false)): out[key] = .null
            case ("badge", _):
                guard let badge = field.intValue, badge >= 0 else { throw LuaConversionError("\(path).badge must be an integer >= 0") }
                out[key] = .int(badge)
            case ("data", .object), ("data", .array([])): out[key] = .object(field.objectValue ?? [:])
            case ("data", _): throw LuaConversionError("\(path).data must be a table")
            case (_, .string): out[key] = field
            default: throw LuaConversionError("\(path).\(key) must be a string or false")
            }
        }
        return out
    }
}

extension PluginEngine {
    /// `on_offline(msg, receivers, ctx)` (LeanCloud's `_receiversOffline`): each plugin with the hook, in
    /// priority order, gets the receivers as the previous one left them (a receiver dropped is no longer
    /// listed) and returns nil (no change), `false` (no push for anyone: the chain ends) or a table keyed by
    /// receiver id or list index whose values are a notification table (merged over the receiver's) or
    /// `false` (no push for that receiver). A plugin that fails, overruns or returns something else changes
    /// nothing. With `until`, no hook runs past that instant.
    public func offline(
        _ message: HookMessage, receivers: [OfflineReceiver], until: ContinuousClock.Instant? = nil
    ) -> OfflineOutcome {
        let hooked = ordered.contains { !$0.disabled && $0.has(.onOffline) }
        guard hooked else { return OfflineOutcome(receivers: receivers, hooked: false, actions: [], errors: []) }
        var current = receivers
        let pushedMessage = pushMessage(message, until: until)
        let run = dispatch(
            .onOffline, cid: message.cid, messageID: message.id, until: until,
            push: { L in
                _ = pushedMessage.push(L, message)
                let listed = current.compactMap { receiver -> JSONValue? in
                    guard let notification = receiver.notification else { return nil }
                    return .object([
                        "id": .string(receiver.id), "mentioned": .bool(receiver.mentioned), "notification": .object(notification),
                    ])
                }
                if !luaPush(L, json: .array(listed)) { lua_createtable(L, 0, 0) }
                return 2
            },
            read: { _, L -> Bool? in
                let next = try Self.readOffline(L, current)
                current = next
                // Nobody left to push to: the rest of the chain has nothing to decide.
                return next.allSatisfy { $0.notification == nil } ? true : nil
            })
        return OfflineOutcome(receivers: current, hooked: true, actions: run.actions, errors: run.errors)
    }

    /// The receivers after one plugin's answer (on top of the stack); throws when it is not a valid one.
    private static func readOffline(_ L: LuaRef, _ receivers: [OfflineReceiver]) throws -> [OfflineReceiver] {
        let t = lua_gettop(L)
        switch lua_type(L, t) {
        case LUA_TNIL, LUA_TNONE: return receivers
        case LUA_TBOOLEAN where lua_toboolean(L, t) == 0:
            return receivers.map { OfflineReceiver(id: $0.id, mentioned: $0.mentioned, notification: nil) }
        case LUA_TTABLE: break
        default:
            throw LuaConversionError(
                "on_offline must return nil, false or a table of receivers (id or index -> notification or false), got \(luaTypeName(L, t))"
            )
        }
        // The list the plugin saw: the receivers not dropped yet.
        let listed = receivers.indices.filter { receivers[$0].notification != nil }
        var out = receivers
        guard lua_checkstack(L, 4) != 0 else { throw LuaConversionError("on_offline: stack overflow") }
        lua_pushnil(L)
        while lua_next(L, t) != 0 {
            let index: Int
            let name: String
            switch lua_type(L, -2) {
            case LUA_TSTRING:
                name = luaString(L, -2) ?? ""
                guard let found = listed.first(where: { receivers[$0].id == name }) else {
                    lua_settop(L, t)
                    throw LuaConversionError("on_offline returned '\(name)', who is not among the receivers")
                }
                index = found
            case LUA_TNUMBER where lua_isinteger(L, -2) != 0:
                let position = Int(lua_tointegerx(L, -2, nil))
                guard (1...listed.count).contains(position) else {
                    lua_settop(L, t)
                    throw LuaConversionError("on_offline returned index \(position); there are \(listed.count) receivers")
                }
                index = listed[position - 1]
                name = receivers[index].id
            default:
                let type = luaTypeName(L, -2)
                lua_settop(L, t)
                throw LuaConversionError("on_offline's result must be keyed by receiver id or index, got a \(type) key")
            }
            let value: JSONValue
            do { value = try luaToJSON(L, -1, path: "on_offline[\(name)]") } catch {
                lua_settop(L, t)
                throw error
            }
            lua_settop(L, -2)
            if value == .bool(false) {
                out[index].notification = nil
            } else {
                let changes = try OfflineNotification.read(value, at: "on_offline[\(name)]")
                out[index].notification = OfflineNotification.merge(out[index].notification ?? [:], changes)
            }
        }
        return out
    }
}
