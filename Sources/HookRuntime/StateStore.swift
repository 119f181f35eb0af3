import Foundation
import GRDB
import IMCore

/// Persistent plugin state and translation cache in one SQLite file (WAL).
/// Every write is committed before the call returns. Thread-safe.
///
/// Each plugin's state is bounded by `quota` (keys and bytes of keys plus values, expired entries
/// included until purged): a write that would grow a plugin past it fails and changes nothing.
public final class HookStateStore: Sendable {
    /// How much state one plugin may keep.
    public struct Quota: Sendable, Equatable {
        public var keys: Int
        public var bytes: Int
        public init(keys: Int = 100_000, bytes: Int = 64 << 20) {
            self.keys = keys
            self.bytes = bytes
        }
    }

    let pool: DatabasePool
    public let path: String
    public let quota: Quota

    /// Opens (or creates) the store at `path`, e.g. `hookbot-state.sqlite`.
    public init(path: String, quota: Quota = Quota()) throws {
        self.path = path
        self.quota = quota
        var config = Configuration()
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        config.busyMode = .timeout(10)
        pool = try DatabasePool(path: path, configuration: config)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("hookruntime-v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE IF NOT EXISTS plugin_state (
                        plugin TEXT NOT NULL,
                        key TEXT NOT NULL,
                        value TEXT NOT NULL,
                        expires_at REAL,
                        PRIMARY KEY (plugin, key)
                    ) WITHOUT ROWID;
                    CREATE TABLE IF NOT EXISTS translation_cache (
                        message_id TEXT NOT NULL,
                        lang TEXT NOT NULL,
                        text TEXT NOT NULL,
                        plugin TEXT,
                        created_at REAL,
                        PRIMARY KEY (message_id, lang)
                    ) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("hookruntime-v2-usage") { db in
            // Per-plugin usage kept by triggers, so a quota check is one row read in the write's transaction.
            try db.execute(
                sql: """
                    CREATE TABLE plugin_usage (
                        plugin TEXT PRIMARY KEY NOT NULL,
                        keys INTEGER NOT NULL,
                        bytes INTEGER NOT NULL
                    ) WITHOUT ROWID;
                    INSERT INTO plugin_usage (plugin, keys, bytes)
                        SELECT plugin, COUNT(*), SUM(length(CAST(key AS BLOB)) + length(CAST(value AS BLOB)))
                        FROM plugin_state GROUP BY plugin;
                    CREATE TRIGGER plugin_state_inserted AFTER INSERT ON plugin_state BEGIN
                        INSERT INTO plugin_usage (plugin, keys, bytes)
                        VALUES (NEW.plugin, 1, length(CAST(NEW.key AS BLOB)) + length(CAST(NEW.value AS BLOB)))
                        ON CONFLICT (plugin) DO UPDATE SET keys = keys + 1, bytes = bytes + excluded.bytes;
                    END;
                    CREATE TRIGGER plugin_state_updated AFTER UPDATE ON plugin_state BEGIN
                        UPDATE plugin_usage
                        SET bytes = bytes - length(CAST(OLD.key AS BLOB)) - length(CAST(OLD.value AS BLOB))
                                          + length(CAST(NEW.key AS BLOB)) + length(CAST(NEW.value AS BLOB))
                        WHERE plugin = NEW.plugin;
                    END;
                    CREATE TRIGGER plugin_state_deleted AFTER DELETE ON plugin_state BEGIN
                        UPDATE plugin_usage
                        SET keys = keys - 1, bytes = bytes - length(CAST(OLD.key AS BLOB)) - length(CAST(OLD.value AS BLOB))
                        WHERE plugin = OLD.plugin;
                    END;
                    """)
        }
        migrator.registerMigration("hookruntime-v3-schedules") { db in try Self.createScheduleTables(db) }
        try migrator.migrate(pool)
    }

    /// Keys and bytes a plugin's state holds.
    public func usage(plugin: String) throws -> (keys: Int, bytes: Int) {
        try pool.read { db in try Self.usage(db, plugin: plugin) }
    }

