import Foundation
import IMCore
import Logging
import PostgresNIO

/// The group commit: a batch of messages and delivery-cursor moves stored in one transaction.
extension PostgresStore {
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
}
