import Foundation
import IMCore
import Logging
import PostgresNIO

/// Conversations and membership: create, look up, change members, update, mute, query.
extension PostgresStore {
    // MARK: Conversations

    func createConversation(_ new: NewConversation) async throws -> (record: ConversationRecord, created: Bool) {
        try await logged {
            try await transaction { connection -> (record: ConversationRecord, created: Bool) in
                if new.temporaryTTL != nil {
                    _ = try await connection.query(
                        "DELETE FROM conversations WHERE expires_at IS NOT NULL AND expires_at <= \(new.now)", logger: logger
                    ).collect()
                }
                let key = new.uniqueKey
                let id = new.newID()
                let attr = (new.attr ?? .object([:])).jsonString()
                // A unique conversation another transaction inserts meanwhile makes this one wait, then do nothing.
                let inserted = try await connection.query(
                    """
                    INSERT INTO conversations
                        (id, name, creator, transient, unique_key, attr, created_at, updated_at, expires_at, join_policy)
                    VALUES (\(id), \(new.name), \(new.creator), \(new.transient), \(key), \(attr)::jsonb, \(new.now), \(new.now), \
                    \(new.expiresAt), \(new.joinPolicy.rawValue))
                    ON CONFLICT (unique_key) DO NOTHING
                    RETURNING *
                    """, logger: logger
                ).collect()
                guard let row = inserted.first else {
                    guard let key,
                        let row = try await connection.query("SELECT * FROM conversations WHERE unique_key = \(key)", logger: logger)
                            .collect().first
                    else { throw IMError(.internalError, "conversation vanished") }
                    return (try ConversationRecord(postgres: row), false)
                }
                if !new.transient {
                    _ = try await connection.query(
                        """
                        INSERT INTO members (cid, client_id, joined_at, delivered_t, read_t)
                        SELECT \(id), member, \(new.now), \(new.now), \(new.now) FROM unnest(\(new.allMembers)::text[]) AS member
                        """, logger: logger
                    ).collect()
                }
                let record = try ConversationRecord(postgres: row)
                try await MediaReferences.insert(Self.runner(connection, logger), conversation: record)
                return (record, true)
            }
        }
    }

    func conversation(_ cid: String) async throws -> ConversationRecord? {
        try await logged {
            try await fetch("SELECT * FROM conversations WHERE id = \(cid) AND (expires_at IS NULL OR expires_at > \(Self.now))")
                .first.map(ConversationRecord.init(postgres:))
        }
    }

    func members(of cid: String) async throws -> [String] {
        try await logged { try await Self.members(fetch, cid: cid) }
    }

    func isMember(_ clientID: String, of cid: String) async throws -> Bool {
        try await logged { try await Self.isMember(fetch, cid: cid, clientID: clientID) }
    }

    func memberCount(of cid: String) async throws -> Int {
        try await logged {
            Int(try await fetch("SELECT COUNT(*) FROM members WHERE cid = \(cid)").first?.decode(Int64.self) ?? 0)
        }
    }

    func memberships(of clientID: String) async throws -> [Membership] {
        try await logged {
            try await fetch(
                """
                SELECT m.cid, m.delivered_t, m.read_t FROM members m JOIN conversations c ON c.id = m.cid
                WHERE m.client_id = \(clientID) AND (c.expires_at IS NULL OR c.expires_at > \(Self.now))
                ORDER BY m.cid
                """
            ).map { row in
                let (cid, deliveredT, readT) = try row.decode((String, Int64, Int64).self)
                return Membership(cid: cid, deliveredT: deliveredT, readT: readT)
            }
        }
    }