    private static func usage(_ db: Database, plugin: String) throws -> (keys: Int, bytes: Int) {
        guard let row = try Row.fetchOne(db, sql: "SELECT keys, bytes FROM plugin_usage WHERE plugin = ?", arguments: [plugin])
        else { return (0, 0) }
        return (row["keys"], row["bytes"])
    }

    /// Writes with `write` and fails (rolling it back) when that grew the plugin past its quota.
    private func withinQuota<T>(_ db: Database, plugin: String, _ write: () throws -> T) throws -> T {
        let before = try Self.usage(db, plugin: plugin)
        let result = try write()
        let after = try Self.usage(db, plugin: plugin)
        if after.keys > quota.keys, after.keys > before.keys {
            throw StoreError.quota("state holds \(before.keys) keys; the limit is \(quota.keys)")
        }
        if after.bytes > quota.bytes, after.bytes > before.bytes {
            throw StoreError.quota("state would hold \(after.bytes) bytes; the limit is \(quota.bytes)")
        }
        return result
    }

    // MARK: plugin state

    public func get(plugin: String, key: String, now: Double) throws -> JSONValue? {
        let text = try pool.read { db in
            try String.fetchOne(
                db,
                sql: """
                    SELECT value FROM plugin_state WHERE plugin = ? AND key = ? AND (expires_at IS NULL OR expires_at > ?)
                    """, arguments: [plugin, key, now])
        }
        guard let text else { return nil }
        return try JSONValue(parsing: text)
    }

    /// Sets `key`; `ttl` in seconds (nil = no expiry). Setting `.null` deletes.
    public func set(plugin: String, key: String, value: JSONValue, ttl: Double? = nil, now: Double) throws {
        if value == .null {
            try delete(plugin: plugin, key: key)
            return
        }
        let text = value.jsonString()
        let expires: Double? = ttl.map { now + $0 }
        try pool.write { db in
            try withinQuota(db, plugin: plugin) {
                try db.execute(
                    sql: """
                        INSERT INTO plugin_state(plugin, key, value, expires_at) VALUES (?, ?, ?, ?)
                        ON CONFLICT(plugin, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at
                        """, arguments: [plugin, key, text, expires])
            }
        }
    }

    /// How `incr` treats the expiry of a key that already has one.
    public enum Expiry: String, Sendable {
        /// A fixed window: the `incr` that creates the key (or finds it expired, or without an expiry) sets
        /// the expiry to now + `ttl`; later calls keep it, so a counter resets `ttl` seconds after its first
        /// increment however often it is incremented.
        case fixed
        /// Every `incr` that passes a `ttl` moves the expiry to now + `ttl`: the key lives until `ttl`
        /// seconds pass without an increment.
        case sliding
    }

