import Foundation
import IMCore
import Logging
import PostgresNIO
import Synchronization

/// The shared store: one PostgreSQL database (a schema of it) that several nodes use at once.
///
/// Same semantics, errors and details as `SQLiteStore`; where several nodes could race, rows are locked
/// (`FOR UPDATE`, in a fixed order) or the change is one atomic statement (`ON CONFLICT`). Message
/// timestamps are allocated in the database from the locked conversation row, and every stored message is
/// announced with `pg_notify` inside the transaction that stores it (see `Announcement`).
final class PostgresStore: ServerStore {
    let url: PostgresURL
    let client: PostgresClient
    /// The schema of the tables (the connections' `search_path`).
    let schema: String
    /// The `LISTEN`/`NOTIFY` channel of the nodes sharing the schema.
    let channel: String
    let logger: Logger
    private let runTask: Task<Void, Never>
    private let transactionCount = Atomic<Int>(0)

    /// How many times a batch is tried again after a deadlock, a serialization failure or a race on a
    /// unique key with another node.
    static let batchRetries = 3
    /// The statement timeout of `conv query`, in milliseconds.
    static let queryTimeout = 2000

    /// Parses the URL and starts the connection pool (connections open on first use); `migrate()` before
    /// use.
    init(url text: String, logger: Logger) throws {
        url = try PostgresURL(text)
        schema = url.schema
        channel = url.channel
        self.logger = logger
        let client = PostgresClient(configuration: url.clientConfiguration(), backgroundLogger: logger)
        self.client = client
        let started = Flag()
        self.started = started
        runTask = Task {
            started.value.store(true, ordering: .releasing)
            await client.run()
        }
    }

    /// Set once the pool's `run()` is about to start (leasing before it makes the driver log a warning).
    private let started: Flag

    private final class Flag: Sendable {
        let value = Atomic<Bool>(false)
    }

    /// Creates or upgrades the schema (safe while other nodes start too), up to migration `last`.
    func migrate(through last: Int32 = .max) async throws {
        while !started.value.load(ordering: .acquiring) { await Task.yield() }
        try await logged { try await PostgresSchema.migrate(client, schema: schema, logger: logger, through: last) }
    }

    /// A connection of its own (outside the pool) to the same database, user and search path, for `LISTEN`.
    func makeListenConnection(logger: Logger) async throws -> PostgresConnection {
        try await PostgresConnection.connect(
            configuration: url.connectionConfiguration(), id: Self.connectionIDs.add(1, ordering: .relaxed).newValue, logger: logger)
    }

    private static let connectionIDs = Atomic<Int>(1_000_000)