    func changeMembers(_ request: MembershipRequest) async throws -> MembershipChange {
        try await logged {
            try await transaction { connection -> MembershipChange in
                let run = Self.runner(connection, logger)
                let record = try await Self.lockConversation(run, id: request.cid)
                let actorIsMember = try await Self.isMember(run, cid: request.cid, clientID: request.actor)
                let controls = MemberControls(
                    controls: try await Self.memberControls(run, cid: request.cid, now: request.now), now: request.now)
                try StoreRules.authorize(request, record: record, actorIsMember: actorIsMember, controls: controls)
                if record.transient { return MembershipChange(record: record, changed: [request.actor], members: []) }
                let affected: [PostgresRow]
                let now: Int64
                switch request.kind {
                case .add:
                    // New members' cursors start at the last message: older ones reach them through history.
                    now = request.now
                    affected = try await run(
                        """
                        INSERT INTO members (cid, client_id, joined_at, delivered_t, read_t)
                        SELECT \(request.cid), member, \(now), last.t, last.t
                        FROM unnest(\(request.clientIDs)::text[]) AS member,
                             (SELECT COALESCE(MAX(t), 0) AS t FROM messages WHERE cid = \(request.cid)) AS last
                        ON CONFLICT DO NOTHING
                        RETURNING client_id
                        """)
                case .remove:
                    now = Identifiers.nowMillis()
                    affected = try await run(
                        "DELETE FROM members WHERE cid = \(request.cid) AND client_id = ANY(\(request.clientIDs)) RETURNING client_id")
                }
                let touched = Set(try affected.map { try $0.decode(String.self) })
                var changed: [String] = []
                for clientID in request.clientIDs where touched.contains(clientID) && !changed.contains(clientID) {
                    changed.append(clientID)
                }
                if !changed.isEmpty { _ = try await run("UPDATE conversations SET updated_at = \(now) WHERE id = \(request.cid)") }
                return MembershipChange(record: record, changed: changed, members: try await Self.members(run, cid: request.cid))
            }
        }
    }

    func updateConversation(
        cid: String, by clientID: String, inRoom: Bool, patch: [String: JSONValue], now: Int64, trusted: Bool, reason: String?
    ) async throws -> [String] {
        try await logged {
            try await transaction { connection -> [String] in
                let run = Self.runner(connection, logger)
                let record = try await Self.lockConversation(run, id: cid)
                let members = try await Self.members(run, cid: cid)
                try StoreRules.authorizeUpdate(record: record, members: members, clientID: clientID, inRoom: inRoom, trusted: trusted)
                let (name, attr) = try AttributePatch.apply(patch, name: record.name, attr: record.attr)
                let controls = MemberControls(controls: try await Self.memberControls(run, cid: cid, now: now), now: now)
                let actor = trusted ? .manager : controls.role(of: clientID, in: record)
                if let change = try JoinPolicy.change(of: record, to: attr, by: actor, reason: reason) {
                    _ = try await run(
                        "UPDATE conversations SET join_policy = \(change.policy.rawValue), lock_reason = \(change.lockReason) WHERE id = \(cid)"
                    )
                }
                _ = try await run(
                    "UPDATE conversations SET name = \(name), attr = \(attr.jsonString())::jsonb, updated_at = \(now) WHERE id = \(cid)")
                try await MediaReferences.replace(run, cid: cid, name: name, attr: attr)
                return members
            }
        }
    }

    func memberActivity(of cid: String, window: Int) async throws -> [(clientID: String, joinedAt: Int64, sent: Int)] {
        try await logged {
            var sent: [String: Int] = [:]
            for row in try await fetch(
                """
                SELECT from_id, COUNT(*) FROM (SELECT from_id FROM messages WHERE cid = \(cid) ORDER BY t DESC LIMIT \(window)) AS recent
                GROUP BY from_id
                """)
            {
                let (from, n) = try row.decode((String, Int64).self)
                sent[from] = Int(n)
            }
            return try await fetch("SELECT client_id, joined_at FROM members WHERE cid = \(cid) ORDER BY joined_at, client_id").map { row in
                let (clientID, joinedAt) = try row.decode((String, Int64).self)
                return (clientID, joinedAt, sent[clientID] ?? 0)
            }
        }
    }

    func setMuted(cid: String, clientID: String, muted mute: Bool) async throws {
        try await logged {
            try await transaction { connection in
                let run = Self.runner(connection, logger)
                let record = try await Self.lockConversation(run, id: cid)
                if try await !Self.isMember(run, cid: cid, clientID: clientID) {
                    throw IMError(.conversationMembershipRequired, "only members may mute \(cid)")
                }
                var muted = record.muted.filter { $0 != clientID }
                if mute { muted.append(clientID) }
                _ = try await run("UPDATE conversations SET muted = \(ClientIDList.text(muted))::jsonb WHERE id = \(cid)")
            }
        }
    }

