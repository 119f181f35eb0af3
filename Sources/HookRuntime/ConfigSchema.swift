import IMCore

/// Where a key of the host's configuration (a dotted path like `plugins.autoreply.rules`) is set: the
/// file and, when known, the line.
public typealias ConfigLocator = @Sendable (_ keyPath: String) -> (file: String, line: Int?)?

/// The settings a plugin accepts in its `[plugins.<name>]` table: declared with `schema = { key = { type =
/// …, default = …, values = {…}, description = … } }`, or, without one, the keys of its `config` defaults
/// with their types. Settings the schema does not name, of the wrong type or not among the allowed values
/// are load errors (`HookError.Reason.config`), so a typo in `hookbot.toml` is not silently ignored.
struct ConfigSchema: Sendable, Hashable {
    enum Kind: String, Sendable, Hashable, CaseIterable {
        case string, number, integer, boolean, array, table, any
    }

    struct Field: Sendable, Hashable {
        var kinds: Set<Kind>
        var values: [JSONValue]?
        var defaultValue: JSONValue?
        var description: String?
        var required = false
    }

    var fields: [String: Field]

    /// The defaults the fields declare.
    var defaults: [String: JSONValue] { fields.compactMapValues(\.defaultValue) }

    /// The schema the `config` defaults imply. `false` accepts any value (plugins write `false` for "off",
    /// `faq_module = false` for "no module"), an empty table a list or a table, and every setting accepts
    /// `false` to turn it off.
    static func inferred(from defaults: [String: JSONValue]) -> ConfigSchema {
        ConfigSchema(
            fields: defaults.mapValues { value in
                let kinds: Set<Kind> =
                    switch value {
                    case .bool(false), .null: [.any]
                    case .bool: [.boolean]
                    case .int, .double: [.number, .boolean]
                    case .string: [.string, .boolean]
                    case .array(let items) where items.isEmpty: [.array, .table, .boolean]
                    case .object(let entries) where entries.isEmpty: [.array, .table, .boolean]
                    case .array: [.array, .boolean]
                    case .object: [.table, .boolean]
                    }
                return Field(kinds: kinds, defaultValue: value)
            })
    }

    /// A declared schema (the plugin's `schema` table, converted to JSON); throws a message on a malformed one.
    static func declared(_ schema: JSONValue) throws(SchemaError) -> ConfigSchema {
        guard case .object(let entries) = schema else { throw SchemaError("schema must be a table of settings") }
        var fields: [String: Field] = [:]
        for (key, entry) in entries {
            guard case .object(let spec) = entry else { throw SchemaError("schema.\(key) must be a table") }
            let unknown = Set(spec.keys).subtracting(["type", "default", "values", "description", "required"])
            if let first = unknown.sorted().first { throw SchemaError("schema.\(key): unknown field '\(first)'") }
            var kinds: Set<Kind> = [.any]
            switch spec["type"] {
            case nil: break
            case .string(let name)?:
                guard let kind = Kind(rawValue: name) else { throw SchemaError("schema.\(key).type: unknown type '\(name)'") }
                kinds = [kind]
            case .array(let names)?:
                kinds = []
                for name in names {
                    guard let text = name.stringValue, let kind = Kind(rawValue: text) else {
                        throw SchemaError("schema.\(key).type: unknown type \(name)")
                    }
                    kinds.insert(kind)
                }
            default:
                throw SchemaError("schema.\(key).type must be a type name or a list of them")
            }
            var field = Field(
                kinds: kinds, values: spec["values"]?.arrayValue, defaultValue: spec["default"],
                description: spec["description"]?.stringValue, required: spec["required"] == .bool(true))
            if let values = spec["values"], field.values == nil, values != .array([]) {
                throw SchemaError("schema.\(key).values must be a list")
            }
            if field.values?.isEmpty == true { field.values = nil }
            if let value = field.defaultValue, let problem = field.problem(with: value) {
                throw SchemaError("schema.\(key).default \(problem)")
            }
            fields[key] = field
        }
        return ConfigSchema(fields: fields)
    }

    /// The first setting that does not fit, as (key, what is wrong); nil when all fit.
    func problem(with settings: [String: JSONValue]) -> (key: String, message: String)? {
        for key in settings.keys.sorted() {
            guard let field = fields[key] else {
                let known = fields.keys.sorted().joined(separator: ", ")
                return (key, known.isEmpty ? "unknown setting (this plugin takes none)" : "unknown setting (known: \(known))")
            }
            if let problem = field.problem(with: settings[key] ?? .null) { return (key, problem) }
        }
        for key in fields.keys.sorted() where fields[key]?.required == true && settings[key] == nil {
            return (key, "is required")
        }
        return nil
    }

    struct SchemaError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}

extension ConfigSchema.Field {
    /// What is wrong with `value` for this field, or nil.
    func problem(with value: JSONValue) -> String? {
        if let values, !values.contains(value) {
            return "must be one of \(values.map { $0.jsonString() }.joined(separator: ", ")), not \(value.jsonString())"
        }
        if kinds.contains(.any) || kinds.contains(where: { $0.matches(value) }) { return nil }
        let named = ConfigSchema.Kind.allCases.filter { kinds.contains($0) && $0 != .boolean }.map(\.phrase)
        let expected = named.isEmpty ? "true or false" : named.joined(separator: " or ") + (kinds.contains(.boolean) ? " (or false)" : "")
        return "must be \(expected), not \(value.kindName)"
    }
}

extension ConfigSchema.Kind {
    /// "a string", "a list", … for messages.
    var phrase: String {
        switch self {
        case .string: "a string"
        case .number: "a number"
        case .integer: "an integer"
        case .boolean: "true or false"
        case .array: "a list"
        case .table: "a table"
        case .any: "anything"
        }
    }

    func matches(_ value: JSONValue) -> Bool {
        switch (self, value) {
        case (.any, _): true
        case (.string, .string): true
        case (.number, .int), (.number, .double): true
        case (.integer, .int): true
        case (.integer, .double(let d)): d.rounded() == d
        case (.boolean, .bool): true
        case (.array, .array): true
        case (.table, .object): true
        // Lua cannot tell an empty list from an empty table.
        case (.table, .array(let items)): items.isEmpty
        case (.array, .object(let entries)): entries.isEmpty
        default: false
        }
    }
}

extension JSONValue {
    /// "a string", "a number", … for messages.
    var kindName: String {
        switch self {
        case .null: "nothing"
        case .bool: "a boolean"
        case .int, .double: "a number"
        case .string: "a string"
        case .array: "a list"
        case .object: "a table"
        }
    }
}