    /// Runs statements as they are, in one transaction (tests build a database as an older server left it).
    func execute(unsafeSQL statements: [String]) async throws {
        try await transaction { connection in
            for statement in statements { _ = try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger).collect() }
        }
    }

    func ping() async throws {
        try await logged { _ = try await fetch("SELECT 1") }
    }

    func shutdown() async {
        runTask.cancel()
        await runTask.value
    }

    var queryDialect: ConversationQuery.Dialect { .postgres }

    // MARK: Plumbing

    /// Runs `body` in a transaction on a pooled connection: `BEGIN`, then `COMMIT`, or `ROLLBACK` when it
    /// throws. Errors are rethrown unwrapped (unlike `PostgresClient.withTransaction`), so an `IMError` thrown
    /// inside reaches the caller as it is.
    static func transaction<Result: Sendable>(
        _ client: PostgresClient, logger: Logger, _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try await client.withConnection { connection in
            _ = try await connection.query("BEGIN", logger: logger).collect()
            do {
                let result = try await body(connection)
                _ = try await connection.query("COMMIT", logger: logger).collect()
                return result
            } catch {
                do {
                    _ = try await connection.query("ROLLBACK", logger: logger).collect()
                } catch {
                    // The connection is in an unknown state: close it so that the pool drops it.
                    try? await connection.close()
                }
                throw error
            }
        }
    }

    func transaction<Result: Sendable>(_ body: (PostgresConnection) async throws -> Result) async throws -> Result {
        transactionCount.add(1, ordering: .relaxed)
        return try await Self.transaction(client, logger: logger, body)
    }

    /// All rows of a statement run on a pooled connection.
    func fetch(_ query: PostgresQuery) async throws -> [PostgresRow] {
        try await execute(query).collect()
    }

    /// Runs one statement on a pooled connection (its own transaction).
    func execute(_ query: PostgresQuery) async throws -> PostgresRowSequence {
        transactionCount.add(1, ordering: .relaxed)
        return try await client.query(query, logger: logger)
    }

    /// Transactions this store has run so far (explicit ones and single statements), for benchmarks.
    var transactionsRun: Int { transactionCount.load(ordering: .relaxed) }

    /// Logs a driver error (with its SQLSTATE) before passing it on; `IMError`s pass silently.
    func logged<Result: Sendable>(_ operation: String = #function, _ body: () async throws -> Result) async throws -> Result {
        do {
            return try await body()
        } catch let error as IMError {
            throw error
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            logger.error(
                "PostgreSQL store failed",
                metadata: [
                    "operation": "\(operation)", "sqlstate": "\(Self.sqlState(error) ?? "-")", "error": "\(String(reflecting: error))",
                ])
            throw error
        }
    }

    static func sqlState(_ error: any Error) -> String? {
        (error as? PSQLError)?.serverInfo?[.sqlState]
    }

    /// The non-expired conversation condition's `now`.
    private static var now: Int64 { Identifiers.nowMillis() }

    // MARK: Sessions

    func claimTag(clientID: String, tag: String, deviceID: String, forced: Bool) async throws -> Int64? {
        try await logged {
            try await transaction { connection -> Int64? in
                let holder = try await connection.query(
                    "SELECT device_id FROM device_tags WHERE client_id = \(clientID) AND tag = \(tag) FOR UPDATE", logger: logger
                ).collect().first?.decode(String.self)
                if !forced, let holder, holder != deviceID { return nil }
                // The condition refuses a device that took the tag between the two statements (on another node).
                let rows = try await connection.query(
                    """
                    INSERT INTO device_tags (client_id, tag, device_id) VALUES (\(clientID), \(tag), \(deviceID))
                    ON CONFLICT (client_id, tag) DO UPDATE
                    SET device_id = EXCLUDED.device_id, generation = device_tags.generation + 1
                    WHERE \(forced) OR device_tags.device_id = EXCLUDED.device_id
                    RETURNING generation
                    """, logger: logger
                ).collect()
                return try rows.first?.decode(Int64.self)
            }
        }
    }

    func issueToken(_ token: String, clientID: String, expiresAt: Int64, now: Int64) async throws {
        try await logged {
            try await transaction { connection in
                _ = try await connection.query("DELETE FROM session_tokens WHERE expires_at <= \(now)", logger: logger).collect()
                _ = try await connection.query(
                    "INSERT INTO session_tokens (token, client_id, expires_at) VALUES (\(token), \(clientID), \(expiresAt))", logger: logger
                ).collect()
            }
        }
    }

    func revokeToken(_ token: String) async throws {
        try await logged { _ = try await fetch("DELETE FROM session_tokens WHERE token = \(token)") }
    }

    func clientID(forToken token: String, now: Int64) async throws -> String? {
        try await logged {
            try await fetch("SELECT client_id FROM session_tokens WHERE token = \(token) AND expires_at > \(now)").first?.decode(
                String.self)
        }
    }

    func useNonce(scope: String, nonce: String, now: Int64, window: Int64, purge: Bool) async throws -> Bool {
        try await logged {
            let oldest = now - window
            if purge { _ = try await fetch("DELETE FROM signature_nonces WHERE seen_at < \(oldest)") }
            // One statement: a nonce is new, or seen before the window (then seen again now); otherwise a replay.
            let rows = try await fetch(
                """
                INSERT INTO signature_nonces (scope, nonce, seen_at) VALUES (\(scope), \(nonce), \(now))
                ON CONFLICT (scope, nonce) DO UPDATE SET seen_at = EXCLUDED.seen_at WHERE signature_nonces.seen_at < \(oldest)
                RETURNING 1
                """)
            return rows.isEmpty
        }
    }

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

    // MARK: Messages

    var batchWriter: BatchWriter {
        .suspending { [self] batch in try await self.write(batch) }
    }

    /// Commits a batch in one transaction, trying again (with new ids) when it lost a race with another node.
    /// A batch of cursor moves alone is one statement (its own transaction).
    private func write(_ batch: MessageBatch) async throws -> BatchResult {
        try await logged {
            var attempt = 0
            while true {
                do {
                    if batch.messages.isEmpty {
                        if let cursors = Self.cursorMoves(batch.moves) { _ = try await fetch(try cursors.query(prefix: "")) }
                        return BatchResult(outcomes: [], timestamps: [:])
                    }
                    return try await transaction { connection in try await commit(batch, on: connection) }
                } catch let error as PSQLError where attempt < Self.batchRetries && Self.isRetryable(error) {
                    attempt += 1
                    logger.warning(
                        "message batch lost a race; trying again",
                        metadata: ["sqlstate": "\(Self.sqlState(error) ?? "-")", "attempt": "\(attempt)"])
                }
            }
        }
    }

    /// Deadlock, serialization failure, or a unique key another node stored meanwhile.
    static func isRetryable(_ error: PSQLError) -> Bool {
        ["40P01", "40001", "23505"].contains(sqlState(error) ?? "")
    }

    /// Stores a batch's messages: each must go to a conversation that exists, from a member, once per
    /// dedupe token, with a timestamp above the conversation's newest (read from its locked row).
    ///
    /// Four round trips whatever the batch holds (a group commit's cost is mostly round trips, not work):
    /// `BEGIN`; the conversations locked with their member lists; one statement that inserts the messages
    /// (skipping any whose dedupe token is already stored), moves `lm`, moves the delivery cursors and
    /// announces the inserted messages; `COMMIT`. Only when a dedupe token turned out to be stored already
    /// is the stored message read (one more round trip).
    private func commit(_ batch: MessageBatch, on connection: PostgresConnection) async throws -> BatchResult {
        let run = Self.runner(connection, logger)
        // Lock the conversations in a fixed order, so batches of different nodes never deadlock on them.
        let cids = Set(batch.messages.map(\.cid)).sorted()
        var conversations: [String: ConversationRecord] = [:]
        var memberLists: [String: [String]] = [:]
        let rows = try await run(
            """
            SELECT c.*, ARRAY(SELECT m.client_id FROM members m WHERE m.cid = c.id ORDER BY m.joined_at, m.client_id) AS member_ids
            FROM conversations c WHERE c.id = ANY(\(cids)) AND (c.expires_at IS NULL OR c.expires_at > \(Self.now))
            ORDER BY c.id FOR UPDATE OF c
            """)
        for row in rows {
            let record = try ConversationRecord(postgres: row)
            conversations[record.id] = record
            memberLists[record.id] =
                record.transient ? batch.roomMembers(record.id) : try row.makeRandomAccess()["member_ids"].decode([String].self)
        }

        var timestamps: [String: Int64] = [:]
        var outcomes: [BatchOutcome] = []
        outcomes.reserveCapacity(batch.messages.count)
        var stored: [(record: MessageRecord, dedupeToken: String?, recipients: [String]?, payload: String)] = []
        var inBatch: [DedupeKey: MessageRecord] = [:]
        for message in batch.messages {
            guard let conversation = conversations[message.cid] else {
                outcomes.append(.failed(IMError(.invalidMessagingTarget, "conversation \(message.cid) does not exist")))
                continue
            }
            let members = memberLists[message.cid] ?? []
            guard members.contains(message.from) else {
                outcomes.append(.failed(IMError(.invalidMessagingTarget, "\(message.from) is not a member of \(message.cid)")))
                continue
            }
            let token = message.dedupeToken.map { DedupeKey(from: message.from, token: $0) }
            if let token, let earlier = inBatch[token] {
                outcomes.append(.duplicate(earlier))
                continue
            }
            let t = max(batch.now, (timestamps[message.cid] ?? conversation.lm ?? 0) + 1)
            timestamps[message.cid] = t
            let record = message.record(id: Identifiers.messageID(), t: t, transient: conversation.transient)
            if let token { inBatch[token] = record }
            let audience = message.audience(of: members)
            let room = conversation.transient && message.recipients == nil
            outcomes.append(.stored(record, members: audience, room: room))
            // payload() always answers for a message (by id alone when the rest does not fit).
            let payload = Announcement.message(record, id: record.id, cid: record.cid, members: audience, room: room).payload() ?? ""
            stored.append((record, message.dedupeToken, message.recipients, payload))
        }

        let inserted = try await insertAndAnnounce(run, stored, moves: batch.moves)
        try await MediaReferences.insert(run, stored.map(\.record), inserted: inserted)
        guard inserted.count < stored.count else { return BatchResult(outcomes: outcomes, timestamps: timestamps) }
        // Some dedupe tokens were stored already (an earlier batch, or another node): answer with those messages.
        var existing: [DedupeKey: MessageRecord] = [:]
        let skipped = stored.filter { !inserted.contains($0.record.id) }
        let keys = skipped.compactMap { item in item.dedupeToken.map { DedupeKey(from: item.record.from, token: $0) } }
        for row in try await run(
            """
            SELECT * FROM messages WHERE dt IS NOT NULL
            AND (from_id, dt) IN (SELECT * FROM unnest(\(keys.map(\.from))::text[], \(keys.map(\.token))::text[]))
            """)
        {
            let record = try MessageRecord(postgres: row)
            if let token = try row.makeRandomAccess()["dt"].decode(String?.self) {
                existing[DedupeKey(from: record.from, token: token)] = record
            }
        }
        outcomes = try outcomes.map { outcome in
            guard case .stored(let record, _, _) = outcome, !inserted.contains(record.id) else { return outcome }
            guard let item = skipped.first(where: { $0.record.id == record.id }), let token = item.dedupeToken,
                let earlier = existing[DedupeKey(from: record.from, token: token)]
            else { throw IMError(.internalError, "message \(record.id) was neither stored nor a duplicate") }
            return .duplicate(earlier)
        }
        return BatchResult(outcomes: outcomes, timestamps: timestamps)
    }

    /// Identifies a sender's dedupe token.
    private struct DedupeKey: Hashable {
        var from: String
        var token: String
    }

    /// One statement: inserts the messages (a stored dedupe token skips its message), moves each touched
    /// conversation's `lm` to its newest inserted message, applies the cursor moves, and announces the
    /// inserted messages in timestamp order (`pg_notify`: delivered to the listening nodes only once the
    /// transaction commits). Returns the ids inserted.
    private func insertAndAnnounce(
        _ run: Runner, _ stored: [(record: MessageRecord, dedupeToken: String?, recipients: [String]?, payload: String)],
        moves: [CursorKey: CursorMove]
    ) async throws -> Set<String> {
        guard !stored.isEmpty else {
            if let cursors = Self.cursorMoves(moves) { _ = try await run(try cursors.query(prefix: "")) }
            return []
        }
        let records = stored.map(\.record)
        var binds = PostgresBindings(capacity: 16)
        func bind<Value: PostgresEncodable & Sendable>(_ value: Value) throws -> String {
            try binds.append(value)
            return "$\(binds.count)"
        }
        // Arrays of columns (unnest) instead of one placeholder per value: the statement text stays the same.
        let columns = [
            "\(try bind(records.map(\.id)))::text[]", "\(try bind(records.map(\.cid)))::text[]", "\(try bind(records.map(\.from)))::text[]",
            "\(try bind(records.map(\.data)))::text[]", "\(try bind(records.map(\.t)))::int8[]",
            "\(try bind(records.map(\.receipt)))::bool[]",
            "\(try bind(records.map { $0.priority ?? "" }))::text[]", "\(try bind(stored.map { $0.dedupeToken ?? "" }))::text[]",
            "\(try bind(stored.map { $0.recipients.map(ClientIDList.text) ?? "" }))::text[]",
            "\(try bind(records.map { $0.mentionPids.map(ClientIDList.text) ?? "" }))::text[]",
            "\(try bind(records.map(\.mentionAll)))::bool[]", "\(try bind(records.map(\.binary)))::bool[]",
        ]
        let payloads = try bind(stored.map(\.payload))
        let channel = try bind(channel)
        var cursorCTE = ""
        if let cursors = Self.cursorMoves(moves) {
            cursorCTE = try cursors.query(prefix: "cursor_", bindingInto: &binds) + ",\n"
        }
        let sql = """
            WITH \(cursorCTE)new (id, cid, from_id, data, t, receipt, priority, dt, recipients, mention_pids, mention_all, bin, ord) AS (
                SELECT * FROM unnest(\(columns.joined(separator: ", "))) WITH ORDINALITY
            ),
            ins AS (
                INSERT INTO messages (id, cid, from_id, data, t, receipt, priority, dt, recipients, mention_pids, mention_all, bin)
                SELECT id, cid, from_id, data, t, receipt, NULLIF(priority, ''), NULLIF(dt, ''),
                       CASE WHEN recipients = '' THEN NULL ELSE ARRAY(SELECT jsonb_array_elements_text(recipients::jsonb)) END,
                       CASE WHEN mention_pids = '' THEN NULL ELSE ARRAY(SELECT jsonb_array_elements_text(mention_pids::jsonb)) END,
                       mention_all, bin
                FROM new ORDER BY ord
                ON CONFLICT (from_id, dt) WHERE dt IS NOT NULL DO NOTHING
                RETURNING id, cid, t
            ),
            touched AS (
                UPDATE conversations c SET lm = x.t FROM (SELECT cid, MAX(t) AS t FROM ins GROUP BY cid) AS x WHERE c.id = x.cid
                RETURNING c.id
            )
            SELECT announced.id, pg_notify(\(channel), announced.payload) FROM (
                SELECT p.id, p.payload FROM unnest(\(try bind(records.map(\.id)))::text[], \(payloads)::text[]) WITH ORDINALITY AS p (id, payload, ord)
                WHERE p.id IN (SELECT id FROM ins) ORDER BY p.ord
            ) AS announced
            """
        let rows = try await run(PostgresQuery(unsafeSQL: sql, binds: binds))
        return Set(try rows.map { try $0.decode(String.self) })
    }

    /// The statement that moves delivery cursors (never back) to the newest stored message among the
    /// acknowledged ones, or at or before an acknowledged range's end, as `MessageTable.advanceCursors`;
    /// nil when nothing moves.
    static func cursorMoves(_ moves: [CursorKey: CursorMove]) -> CursorStatement? {
        guard !moves.isEmpty else { return nil }
        var statement = CursorStatement()
        for (key, move) in moves.sorted(by: { ($0.key.cid, $0.key.clientID) < ($1.key.cid, $1.key.clientID) }) {
            statement.cids.append(key.cid)
            statement.clients.append(key.clientID)
            statement.throughs.append(move.through ?? Int64.min)
            for id in move.ids.sorted() {
                statement.ackCIDs.append(key.cid)
                statement.ackClients.append(key.clientID)
                statement.ackIDs.append(id)
            }
        }
        return statement
    }

    /// The cursor moves of a batch, as a statement of its own or as CTEs of the batch's statement.
    struct CursorStatement {
        var cids: [String] = []
        var clients: [String] = []
        var throughs: [Int64] = []
        var ackCIDs: [String] = []
        var ackClients: [String] = []
        var ackIDs: [String] = []

        /// A statement of its own.
        func query(prefix: String) throws -> PostgresQuery {
            var binds = PostgresBindings()
            let ctes = try query(prefix: prefix, bindingInto: &binds)
            return PostgresQuery(unsafeSQL: "WITH \(ctes) SELECT 1", binds: binds)
        }

        /// CTEs named `<prefix>acked`, `<prefix>ranges`, `<prefix>moved` (the update), binding into `binds`.
        /// Acknowledged ids are resolved to timestamps in one grouped join (not once per cursor), range ends
        /// with an index probe per cursor that has one.
        func query(prefix: String, bindingInto binds: inout PostgresBindings) throws -> String {
            func bind<Value: PostgresEncodable & Sendable>(_ value: Value) throws -> String {
                try binds.append(value)
                return "$\(binds.count)"
            }
            return """
                \(prefix)acked AS (
                    SELECT a.cid, a.client_id, MAX(m.t) AS t
                    FROM unnest(\(try bind(ackCIDs))::text[], \(try bind(ackClients))::text[], \(try bind(ackIDs))::text[]) AS a (cid, client_id, id)
                    JOIN messages m ON m.id = a.id AND m.cid = a.cid
                    GROUP BY a.cid, a.client_id
                ),
                \(prefix)ranges AS (
                    SELECT mv.cid, mv.client_id, (SELECT MAX(m.t) FROM messages m WHERE m.cid = mv.cid AND m.t <= mv.through) AS t
                    FROM unnest(\(try bind(cids))::text[], \(try bind(clients))::text[], \(try bind(throughs))::int8[]) AS mv (cid, client_id, through)
                    WHERE mv.through > \(try bind(Int64.min))
                ),
                \(prefix)moved AS (
                    UPDATE members SET delivered_t = GREATEST(members.delivered_t, newest.t)
                    FROM (
                        SELECT cid, client_id, MAX(t) AS t
                        FROM (SELECT * FROM \(prefix)acked UNION ALL SELECT * FROM \(prefix)ranges) AS both_kinds GROUP BY cid, client_id
                    ) AS newest
                    WHERE members.cid = newest.cid AND members.client_id = newest.client_id AND newest.t IS NOT NULL
                    RETURNING 1
                )
                """
        }
    }

    func message(_ id: String) async throws -> MessageRecord? {
        try await logged { try await fetch("SELECT * FROM messages WHERE id = \(id)").first.map(MessageRecord.init(postgres:)) }
    }

    func history(cid: String, limit: Int, beforeT: Int64?, afterT: Int64?, viewer: String, oldestFirst: Bool) async throws
        -> [MessageRecord]
    {
        try await logged {
            try await Self.history(
                fetch, cid: cid, limit: limit, beforeT: beforeT, afterT: afterT, viewer: viewer, oldestFirst: oldestFirst)
        }
    }

    /// `limit` messages strictly between `afterT` and `beforeT` visible to `viewer` (everyone when empty),
    /// in ascending order: the newest ones, or with `oldestFirst` the oldest ones.
    private static func history(
        _ run: Runner, cid: String, limit: Int, beforeT: Int64?, afterT: Int64?, viewer: String, oldestFirst: Bool
    ) async throws -> [MessageRecord] {
        let rows = try await run(
            """
            SELECT * FROM messages
            WHERE cid = \(cid) AND t < \(beforeT ?? Int64.max) AND t > \(afterT ?? Int64.min)
              AND (\(viewer) = '' OR recipients IS NULL OR from_id = \(viewer) OR \(viewer) = ANY(recipients))
            ORDER BY t \(unescaped: oldestFirst ? "ASC" : "DESC") LIMIT \(limit)
            """)
        let records = try rows.map(MessageRecord.init(postgres:))
        return oldestFirst ? records : records.reversed()
    }

    func backlog(clientID: String, limit: Int) async throws -> [(records: [MessageRecord], hasMore: Bool)] {
        try await logged {
            // Per membership, the messages after its cursor (one more than asked: whether there are more).
            let rows = try await fetch(
                """
                SELECT m.cid AS member_cid, x.* FROM members m JOIN conversations c ON c.id = m.cid
                LEFT JOIN LATERAL (
                    SELECT * FROM messages
                    WHERE cid = m.cid AND t > m.delivered_t AND from_id <> \(clientID)
                      AND (recipients IS NULL OR from_id = \(clientID) OR \(clientID) = ANY(recipients))
                    ORDER BY t LIMIT \(limit + 1)
                ) x ON TRUE
                WHERE m.client_id = \(clientID) AND (c.expires_at IS NULL OR c.expires_at > \(Self.now))
                ORDER BY m.cid, x.t
                """)
            var result: [(records: [MessageRecord], hasMore: Bool)] = []
            var current: String?
            var records: [MessageRecord] = []
            func finish() {
                if current != nil { result.append((Array(records.prefix(limit)), records.count > limit)) }
            }
            for row in rows {
                let cid = try row.decode(String.self)
                if cid != current {
                    finish()
                    current = cid
                    records = []
                }
                if try row.makeRandomAccess()["id"].decode(String?.self) != nil { records.append(try MessageRecord(postgres: row)) }
            }
            finish()
            return result
        }
    }

    func unreadCounts(clientID: String) async throws -> [UnreadInfo] {
        try await logged {
            let rows = try await fetch(
                """
                SELECT m.cid AS member_cid, u.unread, u.mentioned, l.* FROM members m JOIN conversations c ON c.id = m.cid
                CROSS JOIN LATERAL (
                    SELECT COUNT(*) AS unread,
                           COALESCE(BOOL_OR(mention_all OR \(clientID) = ANY(mention_pids)), FALSE) AS mentioned
                    FROM messages
                    WHERE cid = m.cid AND t > m.read_t AND from_id <> \(clientID)
                      AND (recipients IS NULL OR from_id = \(clientID) OR \(clientID) = ANY(recipients))
                ) u
                CROSS JOIN LATERAL (
                    SELECT * FROM messages
                    WHERE cid = m.cid AND (recipients IS NULL OR from_id = \(clientID) OR \(clientID) = ANY(recipients))
                    ORDER BY t DESC LIMIT 1
                ) l
                WHERE m.client_id = \(clientID) AND (c.expires_at IS NULL OR c.expires_at > \(Self.now)) AND u.unread > 0
                ORDER BY m.cid
                """)
            return try rows.map { row in
                let (cid, unread, mentioned) = try row.decode((String, Int64, Bool).self)
                return UnreadInfo(cid: cid, unread: Int(unread), last: try MessageRecord(postgres: row), mentioned: mentioned)
            }
        }
    }

    func recall(cid: String, messageID: String, by clientID: String, now: Int64, window: Int64) async throws
        -> (record: MessageRecord, conversation: ConversationRecord, members: [String])
    {
        try await logged {
            try await transaction { connection -> (record: MessageRecord, conversation: ConversationRecord, members: [String]) in
                let run = Self.runner(connection, logger)
                let conversation = try StoreRules.existing(try await Self.conversation(run, id: cid), cid)
                let found = try await run("SELECT * FROM messages WHERE id = \(messageID) FOR UPDATE").first.map(
                    MessageRecord.init(postgres:))
                var record = try StoreRules.checkRecall(found, cid: cid, messageID: messageID, by: clientID, now: now, window: window)
                if !record.recalled {
                    record.recalled = true
                    record.data = MessageRecord.recalledPlaceholder
                    record.patchT = now
                    _ = try await run(
                        "UPDATE messages SET recalled = TRUE, data = \(record.data), patch_t = \(now) WHERE id = \(record.id)")
                    try await MediaReferences.replace(run, record)
                }
                let members = conversation.transient ? [] : try await Self.members(run, cid: cid)
                return (record, conversation, members)
            }
        }
    }

    func markRead(cid: String, clientID: String, messageID: String?, t: Int64?) async throws -> (readT: Int64, receipts: [ReadReceipt]) {
        try await logged {
            try await transaction { connection -> (readT: Int64, receipts: [ReadReceipt]) in
                let run = Self.runner(connection, logger)
                guard
                    let previous = try await run(
                        "SELECT read_t FROM members WHERE cid = \(cid) AND client_id = \(clientID) FOR UPDATE"
                    ).first?.decode(Int64.self)
                else { throw IMError(.invalidMessagingTarget, "\(clientID) is not a member of \(cid)") }
                var target: Int64
                if let messageID {
                    guard
                        let message = try await run("SELECT * FROM messages WHERE id = \(messageID)").first.map(
                            MessageRecord.init(postgres:)),
                        message.cid == cid
                    else { throw IMError(.messageNotFound, "message \(messageID) is not in \(cid)") }
                    target = message.t
                } else if let t {
                    // A mark is a stored message's timestamp: a future `t` would claim messages not sent yet.
                    target =
                        try await run("SELECT COALESCE(MAX(t), 0) FROM messages WHERE cid = \(cid) AND t <= \(t)").first?.decode(
                            Int64.self) ?? 0
                } else {
                    target = try await Self.lastTimestamp(run, cid: cid)
                }
                target = max(target, previous)
                let receipts = try await run(
                    """
                    SELECT DISTINCT ON (from_id) from_id, id FROM messages
                    WHERE cid = \(cid) AND t > \(previous) AND t <= \(target) AND receipt AND from_id <> \(clientID)
                    ORDER BY from_id, t DESC
                    """
                ).map { row in
                    let (sender, id) = try row.decode((String, String).self)
                    return ReadReceipt(sender: sender, id: id)
                }
                _ = try await run(
                    """
                    UPDATE members SET read_t = \(target), delivered_t = GREATEST(delivered_t, \(target))
                    WHERE cid = \(cid) AND client_id = \(clientID)
                    """)
                return (target, receipts)
            }
        }
    }

    func receiptTimestamps(cid: String, clientID: String) async throws -> (readT: Int64, deliveredT: Int64) {
        try await logged {
            try await client.withConnection { connection -> (readT: Int64, deliveredT: Int64) in
                let run = Self.runner(connection, logger)
                _ = try StoreRules.existing(try await Self.conversation(run, id: cid), cid)
                guard try await Self.isMember(run, cid: cid, clientID: clientID) else {
                    throw IMError(.conversationMembershipRequired, "\(clientID) is not a member of \(cid)")
                }
                let row = try await run(
                    """
                    SELECT COALESCE(MAX(read_t), 0), COALESCE(MAX(delivered_t), 0) FROM members
                    WHERE cid = \(cid) AND client_id <> \(clientID)
                    """
                ).first
                guard let row else { return (0, 0) }
                let (readT, deliveredT) = try row.decode((Int64, Int64).self)
                return (readT, deliveredT)
            }
        }
    }

    func receiptMessageIDs(cid: String, from: Int64, to: Int64, excluding clientID: String) async throws -> [String] {
        try await logged {
            try await fetch(
                """
                SELECT id FROM messages
                WHERE cid = \(cid) AND t >= \(from) AND t <= \(to) AND receipt AND from_id <> \(clientID)
                ORDER BY t LIMIT 1000
                """
            ).map { try $0.decode(String.self) }
        }
    }
}