    func queryConversations(_ query: ConversationQuery, sort: String?, viewer: String, limit: Int, skip: Int, scanLimit: Int)
        async throws -> [ConversationInfo]
    {
        let order = try ConversationQuery.orderBy(sort, dialect: .postgres)
        let (sql, placeholders) = Self.numberPlaceholders(query.select(orderBy: order))
        guard placeholders == query.values.count + 3 else {
            throw IMError(.internalError, "query has \(placeholders) placeholders for \(query.values.count + 3) values")
        }
        var binds = Self.bindings(query.values)
        binds.append(viewer)
        binds.append(limit)
        binds.append(skip)
        let statement = PostgresQuery(unsafeSQL: sql, binds: binds)
        return try await logged {
            do {
                return try await transaction { connection -> [ConversationInfo] in
                    let run = Self.runner(connection, logger)
                    _ = try await run("SET LOCAL statement_timeout = \(unescaped: String(Self.queryTimeout))")
                    if !query.indexed {
                        let total = Int(try await run("SELECT COUNT(*) FROM conversations").first?.decode(Int64.self) ?? 0)
                        if total > scanLimit {
                            throw IMError(
                                .conversationQueryFailed, "query would scan \(total) conversations; add a condition on objectId, m or lm")
                        }
                    }
                    let records = try await run(statement).map(ConversationRecord.init(postgres:))
                    let members = try await Self.memberLists(run, cids: records.filter { !$0.transient }.map(\.id))
                    return records.map { record in
                        record.info(members: record.transient ? [] : members[record.id] ?? [], viewer: viewer)
                    }
                }
            } catch let error as PSQLError {
                switch Self.sqlState(error) {
                case "57014": throw IMError(.conversationQueryFailed, "query took longer than \(Self.queryTimeout / 1000) s")
                case "2201B": throw IMError(.invalidField, "where: $regex is not a valid regular expression")
                case "22P02", "42883", "42804": throw IMError(.invalidField, "where: a value does not match the type of its field")
                default: throw error
                }
            }
        }
    }

    /// The SQL with its `?` placeholders numbered `$1…$n` (the compiled query has no other `?`), and n.
    static func numberPlaceholders(_ sql: String) -> (sql: String, count: Int) {
        var numbered = ""
        numbered.reserveCapacity(sql.utf8.count + 16)
        var count = 0
        for character in sql {
            if character == "?" {
                count += 1
                numbered += "$\(count)"
            } else {
                numbered.append(character)
            }
        }
        return (numbered, count)
    }

    /// A compiled query's values as bindings (JSON as text: the SQL casts it to `jsonb`).
    static func bindings(_ values: [QueryValue]) -> PostgresBindings {
        var binds = PostgresBindings(capacity: values.count + 3)
        for value in values {
            switch value {
            case .null: binds.appendNull()
            case .int(let i): binds.append(i)
            case .double(let d): binds.append(d)
            case .text(let s), .json(let s): binds.append(s)
            case .bool(let b): binds.append(b)
            }
        }
        return binds
    }

    func temporaryConversations(_ ids: [String], viewer: String) async throws -> [ConversationInfo] {
        let wanted = ids.filter { $0.hasPrefix("_tmp:") }
        guard !wanted.isEmpty else { return [] }
        return try await logged {
            try await client.withConnection { connection -> [ConversationInfo] in
                let run = Self.runner(connection, logger)
                let rows = try await run(
                    "SELECT * FROM conversations WHERE id = ANY(\(wanted)) AND (expires_at IS NULL OR expires_at > \(Self.now))")
                var records: [String: ConversationRecord] = [:]
                for row in rows {
                    let record = try ConversationRecord(postgres: row)
                    records[record.id] = record
                }
                let members = try await Self.memberLists(run, cids: Array(records.keys))
                return wanted.compactMap { id -> ConversationInfo? in
                    guard let record = records[id], let list = members[id], list.contains(viewer) else { return nil }
                    return record.info(members: list)
                }
            }
        }
    }
}
