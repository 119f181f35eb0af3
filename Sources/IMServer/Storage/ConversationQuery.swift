import Foundation
import IMCore

/// A value bound to a compiled query's placeholder.
enum QueryValue: Sendable, Equatable {
    case null
    case int(Int64)
    case double(Double)
    case text(String)
    case bool(Bool)
    /// JSON text compared with a JSON attribute (PostgreSQL's `jsonb`).
    case json(String)
}

/// Compiles a `conv query` `where` (LeanCloud/Parse dialect) into SQL over the conversations table, for
/// SQLite or PostgreSQL.
///
/// Fields: `objectId`, `name`, `c`, `tr`, `lm`, `createdAt`, `updatedAt`, `m` (membership, through the
/// members table) and `attr.<path>` (JSON inside `attr`). Every value is bound as a parameter (written `?`;
/// the PostgreSQL store numbers them); field names and paths are checked against a fixed grammar, so no
/// text from the request reaches the SQL itself. `$regex` runs the Swift regex function in SQLite and
/// PostgreSQL's own `~` operator there (under a statement timeout).
struct ConversationQuery: Sendable {
    enum Dialect: Sendable { case sqlite, postgres }

    var dialect: Dialect
    var sql: String
    var values: [QueryValue]
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
        let isPublic = dialect == .sqlite ? "json_extract(c.attr, '$.public') IS 1" : "c.attr -> 'public' = 'true'::jsonb"
        return """
            SELECT c.* FROM conversations c
            WHERE (\(sql)) AND c.expires_at IS NULL
              AND (c.transient = TRUE OR \(isPublic)
                   OR EXISTS (SELECT 1 FROM members mv WHERE mv.cid = c.id AND mv.client_id = ?))
            ORDER BY \(order) LIMIT ? OFFSET ?
            """
    }

    /// Compiles a where object; throws 4903 with a detail naming the offending part.
    static func compile(_ condition: JSONValue?, dialect: Dialect = .sqlite) throws -> ConversationQuery {
        var compiler = Compiler(dialect: dialect)
        let sql = try compiler.object(condition ?? .object([:]), path: "where", depth: 0)
        return ConversationQuery(dialect: dialect, sql: sql, values: compiler.values, indexed: compiler.indexed)
    }

    /// `ORDER BY` terms for a sort string such as `-lm,name`.
    static func orderBy(_ sort: String?, dialect: Dialect = .sqlite) throws -> String {
        guard let sort, !sort.isEmpty else { return dialect == .sqlite ? "c.lm DESC, c.id" : "c.lm DESC NULLS LAST, c.id" }
        var terms: [String] = []
        for raw in sort.split(separator: ",") {
            var field = raw.trimmingCharacters(in: .whitespaces)
            let descending = field.hasPrefix("-")
            if descending { field.removeFirst() }
            // SQLite sorts NULL first ascending; PostgreSQL is told to do the same, so pages match.
            let nulls = dialect == .postgres ? (descending ? " NULLS LAST" : " NULLS FIRST") : ""
            terms.append("\(try expression(for: field, path: "sort", dialect: dialect).sql) \(descending ? "DESC" : "ASC")\(nulls)")
        }
        return (terms + ["c.id"]).joined(separator: ", ")
    }

    /// The kind of value a field holds, which decides how a compared value is bound.
    enum FieldKind { case text, integer, boolean, json }

    /// The SQL expression of a field, and its kind.
    static func expression(for field: String, path: String, dialect: Dialect) throws -> (sql: String, kind: FieldKind) {
        if let column = columns[field] { return (column, columnKinds[field] ?? .text) }
        if field.hasPrefix("attr.") {
            let segments = field.dropFirst(5).split(separator: ".", omittingEmptySubsequences: false)
            guard !segments.isEmpty, segments.allSatisfy(isSafeSegment) else {
                throw IMError(.invalidField, "\(path): invalid attribute path '\(field)'")
            }
            switch dialect {
            case .sqlite: return ("json_extract(c.attr, '$.\(segments.joined(separator: "."))')", .json)
            // A JSON null counts as absent, as SQLite's json_extract has it.
            case .postgres: return ("NULLIF(c.attr #> '{\(segments.joined(separator: ","))}', 'null'::jsonb)", .json)
            }
        }
        throw IMError(.invalidField, "\(path): unknown field '\(field)'")
    }

    private static let columnKinds: [String: FieldKind] = [
        "tr": .boolean, "lm": .integer, "createdAt": .integer, "updatedAt": .integer,
    ]

    private static func isSafeSegment(_ segment: Substring) -> Bool {
        !segment.isEmpty && segment.count <= 64
            && segment.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) || $0 == "_" || $0 == "-" }
    }

    private struct Compiler {
        let dialect: Dialect
        var values: [QueryValue] = []
        var indexed = false
        var conditions = 0

        init(dialect: Dialect) { self.dialect = dialect }

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
            return clauses.isEmpty ? "TRUE" : clauses.joined(separator: " AND ")
        }

        mutating func field(_ name: String, _ condition: JSONValue, path: String) throws -> String {
            conditions += 1
            guard conditions <= ConversationQuery.maxConditions else { throw IMError(.invalidField, "where has too many conditions") }
            if name == "m" { return try members(condition, path: path) }
            let column = try ConversationQuery.expression(for: name, path: path, dialect: dialect)
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
                        clauses.append(op == "$in" ? "FALSE" : "TRUE")
                        continue
                    }
                    for item in items { values.append(try bindable(item, kind: column.kind, path: path)) }
                    let list = Array(repeating: placeholder(column.kind), count: items.count).joined(separator: ", ")
                    clauses.append(
                        op == "$in" ? "\(column.sql) IN (\(list))" : "(\(column.sql) IS NULL OR \(column.sql) NOT IN (\(list)))")
                case "$exists":
                    guard let exists = operand.boolValue else { throw IMError(.invalidField, "\(path).$exists must be true or false") }
                    clauses.append("\(column.sql) IS \(exists ? "NOT NULL" : "NULL")")
                case "$regex":
                    guard let pattern = operand.stringValue else { throw IMError(.invalidField, "\(path).$regex must be a string") }
                    let options = ops["$options"]?.stringValue ?? ""
                    _ = try RegexCache.shared.regex(pattern, options: options, path: path)
                    switch dialect {
                    case .sqlite:
                        values.append(.text(pattern))
                        values.append(.text(options))
                        clauses.append("hookbot_regexp(?, ?, \(column.sql))")
                    case .postgres:
                        // Mongo's options as PostgreSQL's embedded ones: `m` alone is newline-sensitive (n), `s`
                        // alone the default (s), both together `w`; `i` and `x` are the same letters.
                        let flags = Self.postgresFlags(options)
                        values.append(.text(flags.isEmpty ? pattern : "(?\(flags))" + pattern))
                        let text = column.kind == .json ? "(\(column.sql) #>> '{}')" : "(\(column.sql))::text"
                        clauses.append("(length(\(text)) <= \(RegexCache.maxSubjectBytes) AND \(text) ~ ?)")
                    }
                case "$options":
                    guard ops["$regex"] != nil else { throw IMError(.invalidField, "\(path).$options needs $regex") }
                default:
                    throw IMError(.invalidField, "\(path): unsupported operator '\(op)'")
                }
            }
            return "(" + clauses.joined(separator: " AND ") + ")"
        }

        /// Conditions on the member list: a plain id (contains), `$all`, `$in`, `$nin`, `$ne`, `$exists`, `$size`.
        mutating func members(_ condition: JSONValue, path: String) throws -> String {
            /// Binds member ids; returns their placeholder list.
            func bind(_ ids: [JSONValue]) throws -> String {
                for id in ids {
                    guard let string = id.stringValue else { throw IMError(.invalidField, "\(path): member ids must be strings") }
                    values.append(.text(string))
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
                    clauses.append(flag ? "c.transient = FALSE" : "c.transient = TRUE")
                case "$size":
                    // The member count (the SDKs' `sizeEqualTo('m', n)`, and `withMembers(ids, true)` with
                    // `$all`); counted over the members index of each candidate, so it drives no index itself.
                    // Chat rooms have no member list.
                    guard let size = operand.intValue, size >= 0, size <= Int(Int32.max) else {
                        throw IMError(.invalidField, "\(path).$size must be a non-negative integer")
                    }
                    values.append(.int(Int64(size)))
                    clauses.append("(c.transient = FALSE AND (SELECT COUNT(*) FROM members ms WHERE ms.cid = c.id) = ?)")
                default:
                    throw IMError(.invalidField, "\(path): unsupported operator '\(op)' on m")
                }
            }
            return "(" + clauses.joined(separator: " AND ") + ")"
        }

        mutating func compare(_ column: (sql: String, kind: FieldKind), _ op: String, _ value: JSONValue, path: String) throws -> String {
            if case .null = value { return "\(column.sql) IS \(op == "IS NOT" ? "NOT NULL" : "NULL")" }
            values.append(try bindable(value, kind: column.kind, path: path))
            let sqlOp: String
            switch (op, dialect) {
            case ("=", .sqlite): sqlOp = "IS"
            case ("=", .postgres): sqlOp = "IS NOT DISTINCT FROM"
            case ("IS NOT", .postgres): sqlOp = "IS DISTINCT FROM"
            default: sqlOp = op
            }
            return "\(column.sql) \(sqlOp) \(placeholder(column.kind))"
        }

        /// A placeholder; PostgreSQL compares JSON attributes with `jsonb` values.
        func placeholder(_ kind: FieldKind) -> String {
            dialect == .postgres && kind == .json ? "?::jsonb" : "?"
        }

        /// The value bound for a comparison with a field of `kind`. SQLite compares anything with anything;
        /// PostgreSQL's columns are typed, so a value of the wrong type is refused (4903) there.
        func bindable(_ value: JSONValue, kind: FieldKind, path: String) throws -> QueryValue {
            var comparable = value
            if case .object(let o) = value {
                guard o["__type"]?.stringValue == "Date", let iso = o["iso"]?.stringValue, let date = Self.parseISODate(iso) else {
                    throw IMError(.invalidField, "\(path): objects are not comparable values")
                }
                comparable = .int(Int(date.timeIntervalSince1970 * 1000))
            }
            if case .array = value { throw IMError(.invalidField, "\(path): arrays are not comparable values") }
            if dialect == .postgres {
                switch (kind, comparable) {
                case (_, .null): return .null
                case (.json, _): return .json(comparable.jsonString())
                case (.text, .string(let s)): return .text(s)
                case (.integer, .int(let i)): return .int(Int64(i))
                case (.integer, .double(let d)) where d == d.rounded() && abs(d) < 9e18: return .int(Int64(d))
                case (.boolean, .bool(let b)): return .bool(b)
                case (.boolean, .int(let i)) where i == 0 || i == 1: return .bool(i == 1)
                default: throw IMError(.invalidField, "\(path): \(comparable.jsonString()) cannot be compared with this field")
                }
            }
            switch comparable {
            case .null: return .null
            case .bool(let b): return .int(b ? 1 : 0)
            case .int(let i): return .int(Int64(i))
            case .double(let d): return .double(d)
            case .string(let s): return .text(s)
            case .object, .array: throw IMError(.invalidField, "\(path): objects are not comparable values")
            }
        }

        static func postgresFlags(_ options: String) -> String {
            var flags = ""
            if options.contains("i") { flags += "i" }
            if options.contains("x") { flags += "x" }
            switch (options.contains("m"), options.contains("s")) {
            case (true, true): flags += "w"
            case (true, false): flags += "n"
            default: break
            }
            return flags
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