// MARK: Shared queries

extension PostgresStore {
    /// Runs a statement and returns its rows: on a transaction's connection, or on the pool.
    typealias Runner = (PostgresQuery) async throws -> [PostgresRow]

    static func runner(_ connection: PostgresConnection, _ logger: Logger) -> Runner {
        { query in try await connection.query(query, logger: logger).collect() }
    }

    /// The conversation unless it expired.
    static func conversation(_ run: Runner, id: String) async throws -> ConversationRecord? {
        try await run("SELECT * FROM conversations WHERE id = \(id) AND (expires_at IS NULL OR expires_at > \(now))")
            .first.map(ConversationRecord.init(postgres:))
    }

    /// The conversation, locked until the transaction ends, or error 4401.
    static func lockConversation(_ run: Runner, id: String) async throws -> ConversationRecord {
        let row = try await run("SELECT * FROM conversations WHERE id = \(id) AND (expires_at IS NULL OR expires_at > \(now)) FOR UPDATE")
            .first
        return try StoreRules.existing(row.map(ConversationRecord.init(postgres:)), id)
    }

    static func members(_ run: Runner, cid: String) async throws -> [String] {
        try await run("SELECT client_id FROM members WHERE cid = \(cid) ORDER BY joined_at, client_id").map { try $0.decode(String.self) }
    }

