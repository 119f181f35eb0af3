import Foundation
import GRDB

/// Opens the server's SQLite file (WAL mode) and migrates its schema.
enum SQLiteSchema {
    static func open(path: String, synchronousFull: Bool) throws -> DatabasePool {
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
        try migrator.migrate(pool)
        return pool
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
        return migrator
    }
}
