import Foundation
import IMCore

/// Builds the `where`, `sort`, `limit` and `skip` of a conversation query (`conv query`).
///
/// Keys are conversation fields (`objectId`, `name`, `m`, `c`, `tr`, `lm`, `createdAt`, `updatedAt`) or
/// custom attributes through `attr(_:)`. Conditions on different keys are combined with AND; several
/// operator conditions on one key apply together (`greaterThan` and `lessThan` make a range).
///
/// ```swift
/// let rooms = try await client.conversations(matching: IMConversationQuery()
///     .whereKey(IMConversationQuery.attr("topic"), equalTo: "movie")
///     .whereKey("tr", equalTo: true)
///     .sort(by: "lm", descending: true)
///     .limit(20))
/// ```
public struct IMConversationQuery: Sendable {
    private var conditions: [String: JSONValue] = [:]
    private var alternatives: [IMConversationQuery] = []
    private var sortKeys: [String] = []
    public private(set) var limit: Int?
    public private(set) var skip: Int?

    public init() {}

    /// The key of a custom attribute: `attr.<path>` (the path may contain dots).
    public static func attr(_ path: String) -> String { "attr." + path }

    /// A query matching conversations any of `queries` matches (`$or`).
    public static func or(_ queries: [IMConversationQuery]) -> IMConversationQuery {
        var query = IMConversationQuery()
        query.alternatives = queries
        return query
    }

    public func whereKey(_ key: String, equalTo value: JSONValue) -> Self {
        var query = self
        query.conditions[key] = value
        return query
    }

    public func whereKey(_ key: String, notEqualTo value: JSONValue) -> Self { adding("$ne", value, to: key) }
    public func whereKey(_ key: String, greaterThan value: JSONValue) -> Self { adding("$gt", value, to: key) }
    public func whereKey(_ key: String, greaterThanOrEqualTo value: JSONValue) -> Self { adding("$gte", value, to: key) }
    public func whereKey(_ key: String, lessThan value: JSONValue) -> Self { adding("$lt", value, to: key) }
    public func whereKey(_ key: String, lessThanOrEqualTo value: JSONValue) -> Self { adding("$lte", value, to: key) }

    /// Matches a regular expression; `options` may combine `i`, `m`, `s` and `x`.
    public func whereKey(_ key: String, matchesRegex pattern: String, options: String? = nil) -> Self {
        var query = adding("$regex", .string(pattern), to: key)
        if let options { query = query.adding("$options", .string(options), to: key) }
        return query
    }

    /// The string value contains `substring` (literally).
    public func whereKey(_ key: String, containsString substring: String) -> Self {
        whereKey(key, matchesRegex: NSRegularExpression.escapedPattern(for: substring))
    }

    /// The value is one of `values` (`$in`); on the member list `m`: any of `values` is a member.
    public func whereKey(_ key: String, containedIn values: [JSONValue]) -> Self { adding("$in", .array(values), to: key) }

    /// The value is none of `values` (`$nin`).
    public func whereKey(_ key: String, notContainedIn values: [JSONValue]) -> Self { adding("$nin", .array(values), to: key) }

    /// The array value contains every one of `values` (`$all`), e.g. conversations with all these members.
    public func whereKey(_ key: String, containsAll values: [JSONValue]) -> Self { adding("$all", .array(values), to: key) }

    /// The key is present (or absent).
    public func whereKeyExists(_ key: String, _ exists: Bool = true) -> Self { adding("$exists", .bool(exists), to: key) }

    /// Conversations that have `clientId` among their members.
    public func whereMember(_ clientId: String) -> Self { whereKey("m", containsAll: [.string(clientId)]) }

    /// Adds a sort key; earlier keys take precedence.
    public func sort(by key: String, descending: Bool = false) -> Self {
        var query = self
        query.sortKeys.append(descending ? "-" + key : key)
        return query
    }

    /// At most `limit` results (the server's default is 10, its maximum 1000).
    public func limit(_ limit: Int) -> Self {
        var query = self
        query.limit = limit
        return query
    }

    /// Skips the first `skip` results.
    public func skip(_ skip: Int) -> Self {
        var query = self
        query.skip = skip
        return query
    }

    /// The `where` JSON sent to the server.
    public var whereJSON: JSONValue {
        var object = conditions
        if !alternatives.isEmpty { object["$or"] = .array(alternatives.map(\.whereJSON)) }
        return .object(object)
    }

    /// The `sort` field sent to the server, nil when unsorted.
    public var sortString: String? { sortKeys.isEmpty ? nil : sortKeys.joined(separator: ",") }

    private func adding(_ op: String, _ value: JSONValue, to key: String) -> Self {
        var query = self
        var operators = query.conditions[key]?.objectValue.flatMap { $0.keys.allSatisfy { $0.hasPrefix("$") } ? $0 : nil } ?? [:]
        operators[op] = value
        query.conditions[key] = .object(operators)
        return query
    }

    /// The `conv query` command (without a request serial).
    func command() -> Command {
        var command = Command(cmd: .conv, op: .query)
        command.where = whereJSON
        command.sort = sortString
        command.limit = limit
        command.skip = skip
        return command
    }
}