    /// Atomically adds `by` to a numeric value (missing or expired counts as 0). Returns the new value.
    /// Without `ttl` the key keeps the expiry it has (none for a new key); with one, `expiry` says whether
    /// it sets the expiry of a new window only (`.fixed`, the default) or on every call (`.sliding`).
    public func incr(
        plugin: String, key: String, by: JSONValue, ttl: Double? = nil, expiry: Expiry = .fixed, now: Double
    ) throws -> JSONValue {
        try pool.write { db -> JSONValue in
            let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT value, expires_at FROM plugin_state WHERE plugin = ? AND key = ? AND (expires_at IS NULL OR expires_at > ?)
                    """, arguments: [plugin, key, now])
            var current: JSONValue = .int(0)
            var expires: Double? = nil
            if let row {
                current = try JSONValue(parsing: row["value"])
                expires = row["expires_at"]
            }
            if let ttl, expiry == .sliding || expires == nil { expires = now + ttl }
            let result: JSONValue
            switch (current, by) {
            case (.int(let a), .int(let b)):
                let (s, o) = a.addingReportingOverflow(b)
                result = o ? .double(Double(a) + Double(b)) : .int(s)
            default:
                guard let a = current.doubleValue else { throw StoreError.notNumeric(key) }
                guard let b = by.doubleValue else { throw StoreError.notNumeric("increment") }
                result = .double(a + b)
            }
            try withinQuota(db, plugin: plugin) {
                try db.execute(
                    sql: """
                        INSERT INTO plugin_state(plugin, key, value, expires_at) VALUES (?, ?, ?, ?)
                        ON CONFLICT(plugin, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at
                        """, arguments: [plugin, key, result.jsonString(), expires])
            }
            return result
        }
    }

    public func delete(plugin: String, key: String) throws {
        try pool.write { db in
            try db.execute(sql: "DELETE FROM plugin_state WHERE plugin = ? AND key = ?", arguments: [plugin, key])
        }
    }

    /// One stored entry, as the admin API shows it (`GET /api/plugins/:name/state` encodes it as it is).
    public struct Entry: Sendable, Hashable, Encodable {
        public var key: String
        public var value: JSONValue
        /// Seconds since 1970 (the runtime clock), or nil for no expiry.
        public var expiresAt: Double?
    }

    /// A plugin's live entries, sorted by key, at most `limit` (reads on GRDB's queue, not the caller's thread).
    public func entries(plugin: String, now: Double, limit: Int = 1000) async throws -> [Entry] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT key, value, expires_at FROM plugin_state
                    WHERE plugin = ? AND (expires_at IS NULL OR expires_at > ?) ORDER BY key LIMIT ?
                    """, arguments: [plugin, now, limit]
            ).map { row in
                Entry(key: row["key"], value: (try? JSONValue(parsing: row["value"])) ?? .null, expiresAt: row["expires_at"])
            }
        }
    }

    /// Deletes one key of a plugin; false when there was none.
    public func remove(plugin: String, key: String) async throws -> Bool {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM plugin_state WHERE plugin = ? AND key = ?", arguments: [plugin, key])
            return db.changesCount > 0
        }
    }

    /// Live keys starting with `prefix`, sorted.
    public func keys(plugin: String, prefix: String, now: Double) throws -> [String] {
        try pool.read { db in
            // range scan on the primary key; prefix compared in Swift for exactness
            let rows = try String.fetchAll(
                db,
                sql: """
                    SELECT key FROM plugin_state WHERE plugin = ? AND key >= ? AND (expires_at IS NULL OR expires_at > ?) ORDER BY key
                    """, arguments: [plugin, prefix, now])
            var out: [String] = []
            for k in rows {
                if k.hasPrefix(prefix) { out.append(k) } else if !prefix.isEmpty && k > prefix { break }
            }
            return out
        }
    }

    /// Removes expired entries (optional housekeeping; reads already ignore them).
    @discardableResult
    public func purgeExpired(now: Double) throws -> Int {
        try pool.write { db in
            try db.execute(sql: "DELETE FROM plugin_state WHERE expires_at IS NOT NULL AND expires_at <= ?", arguments: [now])
            return db.changesCount
        }
    }

    // MARK: translation cache

    public func cachedTranslation(messageID: String, lang: String) throws -> (text: String, plugin: String?)? {
        try pool.read { db in
            guard
                let row = try Row.fetchOne(
                    db, sql: "SELECT text, plugin FROM translation_cache WHERE message_id = ? AND lang = ?",
                    arguments: [messageID, lang])
            else { return nil }
            return (row["text"], row["plugin"])
        }
    }

    public func cacheTranslation(messageID: String, lang: String, text: String, plugin: String?, now: Double) throws {
        try pool.write { db in
            try db.execute(
                sql: """
                    INSERT OR REPLACE INTO translation_cache(message_id, lang, text, plugin, created_at) VALUES (?, ?, ?, ?, ?)
                    """, arguments: [messageID, lang, text, plugin, now])
        }
    }

    enum StoreError: Error, CustomStringConvertible {
        case notNumeric(String)
        case quota(String)
        var description: String {
            switch self {
            case .notNumeric(let k): return "value of \(k) is not a number"
            case .quota(let detail): return "state quota exceeded: \(detail)"
            }
        }
    }
}
