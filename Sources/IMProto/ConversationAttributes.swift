import IMCore

/// How custom conversation attributes look to LeanCloud SDKs.
///
/// Hookbot keeps custom attributes in one JSON object, `attr` (`attr.<key>` in updates and queries). The
/// SDKs treat them as top-level fields of the conversation: `createConversation({ topic })` sends them
/// beside `name`, `conversation.set("topic", …)` updates `topic`, `equalTo("topic", …)` queries it, and
/// query results are read field by field. The protobuf codec maps between the two in both directions, so
/// a JSON client sees `attr.topic` where an SDK sees `topic`, for the same stored value.
enum ConversationAttributes {
    /// Top-level fields of a conversation that are not custom attributes.
    static let builtInFields: Set<String> = [
        "objectId", "name", "m", "c", "tr", "unique", "attr", "mu", "lm", "createdAt", "updatedAt", "ttl", "sys",
    ]

    /// Query fields Hookbot knows besides `attr.<path>`.
    private static let queryFields: Set<String> = ["objectId", "name", "c", "tr", "lm", "createdAt", "updatedAt", "m"]

    /// An SDK's update (`{"topic": …}`) as Hookbot patch keys (`{"attr.topic": …}`).
    static func patchFromSDK(_ patch: [String: JSONValue]) -> [String: JSONValue] {
        var mapped: [String: JSONValue] = [:]
        for (key, value) in patch {
            mapped[key == "name" || key == "attr" || key.hasPrefix("attr.") ? key : "attr." + key] = value
        }
        return mapped
    }

    /// A Hookbot patch as an SDK applies it: `attr.topic` becomes `topic`.
    static func patchForSDK(_ patch: [String: JSONValue]) -> [String: JSONValue] {
        var mapped: [String: JSONValue] = [:]
        for (key, value) in patch {
            mapped[key.hasPrefix("attr.") ? String(key.dropFirst(5)) : key] = value
        }
        return mapped
    }

    /// A query condition from an SDK: custom fields at any level (`{"topic": …}`, also inside `$and` /
    /// `$or`) become `attr.<field>`.
    static func conditionFromSDK(_ condition: JSONValue) -> JSONValue {
        guard let object = condition.objectValue else { return condition }
        var mapped: [String: JSONValue] = [:]
        for (key, value) in object {
            if key == "$and" || key == "$or", let items = value.arrayValue {
                mapped[key] = .array(items.map(conditionFromSDK))
            } else {
                mapped[fieldFromSDK(key)] = value
            }
        }
        return .object(mapped)
    }

    /// A sort string from an SDK (`-topic,lm`) with custom fields as `attr.<field>`.
    static func sortFromSDK(_ sort: String) -> String {
        sort.split(separator: ",", omittingEmptySubsequences: false).map { term in
            let text = String(term).trimmingCharacters(in: .whitespaces)
            let descending = text.hasPrefix("-")
            let field = descending ? String(text.dropFirst()) : text
            return (descending ? "-" : "") + fieldFromSDK(field)
        }.joined(separator: ",")
    }

    private static func fieldFromSDK(_ field: String) -> String {
        field.isEmpty || field.hasPrefix("$") || field.hasPrefix("attr.") || queryFields.contains(field) || field == "attr"
            ? field : "attr." + field
    }
}
