import Foundation
import IMCore
import Synchronization

/// A custom message type registered by a plugin: a positive type number, a
/// name and a schema for the fields kept in the message's `attrs`.
public struct CustomMessageType: Sendable, Hashable {
    public enum FieldType: String, Sendable, Hashable {
        case string, number, integer, boolean, table, any
    }
    public struct Field: Sendable, Hashable {
        public var type: FieldType
        public var optional: Bool
    }
    public var number: Int
    public var name: String
    public var fields: [String: Field]
    /// Plugin that registered the type.
    public var plugin: String

    /// Returns nil if `attrs` satisfies the schema, else a reason.
    public func validate(attrs: [String: JSONValue]) -> String? {
        for (key, field) in fields.sorted(by: { $0.key < $1.key }) {
            guard let v = attrs[key], v != .null else {
                if field.optional { continue }
                return "\(name): missing field '\(key)'"
            }
            let ok: Bool
            switch field.type {
            case .any: ok = true
            case .string: if case .string = v { ok = true } else { ok = false }
            case .boolean: if case .bool = v { ok = true } else { ok = false }
            case .number: ok = v.doubleValue != nil
            case .integer: ok = v.intValue != nil
            case .table:
                switch v {
                case .array, .object: ok = true
                default: ok = false
                }
            }
            if !ok { return "\(name): field '\(key)' must be \(field.type.rawValue)" }
        }
        // `hookbot.*` keys are the hosts' bookkeeping (a bot message's hop count), not fields of the type.
        for key in attrs.keys.sorted() where fields[key] == nil && !key.hasPrefix("hookbot.") {
            return "\(name): unknown field '\(key)'"
        }
        return nil
    }
}

/// Registry of custom message types, shared by all plugins of a runtime.
/// Registrations are owned by the plugin instance that made them and removed
/// when it unloads (a reloaded version re-registers in `on_load`).
final class TypeRegistry: Sendable {
    typealias Registrations = [Int: (type: CustomMessageType, owner: Int)]
    private let byNumber = Mutex<Registrations>([:])

    func register(_ t: CustomMessageType, owner: Int) -> String? {
        if t.number <= 0 { return "custom message types must be positive numbers" }
        if t.number == HookMessageTypes.card { return "type \(t.number) is the host's card type (ctx.card)" }
        if HookMessageTypes.builtinNames.values.contains(t.name) { return "type name '\(t.name)' is reserved" }
        return byNumber.withLock { byNumber in
            if let existing = byNumber[t.number], existing.type.plugin != t.plugin {
                return "type \(t.number) is already registered by plugin \(existing.type.plugin)"
            }
            if let other = byNumber.values.first(where: { $0.type.name == t.name && $0.type.number != t.number }) {
                return "type name '\(t.name)' is already registered as type \(other.type.number)"
            }
            byNumber[t.number] = (t, owner)
            return nil
        }
    }

    /// Every registration, to put back with `restore` when a new plugin version fails to load.
    func snapshot() -> Registrations { byNumber.withLock { $0 } }

    func restore(_ saved: Registrations) { byNumber.withLock { $0 = saved } }

    func removeAll(owner: Int) { byNumber.withLock { $0 = $0.filter { $0.value.owner != owner } } }

    func type(number: Int) -> CustomMessageType? { byNumber.withLock { $0[number]?.type } }

    func type(named name: String) -> CustomMessageType? {
        byNumber.withLock { $0.values.first(where: { $0.type.name == name })?.type }
    }

    var all: [CustomMessageType] { byNumber.withLock { $0.values.map(\.type).sorted { $0.number < $1.number } } }

    func name(of number: Int) -> String? {
        // Every message asks: LeanCloud's types by MessageType's own switch, without hashing.
        if let t = MessageType(rawValue: number) { return t.name }
        if let n = HookMessageTypes.builtinNames[number] { return n }
        return type(number: number)?.name
    }

    /// nil when valid; custom types that are not registered are not checked.
    func validate(_ m: HookMessage) -> String? {
        if m.type > 0, let t = type(number: m.type) { return t.validate(attrs: m.attrs) }
        return nil
    }
}
