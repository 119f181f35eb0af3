import Foundation
import GRDB
import IMCore

/// Compiles a `conv query` `where` (LeanCloud/Parse dialect) into SQL over the conversations table.
///
/// Fields: `objectId`, `name`, `c`, `tr`, `lm`, `createdAt`, `updatedAt`, `m` (membership, through the
/// members table) and `attr.<path>` (JSON inside `attr`). Every value is bound as a parameter; field names
/// and paths are checked against a fixed grammar, so no text from the request reaches the SQL itself.
struct ConversationQuery {
    var sql: String
    var arguments: StatementArguments
    /// True when a condition can drive an index (`objectId`, `m` containment or an `lm` range), so the
    /// query does not scan the whole table.
    var indexed: Bool

    static let maxDepth = 8
    static let maxConditions = 64

    private static let columns: [String: String] = [
        "objectId": "c.id", "name": "c.name", "c": "c.creator", "tr": "c.transient",
        "lm": "c.lm", "createdAt": "c.created_at", "updatedAt": "c.updated_at",
    ]

    /// The statement of a `conv query`: the condition's arguments, then the viewer's client id, the limit
    /// and the offset. A viewer sees the conversations it is a member of, chat rooms, and conversations
    /// whose attributes say `public: true`; never expired temporary conversations nor other temporary ones.
    func select(orderBy order: String) -> String {
        """
        SELECT c.* FROM conversations c
        WHERE (\(sql)) AND c.expires_at IS NULL
          AND (c.transient = 1 OR json_extract(c.attr, '$.public') IS 1
               OR EXISTS (SELECT 1 FROM members mv WHERE mv.cid = c.id AND mv.client_id = ?))
        ORDER BY \(order) LIMIT ? OFFSET ?
        """
    }

    /// Compiles a where object; throws 4903 with a detail naming the offending part.
    static func compile(_ condition: JSONValue?) throws -> ConversationQuery {
        var compiler = Compiler()
        let sql = try compiler.object(condition ?? .object([:]), path: "where", depth: 0)
        return ConversationQuery(sql: sql, arguments: StatementArguments(compiler.values), indexed: compiler.indexed)
    }

    /// `ORDER BY` terms for a sort string such as `-lm,name`.
    static func orderBy(_ sort: String?) throws -> String {
        guard let sort, !sort.isEmpty else { return "c.lm DESC, c.id" }
        var terms: [String] = []
        for raw in sort.split(separator: ",") {
            var field = raw.trimmingCharacters(in: .whitespaces)
            let descending = field.hasPrefix("-")
            if descending { field.removeFirst() }
            terms.append("\(try expression(for: field, path: "sort")) \(descending ? "DESC" : "ASC")")
        }
        return (terms + ["c.id"]).joined(separator: ", ")
    }

    static func expression(for field: String, path: String) throws -> String {
        if let column = columns[field] { return column }
        if field.hasPrefix("attr.") {
            let segments = field.dropFirst(5).split(separator: ".", omittingEmptySubsequences: false)
            guard !segments.isEmpty, segments.allSatisfy(isSafeSegment) else {
                throw IMError(.invalidField, "\(path): invalid attribute path '\(field)'")
            }
            return "json_extract(c.attr, '$.\(segments.joined(separator: "."))')"
        }
        throw IMError(.invalidField, "\(path): unknown field '\(field)'")
    }

