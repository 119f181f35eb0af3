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
    static var now: Int64 { Identifiers.nowMillis() }

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
}
