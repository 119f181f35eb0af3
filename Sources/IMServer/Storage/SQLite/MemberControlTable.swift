import Foundation
import GRDB

/// Mutes, block lists and roles of conversations (`member_controls`, migration `v7-member-controls`).
enum MemberControlTable {
    static func create(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE member_controls (
                    cid TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                    kind TEXT NOT NULL,
                    client_id TEXT NOT NULL,
                    value TEXT,
                    until INTEGER,
                    by TEXT NOT NULL,
                    at INTEGER NOT NULL,
                    PRIMARY KEY (cid, kind, client_id)
                ) WITHOUT ROWID;
                """)
    }

    static func all(_ db: Database, cid: String, now: Int64) throws -> [MemberControl] {
        try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT kind, client_id, value, until, by, at FROM member_controls
                    WHERE cid = ? AND (until IS NULL OR until > ?) ORDER BY at, client_id
                    """), arguments: [cid, now]
        ).compactMap { row in
            guard let kind = MemberControl.Kind(rawValue: row["kind"]) else { return nil }
            return MemberControl(
                kind: kind, clientID: row["client_id"], value: row["value"], until: row["until"], by: row["by"], at: row["at"])
        }
    }

    static func set(
        _ db: Database, cid: String, kind: MemberControl.Kind, clientIDs: [String], on: Bool, value: String?, until: Int64?, by: String,
        now: Int64
    ) throws -> [String] {
        try db.execute(sql: "DELETE FROM member_controls WHERE cid = ? AND until IS NOT NULL AND until <= ?", arguments: [cid, now])
        var changed: [String] = []
        for clientID in clientIDs {
            if on {
                try db.execute(
                    sql: """
                        INSERT INTO member_controls (cid, kind, client_id, value, until, by, at) VALUES (?, ?, ?, ?, ?, ?, ?)
                        ON CONFLICT (cid, kind, client_id) DO UPDATE SET value = excluded.value, until = excluded.until,
                            by = excluded.by, at = excluded.at
                        """, arguments: [cid, kind.rawValue, clientID, value, until, by, now])
            } else {
                try db.execute(
                    sql: "DELETE FROM member_controls WHERE cid = ? AND kind = ? AND client_id = ?",
                    arguments: [cid, kind.rawValue, clientID])
            }
            if db.changesCount > 0, !changed.contains(clientID) { changed.append(clientID) }
        }
        return changed
    }
}

extension SQLiteStore {
    func setMemberControls(
        cid: String, kind: MemberControl.Kind, clientIDs: [String], on: Bool, value: String?, until: Int64?, by: String, now: Int64
    ) async throws -> [String] {
        try await db.write { db in
            try MemberControlTable.set(db, cid: cid, kind: kind, clientIDs: clientIDs, on: on, value: value, until: until, by: by, now: now)
        }
    }

    func memberControls(cid: String, now: Int64) async throws -> [MemberControl] {
        try await db.read { db in try MemberControlTable.all(db, cid: cid, now: now) }
    }
}
