import Foundation
import GRDB
import Logging

/// Opens the server's SQLite file (WAL mode), checks its integrity and migrates its schema.
enum SQLiteSchema {
    static func open(path: String, synchronousFull: Bool, integrityCheckSeconds: Int = 0, logger: Logger? = nil) throws
        -> DatabasePool
    {
        WALWrites.install()
        do {
            var config = Configuration()
            config.busyMode = .timeout(5)
            config.prepareDatabase { db in
                try db.execute(sql: "PRAGMA synchronous = \(synchronousFull ? "FULL" : "NORMAL")")
                db.add(function: RegexCache.function)
            }
            let pool = try DatabasePool(path: path, configuration: config)
            // GRDB switches its writer to synchronous=NORMAL when it enables WAL, after `prepareDatabase` ran;
            // only the writer commits, so set the level there again (FULL: a commit is on disk before the ack).
            try pool.barrierWriteWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = \(synchronousFull ? "FULL" : "NORMAL")")
            }
            // Before migrating: a damaged file is not written to.
            if integrityCheckSeconds > 0 { try checkIntegrity(pool, path: path, seconds: integrityCheckSeconds, logger: logger) }
            try migrator.migrate(pool)
            return pool
        } catch let error as DatabaseError where [.SQLITE_CORRUPT, .SQLITE_NOTADB].contains(error.resultCode) {
            // Damage found by opening or migrating rather than by the check.
            throw DamagedDatabase(path: path, problems: [error.message ?? "\(error)"])
        }
    }

    /// Runs `PRAGMA quick_check` (every page and index entry, not the slower cross-checks of
    /// `integrity_check`) for at most `seconds`: a file with problems throws `DamagedDatabase`; a check that
    /// runs out of time is interrupted and logged, and the file is served.
    static func checkIntegrity(_ pool: DatabasePool, path: String, seconds: Int, logger: Logger?) throws {
        let started = ContinuousClock.now
        // Weak: a cancelled work item stays queued, with what it captured, until its time; a strong capture kept
        // the pool (its five file descriptors) open for `seconds` after a server that stopped sooner.
        let deadline = DispatchWorkItem { [weak pool] in pool?.interrupt() }
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(seconds), execute: deadline)
        defer { deadline.cancel() }
        let problems: [String]
        do {
            problems = try pool.read { db in try String.fetchAll(db, sql: "PRAGMA quick_check(20)") }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_INTERRUPT {
            logger?.warning(
                "SQLite integrity check did not finish; serving the file unchecked",
                metadata: ["path": "\(path)", "limit": "\(seconds) s", "hint": "raise --integrity-check-seconds, or 0 to skip the check"])
            return
        }
        guard problems == ["ok"] else { throw DamagedDatabase(path: path, problems: problems) }
        logger?.info("SQLite integrity check passed", metadata: ["path": "\(path)", "took": "\(ContinuousClock.now - started)"])
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE conversations (
                        id TEXT PRIMARY KEY NOT NULL,
                        name TEXT,
                        creator TEXT NOT NULL,
                        transient INTEGER NOT NULL DEFAULT 0,
                        unique_key TEXT UNIQUE,
                        attr TEXT NOT NULL DEFAULT '{}',
                        muted TEXT NOT NULL DEFAULT '[]',
                        lm INTEGER,
                        created_at INTEGER NOT NULL,
                        updated_at INTEGER NOT NULL
                    );
                    CREATE INDEX conversations_by_lm ON conversations(lm);
                    CREATE TABLE members (
                        cid TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                        client_id TEXT NOT NULL,
                        joined_at INTEGER NOT NULL,
                        delivered_t INTEGER NOT NULL DEFAULT 0,
                        read_t INTEGER NOT NULL DEFAULT 0,
                        PRIMARY KEY (cid, client_id)
                    ) WITHOUT ROWID;
                    CREATE INDEX members_by_client ON members(client_id, cid);
                    CREATE TABLE messages (
                        id TEXT PRIMARY KEY NOT NULL,
                        cid TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                        from_id TEXT NOT NULL,
                        data TEXT NOT NULL,
                        t INTEGER NOT NULL,
                        receipt INTEGER NOT NULL DEFAULT 0,
                        priority TEXT,
                        dt TEXT,
                        recalled INTEGER NOT NULL DEFAULT 0,
                        patch_t INTEGER
                    );
                    CREATE UNIQUE INDEX messages_by_conversation ON messages(cid, t);
                    CREATE UNIQUE INDEX messages_by_dedupe_token ON messages(from_id, dt) WHERE dt IS NOT NULL;
                    CREATE TABLE device_tags (
                        client_id TEXT NOT NULL,
                        tag TEXT NOT NULL,
                        device_id TEXT NOT NULL,
                        PRIMARY KEY (client_id, tag)
                    ) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v2-recipients") { db in
            try db.execute(sql: "ALTER TABLE messages ADD COLUMN recipients TEXT")
        }
        migrator.registerMigration("v3-session-tokens") { db in
            try db.execute(
                sql: """
                    CREATE TABLE session_tokens (
                        token TEXT PRIMARY KEY NOT NULL,
                        client_id TEXT NOT NULL,
                        expires_at INTEGER NOT NULL
                    ) WITHOUT ROWID;
                    CREATE INDEX session_tokens_by_expiry ON session_tokens(expires_at);
                    """)
        }
        migrator.registerMigration("v4-mentions-temporary-conversations") { db in
            try db.execute(
                sql: """
                    ALTER TABLE messages ADD COLUMN mention_pids TEXT;
                    ALTER TABLE messages ADD COLUMN mention_all INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE conversations ADD COLUMN expires_at INTEGER;
                    CREATE INDEX conversations_by_expiry ON conversations(expires_at) WHERE expires_at IS NOT NULL;
                    """)
        }
        migrator.registerMigration("v5-signature-nonces") { db in
            try db.execute(
                sql: """
                    CREATE TABLE signature_nonces (
                        scope TEXT NOT NULL,
                        nonce TEXT NOT NULL,
                        seen_at INTEGER NOT NULL,
                        PRIMARY KEY (scope, nonce)
                    ) WITHOUT ROWID;
                    CREATE INDEX signature_nonces_by_time ON signature_nonces(seen_at);
                    """)
        }
        migrator.registerMigration("v6-join-policy") { db in
            // Conversations from before join policies: 1:1s (unique with two members) and temporary ones
            // become invite-only, groups stay open as they were.
            try db.execute(
                sql: """
                    ALTER TABLE conversations ADD COLUMN join_policy TEXT NOT NULL DEFAULT 'open';
                    UPDATE conversations SET join_policy = 'invite'
                    WHERE NOT transient AND (expires_at IS NOT NULL
                        OR length(unique_key) - length(replace(unique_key, char(31), '')) = 1);
                    """)
        }
        migrator.registerMigration("v7-member-controls") { db in try MemberControlTable.create(db) }
        migrator.registerMigration("v8-message-edits") { db in
            // Binary messages (`data` holds their bytes as base64); edits reuse `patch_t`.
            try db.execute(sql: "ALTER TABLE messages ADD COLUMN bin INTEGER NOT NULL DEFAULT 0")
        }
        migrator.registerMigration("v9-patches-by-time") { db in
            // The recalls and edits a reconnecting client missed (`session open` with `lastPatchTime`).
            try db.execute(sql: "CREATE INDEX messages_by_patch_time ON messages(cid, patch_t) WHERE patch_t IS NOT NULL")
        }
        migrator.registerMigration("v10-media-files") { db in try SQLiteMediaRecords.create(db) }
        migrator.registerMigration("v11-media-refs") { db in try MediaReferences.create(db) }
        migrator.registerMigration("v12-media-external") { db in try SQLiteExternalFiles.create(db) }
        migrator.registerMigration("v13-push-devices") { db in try SQLitePushDevices.create(db) }
        migrator.registerMigration("v14-push-queue") { db in try SQLitePushQueue.create(db) }
        // A lock's reason while a conversation is locked to invite-only (see JoinPolicy.change).
        migrator.registerMigration("v15-join-lock") { db in try db.execute(sql: "ALTER TABLE conversations ADD COLUMN lock_reason TEXT") }
        migrator.registerMigration("v16-badge-indexes") { db in try SQLitePushQueue.createBadgeIndexes(db) }
        return migrator
    }
}

/// The SQLite file is damaged: the server refuses to serve it (what it would serve could be wrong, and
/// writes could spread the damage), and says what to do.
public struct DamagedDatabase: Error, CustomStringConvertible, LocalizedError {
    public let path: String
    /// What SQLite reported (at most 20 problems).
    public let problems: [String]

    public var description: String {
        """
        the database \(path) is damaged (\(problems.prefix(3).joined(separator: "; "))\(problems.count > 3 ? "; …" : "")); \
        refusing to serve it. Stop every process using it, keep a copy, then restore the newest backup, or salvage \
        what is readable with `sqlite3 \(path) .recover | sqlite3 recovered.sqlite` and start with \
        --db recovered.sqlite. To start anyway, skip the check with --integrity-check-seconds 0 (queries that \
        reach the damage will fail with 4200).
        """
    }

    public var errorDescription: String? { description }
}
