import IMCore

/// Lists of client ids stored as JSON array text (a message's audience and mentions, a conversation's
/// mutes).
enum ClientIDList {
    static func text(_ ids: [String]) -> String {
        JSONValue.array(ids.map(JSONValue.string)).jsonString()
    }

    /// The ids in stored text; nil when there is no text or it is not a JSON array.
    static func parse(_ text: String?) -> [String]? {
        text.flatMap { JSONValue.parse($0)?.arrayValue?.compactMap(\.stringValue) }
    }
}
