import IMCore

/// How custom conversation attributes look to LeanCloud SDKs.
///
/// Hookbot keeps custom attributes in one JSON object, `attr` (`attr.<key>` in updates and queries). The
/// SDKs treat them as top-level fields of the conversation: `createConversation({ topic })` sends them
/// beside `name`, `conversation.set("topic", …)` updates `topic`, `equalTo("topic", …)` queries it, and
/// query results are read field by field. LeanCloud also has a field named `attr`, an object of its own
/// (`conversation.set("attr.topic", …)`, `get("attr.topic")`): Hookbot keeps it as the custom attribute
/// named `attr`, so an SDK's `attr.topic` is Hookbot's `attr.attr.topic` and never the same value as its
/// `topic`. The protobuf codec maps between the two in both directions, so each client sees a value
/// where it was written.
enum ConversationAttributes {
    /// Top-level fields of a conversation that are not custom attributes.
    static let builtInFields: Set<String> = [
        "objectId", "name", "m", "c", "tr", "unique", "attr", "mu", "lm", "createdAt", "updatedAt", "ttl", "sys",
    ]

    /// Query fields Hookbot knows besides `attr.<path>`.
    private static let queryFields: Set<String> = ["objectId", "name", "c", "tr", "lm", "createdAt", "updatedAt", "m"]

    /// An SDK's update (`{"topic": …, "attr.mood": …}`) as Hookbot patch keys (`{"attr.topic": …,
    /// "attr.attr.mood": …}`).
    static func patchFromSDK(_ patch: [String: JSONValue]) -> [String: JSONValue] {
        var mapped: [String: JSONValue] = [:]
        for (key, value) in patch {
            mapped[key == "name" ? key : "attr." + key] = value
        }
        return mapped
    }

    /// A Hookbot patch as an SDK applies it: `attr.topic` becomes `topic`, `attr.attr.mood` becomes
    /// `attr.mood`.
    static func patchForSDK(_ patch: [String: JSONValue]) -> [String: JSONValue] {
        var mapped: [String: JSONValue] = [:]
        for (key, value) in patch {
            mapped[key.hasPrefix("attr.") ? String(key.dropFirst(5)) : key] = value
        }
        return mapped
    }

    /// A query condition from an SDK: custom fields at any level (`{"topic": …}`, also inside `$and` /
    /// `$or`) become `attr.<field>`.
    static func conditionFromSDK(_ condition: JSONValue) -> JSONValue { mapCondition(condition, fieldFromSDK) }

    /// A sort string from an SDK (`-topic,lm`) with custom fields as `attr.<field>`.
    static func sortFromSDK(_ sort: String) -> String { mapSort(sort, fieldFromSDK) }

    /// A Hookbot query condition as an SDK writes it (the inverse of `conditionFromSDK`).
    static func conditionForSDK(_ condition: JSONValue) -> JSONValue { mapCondition(condition, fieldForSDK) }

    /// A Hookbot sort string as an SDK writes it (the inverse of `sortFromSDK`).
    static func sortForSDK(_ sort: String) -> String { mapSort(sort, fieldForSDK) }

    /// The condition with each field name mapped, at any level (also inside `$and` / `$or`).
    private static func mapCondition(_ condition: JSONValue, _ field: (String) -> String) -> JSONValue {
        guard let object = condition.objectValue else { return condition }
        var mapped: [String: JSONValue] = [:]
        for (key, value) in object {
            if key == "$and" || key == "$or", let items = value.arrayValue {
                mapped[key] = .array(items.map { mapCondition($0, field) })
            } else {
                mapped[field(key)] = value
            }
        }
        return .object(mapped)
    }

    /// The sort string with each field name mapped (a `-` in front stays).
    private static func mapSort(_ sort: String, _ field: (String) -> String) -> String {
        sort.split(separator: ",", omittingEmptySubsequences: false).map { term in
            let text = String(term).trimmingCharacters(in: .whitespaces)
            let descending = text.hasPrefix("-")
            return (descending ? "-" : "") + field(descending ? String(text.dropFirst()) : text)
        }.joined(separator: ",")
    }

    /// `attr.topic` is the SDK's `topic`, `attr.attr.mood` its `attr.mood`; an attribute named like a
    /// built-in field has no SDK spelling and stays as it is.
    private static func fieldForSDK(_ field: String) -> String {
        guard field.hasPrefix("attr.") else { return field }
        let rest = field.dropFirst(5)
        let head = String(rest.prefix { $0 != "." })
        return head == "attr" || !(builtInFields.contains(head) || head.hasPrefix("$") || head.isEmpty) ? String(rest) : field
    }

    /// A field an SDK names, as Hookbot's: built-in fields stay, `topic` is `attr.topic`, and the SDK's
    /// own `attr` object (`attr`, `attr.mood`) is the attribute `attr` (`attr.attr`, `attr.attr.mood`).
    private static func fieldFromSDK(_ field: String) -> String {
        field.isEmpty || field.hasPrefix("$") || queryFields.contains(field) ? field : "attr." + field
    }

    /// A conversation's stored attributes as the fields of an SDK's conversation object: custom
    /// attributes at the top level, the attribute `attr` as the object `attr`, and attributes named like a
    /// built-in field inside that object too (unless it has a key of that name).
    static func fieldsForSDK(_ attr: [String: JSONValue]) -> (topLevel: [String: JSONValue], attr: JSONValue?) {
        var topLevel: [String: JSONValue] = [:]
        var kept: [String: JSONValue] = [:]
        for (key, value) in attr where key != "attr" {
            if builtInFields.contains(key) { kept[key] = value } else { topLevel[key] = value }
        }
        guard let own = attr["attr"] else { return (topLevel, kept.isEmpty && !attr.isEmpty ? nil : .object(kept)) }
        guard var object = own.objectValue else { return (topLevel, own) }
        for (key, value) in kept where object[key] == nil { object[key] = value }
        return (topLevel, .object(object))
    }

    /// The inverse of `fieldsForSDK`: an SDK conversation object's custom fields and `attr` object as
    /// Hookbot's attributes.
    static func attributesFromSDK(_ object: [String: JSONValue]) -> [String: JSONValue] {
        var attr: [String: JSONValue] = [:]
        for (key, value) in object where !builtInFields.contains(key) { attr[key] = value }
        guard let own = object["attr"] else { return attr }
        guard let fields = own.objectValue else {
            attr["attr"] = own
            return attr
        }
        var nested: [String: JSONValue] = [:]
        for (key, value) in fields {
            if builtInFields.contains(key), key != "attr" { attr[key] = value } else { nested[key] = value }
        }
        if !nested.isEmpty { attr["attr"] = .object(nested) }
        return attr
    }
}
