import Foundation
import Logging
import PostgresNIO

/// The shared store's tables, created and upgraded by versioned migrations when a node starts.
///
/// Each migration runs in a transaction of its own and records its version in `schema_migrations`; every
/// transaction first takes the same transaction-scoped advisory lock, so nodes starting together apply
/// each migration once, one after the other. All timestamps are milliseconds since 1970 (`BIGINT`).
enum PostgresSchema {
    /// The advisory lock that serializes migrations across nodes ("hookbot" in ASCII).
    static let migrationLock: Int64 = 0x68_6F_6F_6B_62_6F_74

    struct Migration: Sendable {
        var version: Int32
        var name: String
        var statements: [String]
    }

    /// Creates the schema and its migration table, then applies the migrations not applied yet (up to and
    /// including version `last`: tests build a database as an older server left it).
    static func migrate(_ client: PostgresClient, schema: String, logger: Logger, through last: Int32 = .max) async throws {
        let quoted = "\"\(schema)\""
        try await PostgresStore.transaction(client, logger: logger) { connection in
            try await lock(connection, logger: logger)
            _ = try await connection.query(PostgresQuery(unsafeSQL: "CREATE SCHEMA IF NOT EXISTS \(quoted)"), logger: logger).collect()
            _ = try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        CREATE TABLE IF NOT EXISTS \(quoted).schema_migrations (
                            version INT PRIMARY KEY,
                            name TEXT NOT NULL,
                            applied_at BIGINT NOT NULL
                        )
                        """), logger: logger
            ).collect()
        }
        for migration in migrations(schema: quoted) where migration.version <= last {
            let applied = try await PostgresStore.transaction(client, logger: logger) { connection -> Bool in
                try await lock(connection, logger: logger)
                let done = try await connection.query(
                    PostgresQuery(
                        unsafeSQL: "SELECT 1 FROM \(quoted).schema_migrations WHERE version = $1",
                        binds: bindings(migration.version)), logger: logger
                ).collect()
                guard done.isEmpty else { return false }
                for statement in migration.statements {
                    _ = try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger).collect()
                }
                var binds = PostgresBindings()
                binds.append(migration.version)
                binds.append(migration.name)
                binds.append(Identifiers.nowMillis())
                _ = try await connection.query(
                    PostgresQuery(
                        unsafeSQL: "INSERT INTO \(quoted).schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)", binds: binds),
                    logger: logger
                ).collect()
                return true
            }
            if applied {
                logger.info("applied PostgreSQL migration", metadata: ["version": "\(migration.version)", "name": "\(migration.name)"])
            }
        }
    }

    private static func lock(_ connection: PostgresConnection, logger: Logger) async throws {
        _ = try await connection.query("SELECT pg_advisory_xact_lock(\(migrationLock))", logger: logger).collect()
    }

    private static func bindings(_ version: Int32) -> PostgresBindings {
        var binds = PostgresBindings()
        binds.append(version)
        return binds
    }

    /// The migrations, in order; `s` is the quoted schema name that qualifies every table.
    static func migrations(schema s: String) -> [Migration] {
        [
            Migration(
                version: 1, name: "v1",
                statements: [
                    """
                    CREATE TABLE \(s).conversations (
                        id TEXT PRIMARY KEY,
                        name TEXT,
                        creator TEXT NOT NULL,
                        transient BOOLEAN NOT NULL DEFAULT FALSE,
                        unique_key TEXT UNIQUE,
                        attr JSONB NOT NULL DEFAULT '{}',
                        muted JSONB NOT NULL DEFAULT '[]',
                        lm BIGINT,
                        created_at BIGINT NOT NULL,
                        updated_at BIGINT NOT NULL,
                        expires_at BIGINT
                    )
                    """,
                    "CREATE INDEX conversations_by_lm ON \(s).conversations (lm)",
                    "CREATE INDEX conversations_by_expiry ON \(s).conversations (expires_at) WHERE expires_at IS NOT NULL",
                    """
                    CREATE TABLE \(s).members (
                        cid TEXT NOT NULL REFERENCES \(s).conversations (id) ON DELETE CASCADE,
                        client_id TEXT NOT NULL,
                        joined_at BIGINT NOT NULL,
                        delivered_t BIGINT NOT NULL DEFAULT 0,
                        read_t BIGINT NOT NULL DEFAULT 0,
                        PRIMARY KEY (cid, client_id)
                    )
                    """,
                    "CREATE INDEX members_by_client ON \(s).members (client_id, cid)",
                    """
                    CREATE TABLE \(s).messages (
                        id TEXT PRIMARY KEY,
                        cid TEXT NOT NULL REFERENCES \(s).conversations (id) ON DELETE CASCADE,
                        from_id TEXT NOT NULL,
                        data TEXT NOT NULL,
                        t BIGINT NOT NULL,
                        receipt BOOLEAN NOT NULL DEFAULT FALSE,
                        priority TEXT,
                        dt TEXT,
                        recalled BOOLEAN NOT NULL DEFAULT FALSE,
                        patch_t BIGINT,
                        recipients TEXT[],
                        mention_pids TEXT[],
                        mention_all BOOLEAN NOT NULL DEFAULT FALSE
                    )
                    """,
                    "CREATE UNIQUE INDEX messages_by_conversation ON \(s).messages (cid, t)",
                    "CREATE UNIQUE INDEX messages_by_dedupe_token ON \(s).messages (from_id, dt) WHERE dt IS NOT NULL",
                    """
                    CREATE TABLE \(s).device_tags (
                        client_id TEXT NOT NULL,
                        tag TEXT NOT NULL,
                        device_id TEXT NOT NULL,
                        generation BIGINT NOT NULL DEFAULT 1,
                        PRIMARY KEY (client_id, tag)
                    )
                    """,
                    """
                    CREATE TABLE \(s).session_tokens (
                        token TEXT PRIMARY KEY,
                        client_id TEXT NOT NULL,
                        expires_at BIGINT NOT NULL
                    )
                    """,
                    "CREATE INDEX session_tokens_by_expiry ON \(s).session_tokens (expires_at)",
                    """
                    CREATE TABLE \(s).signature_nonces (
                        scope TEXT NOT NULL,
                        nonce TEXT NOT NULL,
                        seen_at BIGINT NOT NULL,
                        PRIMARY KEY (scope, nonce)
                    )
                    """,
                    "CREATE INDEX signature_nonces_by_time ON \(s).signature_nonces (seen_at)",
                    // The cluster: the nodes, and the connections of each (presence).
                    """
                    CREATE TABLE \(s).nodes (
                        id TEXT PRIMARY KEY,
                        address TEXT,
                        started_at BIGINT,
                        seen_at BIGINT NOT NULL
                    )
                    """,
                    """
                    CREATE TABLE \(s).presence (
                        node TEXT NOT NULL,
                        connection BIGINT NOT NULL,
                        client_id TEXT NOT NULL,
                        tag TEXT,
                        room TEXT,
                        interceptor BOOLEAN NOT NULL DEFAULT FALSE,
                        PRIMARY KEY (node, connection)
                    )
                    """,
                    "CREATE INDEX presence_by_client ON \(s).presence (client_id)",
                    "CREATE INDEX presence_by_room ON \(s).presence (room)",
                ]),
            // Conversations from before join policies: 1:1s (unique with two members) and temporary ones
            // become invite-only, groups stay open as they were.
            Migration(
                version: 2, name: "join-policy",
                statements: [
                    "ALTER TABLE \(s).conversations ADD COLUMN join_policy TEXT NOT NULL DEFAULT 'open'",
                    """
                    UPDATE \(s).conversations SET join_policy = 'invite'
                    WHERE NOT transient AND (expires_at IS NOT NULL
                        OR length(unique_key) - length(replace(unique_key, chr(31), '')) = 1)
                    """,
                ]),
            Migration(version: 3, name: "member-controls", statements: PostgresStore.memberControlTables(schema: s)),
            // Binary messages (`data` holds their bytes as base64); edits reuse `patch_t`.
            Migration(
                version: 4, name: "message-edits",
                statements: ["ALTER TABLE \(s).messages ADD COLUMN bin BOOLEAN NOT NULL DEFAULT FALSE"]),
            // The recalls and edits a reconnecting client missed (`session open` with `lastPatchTime`).
            Migration(
                version: 5, name: "patches-by-time",
                statements: ["CREATE INDEX messages_by_patch_time ON \(s).messages(cid, patch_t) WHERE patch_t IS NOT NULL"]),
            Migration(version: 6, name: "media-files", statements: PostgresMediaRecords.tables(schema: s)),
            Migration(version: 7, name: "media-content", statements: PostgresMediaContent.tables(schema: s)),
            Migration(version: 8, name: "media-refs", statements: MediaReferences.tables(schema: s)),
            Migration(version: 9, name: "media-external", statements: PostgresExternalFiles.tables(schema: s)),
            Migration(version: 10, name: "push-devices", statements: PostgresPushDevices.tables(schema: s)),
            Migration(version: 11, name: "push-queue", statements: PostgresPushQueue.tables(schema: s)),
            // A lock's reason while a conversation is locked to invite-only (see JoinPolicy.change).
            Migration(version: 12, name: "join-lock", statements: ["ALTER TABLE \(s).conversations ADD COLUMN lock_reason TEXT"]),
        ]
    }
}