    /// The members of several conversations (each listed, possibly empty), in the order of `members`.
    static func memberLists(_ run: Runner, cids: [String]) async throws -> [String: [String]] {
        guard !cids.isEmpty else { return [:] }
        var lists = Dictionary(cids.map { ($0, [String]()) }, uniquingKeysWith: { first, _ in first })
        let rows = try await run("SELECT cid, client_id FROM members WHERE cid = ANY(\(cids)) ORDER BY cid, joined_at, client_id")
        for row in rows {
            let (cid, clientID) = try row.decode((String, String).self)
            lists[cid, default: []].append(clientID)
        }
        return lists
    }

    static func isMember(_ run: Runner, cid: String, clientID: String) async throws -> Bool {
        try await !run("SELECT 1 FROM members WHERE cid = \(cid) AND client_id = \(clientID)").isEmpty
    }

    static func lastTimestamp(_ run: Runner, cid: String) async throws -> Int64 {
        try await run("SELECT COALESCE(MAX(t), 0) FROM messages WHERE cid = \(cid)").first?.decode(Int64.self) ?? 0
    }
}

extension ConversationRecord {
    /// A `conversations` row (`SELECT *`).
    init(postgres row: PostgresRow) throws {
        let row = row.makeRandomAccess()
        self.init(
            id: try row["id"].decode(String.self), name: try row["name"].decode(String?.self),
            creator: try row["creator"].decode(String.self),
            transient: try row["transient"].decode(Bool.self), uniqueKey: try row["unique_key"].decode(String?.self),
            attr: JSONValue.parse(try row["attr"].decode(String.self)) ?? .object([:]),
            muted: ClientIDList.parse(try row["muted"].decode(String.self)) ?? [], lm: try row["lm"].decode(Int64?.self),
            createdAt: try row["created_at"].decode(Int64.self), updatedAt: try row["updated_at"].decode(Int64.self),
            expiresAt: try row["expires_at"].decode(Int64?.self),
            joinPolicy: JoinPolicy.stored(try row["join_policy"].decode(String?.self)),
            lockReason: try row["lock_reason"].decode(String?.self)
        )
    }
}

extension MessageRecord {
    /// A `messages` row (`SELECT *`).
    init(postgres row: PostgresRow) throws {
        let row = row.makeRandomAccess()
        self.init(
            id: try row["id"].decode(String.self), cid: try row["cid"].decode(String.self), from: try row["from_id"].decode(String.self),
            data: try row["data"].decode(String.self), t: try row["t"].decode(Int64.self), receipt: try row["receipt"].decode(Bool.self),
            priority: try row["priority"].decode(String?.self), mentionPids: try row["mention_pids"].decode([String]?.self),
            mentionAll: try row["mention_all"].decode(Bool.self), recalled: try row["recalled"].decode(Bool.self),
            patchT: try row["patch_t"].decode(Int64?.self), binary: try row["bin"].decode(Bool.self))
    }
}