    private static func isSafeSegment(_ segment: Substring) -> Bool {
        !segment.isEmpty && segment.count <= 64
            && segment.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) || $0 == "_" || $0 == "-" }
    }

    private struct Compiler {
        var values: [(any DatabaseValueConvertible)?] = []
        var indexed = false
        var conditions = 0

        mutating func object(_ value: JSONValue, path: String, depth: Int) throws -> String {
            guard depth <= ConversationQuery.maxDepth else { throw IMError(.invalidField, "\(path): nested too deeply") }
            guard let object = value.objectValue else { throw IMError(.invalidField, "\(path) must be a JSON object") }
            var clauses: [String] = []
            for key in object.keys.sorted() {
                let condition = object[key] ?? .null
                switch key {
                case "$and", "$or":
                    guard let items = condition.arrayValue, !items.isEmpty else {
                        throw IMError(.invalidField, "\(path).\(key) must be a non-empty array")
                    }
                    let saved = indexed
                    let parts = try items.enumerated().map { try self.object($1, path: "\(path).\(key)[\($0)]", depth: depth + 1) }
                    if key == "$or" { indexed = saved }
                    clauses.append("(" + parts.joined(separator: key == "$and" ? " AND " : " OR ") + ")")
                default:
                    clauses.append(try field(key, condition, path: "\(path).\(key)"))
                }
            }
            return clauses.isEmpty ? "1" : clauses.joined(separator: " AND ")
        }

        mutating func field(_ name: String, _ condition: JSONValue, path: String) throws -> String {
            conditions += 1
            guard conditions <= ConversationQuery.maxConditions else { throw IMError(.invalidField, "where has too many conditions") }
            if name == "m" { return try members(condition, path: path) }
            let column = try ConversationQuery.expression(for: name, path: path)
            guard case .object(let ops) = condition, ops.keys.contains(where: { $0.hasPrefix("$") }) else {
                if name == "objectId" { indexed = true }
                return try compare(column, "=", condition, path: path)
            }
            var clauses: [String] = []
            for op in ops.keys.sorted() {
                let operand = ops[op] ?? .null
                switch op {
                case "$eq":
                    if name == "objectId" { indexed = true }
                    clauses.append(try compare(column, "=", operand, path: path))
                case "$ne": clauses.append(try compare(column, "IS NOT", operand, path: path))
                case "$gt", "$gte", "$lt", "$lte":
                    if name == "lm" || name == "objectId" { indexed = true }
                    let sqlOp = ["$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="][op] ?? "="
                    clauses.append(try compare(column, sqlOp, operand, path: path))
                case "$in", "$nin":
                    guard let items = operand.arrayValue, items.count <= 1000 else {
                        throw IMError(.invalidField, "\(path).\(op) must be an array of at most 1000 values")
                    }
                    if op == "$in", name == "objectId" { indexed = true }
                    if items.isEmpty {
                        clauses.append(op == "$in" ? "0" : "1")
                        continue
                    }
                    for item in items { values.append(try bindable(item, path: path)) }
                    let list = Array(repeating: "?", count: items.count).joined(separator: ", ")
                    clauses.append(op == "$in" ? "\(column) IN (\(list))" : "(\(column) IS NULL OR \(column) NOT IN (\(list)))")
                case "$exists":
                    guard let exists = operand.boolValue else { throw IMError(.invalidField, "\(path).$exists must be true or false") }
                    clauses.append("\(column) IS \(exists ? "NOT NULL" : "NULL")")
                case "$regex":
                    guard let pattern = operand.stringValue else { throw IMError(.invalidField, "\(path).$regex must be a string") }
                    let options = ops["$options"]?.stringValue ?? ""
                    _ = try RegexCache.shared.regex(pattern, options: options, path: path)
                    values.append(pattern)
                    values.append(options)
                    clauses.append("hookbot_regexp(?, ?, \(column))")
                case "$options":
                    guard ops["$regex"] != nil else { throw IMError(.invalidField, "\(path).$options needs $regex") }
                default:
                    throw IMError(.invalidField, "\(path): unsupported operator '\(op)'")
                }
            }
            return "(" + clauses.joined(separator: " AND ") + ")"
        }

        /// Conditions on the member list: a plain id (contains), `$all`, `$in`, `$nin`, `$ne`, `$exists`.
        mutating func members(_ condition: JSONValue, path: String) throws -> String {
            /// Binds member ids; returns their placeholder list.
            func bind(_ ids: [JSONValue]) throws -> String {
                for id in ids {
                    guard let string = id.stringValue else { throw IMError(.invalidField, "\(path): member ids must be strings") }
                    values.append(string)
                }
                return Array(repeating: "?", count: ids.count).joined(separator: ", ")
            }
            func exists(_ ids: [JSONValue], negate: Bool = false) throws -> String {
                "\(negate ? "NOT " : "")EXISTS (SELECT 1 FROM members mm WHERE mm.cid = c.id AND mm.client_id IN (\(try bind(ids))))"
            }
            /// Containment written as `c.id IN (…)` over the `(client_id, cid)` index, so SQLite starts from
            /// the members' conversations instead of visiting every conversation.
            func memberOf(_ ids: [JSONValue], all: Bool = false) throws -> String {
                let list = try bind(ids)
                let every = all ? " GROUP BY mm.cid HAVING COUNT(*) = \(ids.count)" : ""
                return "c.id IN (SELECT mm.cid FROM members mm WHERE mm.client_id IN (\(list))\(every))"
            }
            if case .string = condition {
                indexed = true
                return try memberOf([condition])
            }
            guard let ops = condition.objectValue, !ops.isEmpty else {
                throw IMError(.invalidField, "\(path) must be a client id or an operator object")
            }
            var clauses: [String] = []
            for op in ops.keys.sorted() {
                let operand = ops[op] ?? .null
                switch op {
                case "$all":
                    guard let ids = operand.arrayValue, !ids.isEmpty, ids.count <= 1000 else {
                        throw IMError(.invalidField, "\(path).$all must be a non-empty array")
                    }
                    indexed = true
                    // One grouped subquery instead of one EXISTS per id (SQLite limits expression depth).
                    var distinct: [JSONValue] = []
                    for id in ids where !distinct.contains(id) { distinct.append(id) }
                    clauses.append(try memberOf(distinct, all: true))
                case "$in":
                    guard let ids = operand.arrayValue, !ids.isEmpty, ids.count <= 1000 else {
                        throw IMError(.invalidField, "\(path).$in must be a non-empty array")
                    }
                    indexed = true
                    clauses.append(try memberOf(ids))
                case "$nin":
                    guard let ids = operand.arrayValue, !ids.isEmpty, ids.count <= 1000 else {
                        throw IMError(.invalidField, "\(path).$nin must be a non-empty array of at most 1000 ids")
                    }
                    clauses.append(try exists(ids, negate: true))
                case "$ne":
                    clauses.append(try exists([operand], negate: true))
                case "$eq":
                    indexed = true
                    clauses.append(try memberOf([operand]))
                case "$exists":
                    guard let flag = operand.boolValue else { throw IMError(.invalidField, "\(path).$exists must be true or false") }
                    clauses.append(flag ? "c.transient = 0" : "c.transient = 1")
                default:
                    throw IMError(.invalidField, "\(path): unsupported operator '\(op)' on m")
                }
            }
            return "(" + clauses.joined(separator: " AND ") + ")"
        }

        mutating func compare(_ column: String, _ op: String, _ value: JSONValue, path: String) throws -> String {
            if case .null = value { return "\(column) IS \(op == "IS NOT" ? "NOT NULL" : "NULL")" }
            values.append(try bindable(value, path: path))
            return "\(column) \(op == "=" ? "IS" : op) ?"
        }

        func bindable(_ value: JSONValue, path: String) throws -> (any DatabaseValueConvertible)? {
            switch value {
            case .null: return nil
            case .bool(let b): return b ? 1 : 0
            case .int(let i): return i
            case .double(let d): return d
            case .string(let s): return s
            case .object(let o):
                if o["__type"]?.stringValue == "Date", let iso = o["iso"]?.stringValue, let date = Self.parseISODate(iso) {
                    return Int64(date.timeIntervalSince1970 * 1000)
                }
                throw IMError(.invalidField, "\(path): objects are not comparable values")
            case .array:
                throw IMError(.invalidField, "\(path): arrays are not comparable values")
            }
        }

        static func parseISODate(_ text: String) -> Date? {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            if let date = formatter.date(from: text) { return date }
            formatter.formatOptions = [.withInternetDateTime]
            return formatter.date(from: text)
        }
    }
}
